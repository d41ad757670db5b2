"""A short plain-text answer, sent by the HTTP edge's checks before any application sees the
request; `close` asks the server to close the connection after it (no next request on it)."""

from __future__ import annotations

from starlette.responses import PlainTextResponse
from starlette.types import Receive, Scope, Send


async def plain(
    scope: Scope, receive: Receive, send: Send, status: int, text: str, *, close: bool = False
) -> None:
    headers = {"connection": "close"} if close else None
    await PlainTextResponse(f"{text}\n", status, headers)(scope, receive, send)
