"""Serving the HTTP application with hypercorn (HTTP/1.1, and HTTP/2 over TLS or h2c) in the
server's own event loop, on a socket bound here so a taken port fails at start and port 0 is
known."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl

from hypercorn.asyncio import serve
from hypercorn.config import Config
from starlette.types import ASGIApp

from turngate.service.config import Settings, host_and_port

log = logging.getLogger("turngate.http")


class HttpListener:
    def __init__(self, settings: Settings, app: ASGIApp) -> None:
        assert settings.http_listen is not None
        self._settings = settings
        self._app = app
        self._stopping = asyncio.Event()
        self._serving: asyncio.Task[None] | None = None
        self.port = 0

    def start(self) -> None:
        """Binds (OSError if it cannot) and starts serving."""
        settings = self._settings
        assert settings.http_listen is not None
        host, port = host_and_port(settings.http_listen)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        # The workers of `serve --workers` share the port, as they share the gRPC one.
        bound = socket.create_server((host, port), family=family, reuse_port=settings.workers != 1)
        self.port = bound.getsockname()[1]
        config = Config()
        config.bind = [f"fd://{bound.detach()}"]
        config.errorlog = log
        config.accesslog = None
        config.graceful_timeout = settings.shutdown_grace
        config.keep_alive_timeout = settings.keepalive_time
        if settings.tls_cert is not None and settings.tls_key is not None:
            config.certfile, config.keyfile = str(settings.tls_cert), str(settings.tls_key)
            if settings.tls_client_ca is not None:
                config.ca_certs = str(settings.tls_client_ca)
                config.verify_mode = ssl.CERT_REQUIRED
        self._serving = asyncio.create_task(
            serve(self._app, config, shutdown_trigger=self._stopping.wait, mode="asgi"),  # type: ignore[arg-type]
            name="turngate-http",
        )

    async def stop(self) -> None:
        """Stops accepting; requests in flight get the shutdown grace to finish."""
        self._stopping.set()
        if self._serving is not None:
            await self._serving
