"""The HTTP listener's application: the contract's RPCs under `/turngate.v1.*` (bridge.py), the
operator console's files at `/` and `/console/`, and CORS for the origins the settings allow.
In front of them the checks a stranger meets before anything reads a request: loopback host
names when authentication is off (hosts.py), well-formed headers and one body framing
(headers.py); then, for an RPC, the gate (gate.py) before its body, which must arrive in time
(deadline.py) and decode (codecs.py)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

import grpc
from connectrpc.compression.gzip import GzipCompression
from connectrpc.server import ConnectASGIApplication
from starlette.applications import Starlette
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from turngate.service.auth.gatekeeper import Gatekeeper
from turngate.service.web import bridge
from turngate.service.web.bridge import FORWARDED_HEADERS
from turngate.service.web.codecs import CODECS
from turngate.service.web.deadline import BodyDeadline
from turngate.service.web.gate import Gate
from turngate.service.web.headers import HeaderCheck
from turngate.service.web.hosts import LoopbackHosts

CONSOLE = Path(__file__).with_name("console")
RPC_PREFIX = "/turngate.v1."
# What a browser may send to, and read from, an RPC of another origin (the Connect and gRPC-Web
# protocols' own headers, plus the credentials and trace context the bridge forwards).
ALLOWED_HEADERS = (
    "content-type",
    "connect-protocol-version",
    "connect-timeout-ms",
    "connect-accept-encoding",
    "connect-content-encoding",
    "grpc-timeout",
    "grpc-accept-encoding",
    "x-grpc-web",
    "x-user-agent",
    *FORWARDED_HEADERS,
)
EXPOSED_HEADERS = ("grpc-status", "grpc-message", "grpc-status-details-bin", "content-encoding")
COMPRESSIONS = (GzipCompression(),)
ENCODINGS = ("identity", *(compression.name() for compression in COMPRESSIONS))
# The console loads only its own files and talks only to this origin; nothing runners wrote can
# run as script even if it slipped past escaping.
CONSOLE_HEADERS = (
    (b"content-security-policy", b"default-src 'self'; frame-ancestors 'none'; base-uri 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
)


class _Rpcs(ConnectASGIApplication[grpc.aio.Channel]):
    """Every service of the contract in one application (its endpoints are keyed by full path)."""

    @property
    def path(self) -> str:
        return RPC_PREFIX


def application(
    channel: grpc.aio.Channel,
    gatekeeper: Gatekeeper,
    *,
    max_message_bytes: int,
    request_timeout: float,
    cors_origins: Sequence[str],
    trace_url: str | None,
    host_names: Collection[str] | None,
) -> ASGIApp:
    """The listener's ASGI application; `channel` reaches this process's gRPC server, whose
    `gatekeeper` the RPCs meet first. `host_names`: None when any Host is served (authentication
    is on), else the names served besides loopback's."""
    rpcs = BodyDeadline(
        _Rpcs(
            service=channel,
            endpoints=bridge.endpoints,
            interceptors=[Gate(gatekeeper, named=(*ALLOWED_HEADERS, "content-encoding", "grpc-encoding"))],
            # The same wire limit as gRPC's for binary; JSON spells the same message in more bytes.
            read_max_bytes=4 * max_message_bytes,
            compressions=COMPRESSIONS,
            codecs=CODECS,
        ),
        request_timeout,
    )
    console = _WithHeaders(_console(trace_url), CONSOLE_HEADERS)

    async def route(scope: Scope, receive: Receive, send: Send) -> None:
        inner = rpcs if scope["type"] == "http" and scope["path"].startswith(RPC_PREFIX) else console
        await inner(scope, receive, send)

    served: ASGIApp = route
    if cors_origins:
        served = CORSMiddleware(
            route,
            allow_origins=list(cors_origins),
            allow_methods=["GET", "POST"],
            allow_headers=list(ALLOWED_HEADERS),
            expose_headers=list(EXPOSED_HEADERS),
            max_age=7200,
        )
    served = HeaderCheck(served, forwarded=FORWARDED_HEADERS, encodings=ENCODINGS)
    return served if host_names is None else LoopbackHosts(served, host_names)


def _console(trace_url: str | None) -> ASGIApp:
    async def index(_: Request) -> Response:
        return FileResponse(CONSOLE / "index.html")

    async def config(_: Request) -> Response:
        return JSONResponse({"traceUrl": trace_url or ""})

    return Starlette(
        routes=[
            Route("/", index),
            Route("/console/config.json", config),
            Mount("/console", StaticFiles(directory=CONSOLE)),
        ]
    )


class _WithHeaders:
    """Adds `headers` to every response of `app`."""

    def __init__(self, app: ASGIApp, headers: Sequence[tuple[bytes, bytes]]) -> None:
        self._app = app
        self._headers = list(headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *self._headers]}
            await send(message)

        await self._app(scope, receive, send_with_headers)
