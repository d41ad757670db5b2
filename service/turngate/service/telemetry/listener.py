"""The metrics listener's application (`--metrics-listen`): Prometheus text at `/metrics`,
liveness at `/healthz` and readiness at `/readyz`, 404 anywhere else. The server serves it with
its HTTP listener machinery, in its event loop and with the same bounds on strangers
(web/listener.py).

`/healthz` and `/readyz` answer what the gRPC health service says (`liveness` and the overall
status ""), handed in by the server with `probes.follow`: the probes of an orchestrator that cannot speak
gRPC see the same thing as gRPC health checks. Before a server follows (or in a process without
one) `/readyz` answers 503; `/healthz` answers 200 while the process serves.

prometheus_client's own application answers the metrics on every path, hence the routing in
front of its `make_asgi_app`.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, make_asgi_app
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from turngate.service.telemetry.probes import is_live, is_ready


def app(registry: CollectorRegistry) -> ASGIApp:
    """The listener's ASGI application."""
    metrics: ASGIApp = make_asgi_app(registry)

    async def serve(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # the server's lifespan: nothing to start or stop
            return
        match scope["path"]:
            case "/metrics":
                await metrics(scope, receive, send)
                return
            case "/healthz":
                answer = _answer(is_live(), "live")
            case "/readyz":
                answer = _answer(is_ready(), "ready")
            case _:
                answer = PlainTextResponse("not found: /metrics, /healthz or /readyz\n", 404)
        await answer(scope, receive, send)

    return serve


def _answer(ok: bool, what: str) -> PlainTextResponse:
    return PlainTextResponse(f"{what}\n") if ok else PlainTextResponse(f"not {what}\n", 503)
