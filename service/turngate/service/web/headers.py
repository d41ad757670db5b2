"""Request headers checked before anything reads them. connectrpc decodes every header as UTF-8
(a value that is not would be a 500 and a traceback), gRPC metadata takes printable ASCII only,
and a few protocol headers would be echoed in connectrpc's own refusals. So a header whose value
is not text (bytes that are not UTF-8, control characters), a forwarded header that is not
printable ASCII, or a protocol header that is not well-formed is taken out of the request and
its name kept in `MALFORMED`: the gate (gate.py) refuses the call once its caller is known,
naming no value (docs/security.md, The HTTP edge).

A request that frames its body twice (Content-Length and Transfer-Encoding, a request-smuggling
sign: RFC 9112 §6.3) is answered 400 and its connection closed before anything else."""

from __future__ import annotations

import re
from collections.abc import Collection
from contextvars import ContextVar

from starlette.types import ASGIApp, Receive, Scope, Send

from turngate.service.web.answers import plain

# The names of the headers taken out of the request being served (its own task's context).
MALFORMED: ContextVar[frozenset[str]] = ContextVar("turngate_malformed_headers", default=frozenset())

_TOKEN = re.compile(rb"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
# Visible ASCII, spaces and tabs: what gRPC metadata may carry.
_PRINTABLE = re.compile(rb"^[\t\x20-\x7e]*$")
# What a header value may not hold whatever its encoding: control characters (DEL too).
_CONTROL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
_TIMEOUTS = {
    b"connect-timeout-ms": re.compile(rb"^[0-9]{1,10}$"),
    b"grpc-timeout": re.compile(rb"^[0-9]{1,8}[HMSmun]$"),
}
_ENCODINGS = (b"content-encoding", b"connect-content-encoding", b"grpc-encoding")
_PROTOCOL_VERSION = b"connect-protocol-version"


class HeaderCheck:
    """Takes malformed headers out of each request (noting them in MALFORMED) and refuses one
    whose body is framed twice. `forwarded` are the headers sent on as gRPC metadata, `encodings`
    the content encodings the RPCs accept."""

    def __init__(self, app: ASGIApp, forwarded: Collection[str], encodings: Collection[str]) -> None:
        self._app = app
        self._forwarded = frozenset(name.encode() for name in forwarded)
        self._encodings = frozenset(name.encode() for name in encodings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        names = {name for name, _ in headers}
        if b"content-length" in names and b"transfer-encoding" in names:
            await plain(
                scope,
                receive,
                send,
                400,
                "a request may not have both Content-Length and Transfer-Encoding",
                close=True,
            )
            return
        malformed = {name for name, value in headers if not self._well_formed(name, value)}
        if malformed:
            MALFORMED.set(frozenset(name.decode("ascii", "replace") for name in malformed))
            scope = {**scope, "headers": [(name, value) for name, value in headers if name not in malformed]}
        await self._app(scope, receive, send)

    def _well_formed(self, name: bytes, value: bytes) -> bool:
        if not _TOKEN.match(name) or _CONTROL.search(value):
            return False
        if name in self._forwarded and not _PRINTABLE.match(value):
            return False
        if name in _TIMEOUTS:
            return _TIMEOUTS[name].match(value) is not None
        if name in _ENCODINGS:
            return value.strip().lower() in self._encodings
        if name == _PROTOCOL_VERSION:
            return value == b"1"
        try:
            value.decode()
        except UnicodeDecodeError:
            return False
        return True
