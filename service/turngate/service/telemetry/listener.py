"""The metrics listener (`--metrics-listen`): Prometheus text at `/metrics`, liveness at `/healthz`
and readiness at `/readyz`, 404 anywhere else.

`/healthz` and `/readyz` answer what the gRPC health service says (`liveness` and the overall
status ""), handed in by the server with `follow`: the probes of an orchestrator that cannot speak
gRPC see the same thing as gRPC health checks. Before a server follows (or in a process without
one) `/readyz` answers 503; `/healthz` answers 200 while the process serves.

prometheus_client's own server answers the metrics on every path, hence this small WSGI app in
front of its `make_wsgi_app`, served by the standard library's WSGI server on a thread.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

Probe = Callable[[], bool]


class _Probes:
    """What `/healthz` and `/readyz` ask; the server that follows last wins."""

    live: Probe = staticmethod(lambda: True)
    ready: Probe = staticmethod(lambda: False)
    followed = False


_probes = _Probes()


def follow(*, live: Probe, ready: Probe) -> None:
    """From now on `/healthz` answers 200 when `live()` and `/readyz` when `ready()`, else 503."""
    _probes.live, _probes.ready, _probes.followed = live, ready, True


def forget() -> None:
    """Back to no server followed: `/readyz` answers 503."""
    _probes.live, _probes.ready, _probes.followed = _Probes.live, _Probes.ready, False


def readiness() -> bool | None:
    """Whether the server followed is ready; None if none is (the `turngate.ready` gauge)."""
    return _probes.ready() if _probes.followed else None


def app(registry: CollectorRegistry) -> WSGIApplication:
    """The listener's WSGI application."""
    metrics = make_wsgi_app(registry)

    def serve(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        match environ.get("PATH_INFO", ""):
            case "/metrics":
                answer: Iterable[bytes] = metrics(environ, start_response)
                return answer
            case "/healthz":
                return _answer(start_response, _probes.live(), "live")
            case "/readyz":
                return _answer(start_response, _probes.ready(), "ready")
            case _:
                start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
                return [b"not found: /metrics, /healthz or /readyz\n"]

    return serve


def _answer(start_response: StartResponse, ok: bool, what: str) -> Iterable[bytes]:
    status, body = ("200 OK", what) if ok else ("503 Service Unavailable", f"not {what}")
    start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
    return [f"{body}\n".encode()]


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    """Scrapes and probes are not logged (they come every few seconds)."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


class Listener:
    """The listener serving on a thread until `close()`."""

    def __init__(self, host: str, port: int, registry: CollectorRegistry) -> None:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        server_class = type("_Listening", (_Server,), {"address_family": family})
        self._server: WSGIServer = make_server(
            host, port, app(registry), server_class=server_class, handler_class=_Quiet
        )
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
