"""With authentication off, only loopback host names: a page of another site that a DNS record
points at 127.0.0.1 (DNS rebinding) sends its own name in `Host`, and is refused 421 before
anything reads its request (docs/security.md, The HTTP edge)."""

from __future__ import annotations

from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from turngate.service.web.answers import plain

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


class LoopbackHosts:
    """Serves `app` only to requests whose Host (`:authority` in HTTP/2) names one of `names`
    (a loopback name, or the listen address's host), with any port."""

    def __init__(self, app: ASGIApp, names: Iterable[str]) -> None:
        self._app = app
        self._names = frozenset(name.lower() for name in names) | LOOPBACK_NAMES

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and _host(scope["headers"]) not in self._names:
            await plain(
                scope,
                receive,
                send,
                421,
                "misdirected request: with authentication off this server answers only to localhost, "
                "127.0.0.1 and [::1]",
                close=True,
            )
            return
        await self._app(scope, receive, send)


def _host(headers: list[tuple[bytes, bytes]]) -> str:
    """The host name a request's Host header names, without its port or IPv6 brackets ("" if none)."""
    values = [value for name, value in headers if name == b"host"]
    if len(values) != 1:
        return ""
    host = values[0].decode("latin-1").strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else ""
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host
