"""Serving an ASGI application with hypercorn (HTTP/1.1, and HTTP/2 over TLS or h2c) in the
server's own event loop, on a socket bound here so a taken port fails at start and port 0 is
known. What a stranger may hold is bounded before any byte of a request is read
(docs/security.md, The HTTP edge): connections, in all and per address (`connections.py`); the
time to send a request's headers (and to start the next one on an idle connection) and to finish
a TLS handshake, `http_request_timeout` each (hypercorn's keep-alive and handshake timeouts); its
body's time is `deadline.py`'s. Accept failures for want of descriptors are logged throttled."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl

from hypercorn.asyncio.run import worker_serve
from hypercorn.config import Config, Sockets
from hypercorn.utils import wrap_app
from starlette.types import ASGIApp

from turngate.service.config import Settings, host_and_port
from turngate.service.web.accept_errors import quiet_accept_errors
from turngate.service.web.connections import REFUSAL, ConnectionGate, GatedSocket

log = logging.getLogger("turngate.http")
access_log = logging.getLogger("turngate.http.access")
# Client address, request line, status, response bytes, seconds (hypercorn's access log atoms).
ACCESS_LOG_FORMAT = '%(h)s "%(r)s" %(s)s %(b)s %(L)ss'


class HttpListener:
    """`app` served on `address`; with `tls`, over TLS with that context (mutual TLS if it asks
    for client certificates). `access` logs a line per request."""

    def __init__(
        self,
        address: str,
        app: ASGIApp,
        settings: Settings,
        gate: ConnectionGate,
        *,
        tls: ssl.SSLContext | None = None,
        access: bool = False,
    ) -> None:
        self._address = address
        self._app = app
        self._settings = settings
        self._gate = gate
        self._tls = tls
        self._access = access
        self._stopping = asyncio.Event()
        self._serving: asyncio.Task[None] | None = None
        self.port = 0

    def start(self) -> None:
        """Binds (OSError if it cannot) and starts serving."""
        host, port = host_and_port(self._address)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        # The workers of `serve --workers` share the port, as they share the gRPC one.
        bound = socket.create_server((host, port), family=family, reuse_port=self._settings.worker_count != 1)
        self.port = bound.getsockname()[1]
        listening = GatedSocket(bound, self._gate, b"" if self._tls else REFUSAL)
        sockets = Sockets([listening], [], []) if self._tls else Sockets([], [listening], [])
        quiet_accept_errors(asyncio.get_running_loop())
        config = _config(self._settings, self._tls, self._access)
        self._serving = asyncio.create_task(
            worker_serve(
                wrap_app(self._app, config.wsgi_max_body_size, "asgi"),  # type: ignore[arg-type]
                config,
                sockets=sockets,
                shutdown_trigger=self._stopping.wait,
            ),
            name="turngate-http",
        )

    async def stop(self) -> None:
        """Stops accepting; requests in flight get the shutdown grace to finish."""
        self._stopping.set()
        if self._serving is not None:
            await self._serving


class _Config(Config):
    """hypercorn's settings, serving TLS with the context handed in (hypercorn would read the
    certificate files itself, once: a reload would never reach it)."""

    def __init__(self, tls: ssl.SSLContext | None) -> None:
        super().__init__()
        self._tls = tls

    @property
    def ssl_enabled(self) -> bool:
        return self._tls is not None

    def create_ssl_context(self) -> ssl.SSLContext | None:
        return self._tls


def _config(settings: Settings, tls: ssl.SSLContext | None, access: bool) -> Config:
    config = _Config(tls)
    config.errorlog = log
    config.accesslog = access_log if access else None
    config.access_log_format = ACCESS_LOG_FORMAT
    config.graceful_timeout = settings.shutdown_grace
    # The idle timer runs from the connection's opening (or its last response) until a request's
    # headers are in: it bounds both an idle keep-alive connection and slowly sent headers.
    config.keep_alive_timeout = settings.http_request_timeout
    config.ssl_handshake_timeout = settings.http_request_timeout
    return config
