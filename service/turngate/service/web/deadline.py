"""A request's body must arrive whole within a bound of its headers (`http_request_timeout`):
a client sending it a byte at a time is answered deadline_exceeded and its connection closed,
instead of holding the connection (and the RPC's place) for as long as it likes. Only the body
is timed: once it is in, a watch's response may stream for hours."""

from __future__ import annotations

import asyncio

from connectrpc.code import Code
from connectrpc.errors import ConnectError
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyDeadline:
    """`app` (a connectrpc application), its requests' bodies read within `seconds`."""

    def __init__(self, app: ASGIApp, seconds: float) -> None:
        self._app = app
        self._seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        deadline = asyncio.get_running_loop().time() + self._seconds
        body_done = False

        async def within_deadline() -> Message:
            nonlocal body_done
            if body_done:  # afterwards receive() only tells of a disconnect
                return await receive()
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                raise ConnectError(
                    Code.DEADLINE_EXCEEDED, f"the request's body did not arrive within {self._seconds:g}s"
                ) from None
            body_done = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        await self._app(scope, within_deadline, send)
