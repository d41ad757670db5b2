"""The edge every turngate RPC passes first, in this order: authentication (bearer token →
principal, else UNAUTHENTICATED), the role the RPC needs or a session token's scope (else
PERMISSION_DENIED), a decodable request (else INVALID_ARGUMENT), the project the request names or
a session token's session (else PERMISSION_DENIED), and a default deadline for unary calls whose
caller set none. Nothing is read or changed before all of them pass. The first two need only the
call's headers (`Gatekeeper.admit`): the HTTP listener asks the same before it reads a body
(web/gate.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator
from contextvars import ContextVar
from typing import Any, NoReturn

import grpc
from google.protobuf.message import Message

from turngate.service.api import errors
from turngate.service.api.decoding import Undecodable
from turngate.service.auth import access
from turngate.service.auth.gatekeeper import Denial, Gatekeeper
from turngate.service.auth.principals import ANONYMOUS, Principal
from turngate.service.peers import caller
from turngate.service.wrapping import Context, Streaming, Unary, WrappingInterceptor

log = logging.getLogger("turngate.auth")


# The caller of the RPC being served. Each RPC is served in its own task, whose context this
# is set in, so it never leaks into another RPC.
current_principal: ContextVar[Principal] = ContextVar("turngate_principal", default=ANONYMOUS)


class Edge(WrappingInterceptor):
    def __init__(self, gatekeeper: Gatekeeper, rpc_timeout: float) -> None:
        self._gatekeeper = gatekeeper
        self._rpc_timeout = rpc_timeout

    def wraps(self, method: str) -> bool:
        return not access.is_open(method)

    def unary(self, method: str, behavior: Unary) -> Unary:
        async def admitted(request: Any, context: Context) -> Any:
            await self._admit(method, request, context)
            if context.time_remaining() is not None:
                return await behavior(request, context)
            try:
                async with asyncio.timeout(self._rpc_timeout):
                    return await behavior(request, context)
            except TimeoutError:
                await errors.abort(
                    context, errors.deadline_exceeded(f"no answer within {self._rpc_timeout:g}s")
                )

        return admitted

    def streaming(self, method: str, behavior: Streaming) -> Streaming:
        async def admitted(request: Any, context: Context) -> AsyncGenerator[Any, None]:
            principal = await self._admit(method, request, context)
            # Closed with this stream, so the handler releases its watch at once, not when collected.
            async with contextlib.aclosing(behavior(request, context)) as responses:
                expires_at = principal.expires_at
                sent = responses if expires_at is None else _until(expires_at, responses, context)
                async for response in sent:
                    yield response

        return admitted

    async def _admit(self, method: str, request: Message | Undecodable, context: Context) -> Principal:
        metadata = context.invocation_metadata() or ()
        authorization = [value for key, value in metadata if key == "authorization"]
        principal = self._gatekeeper.admit(method, authorization, caller(context.peer(), metadata))
        if isinstance(principal, Denial):
            denied = principal.code is grpc.StatusCode.PERMISSION_DENIED
            refusal = errors.permission_denied if denied else errors.unauthenticated
            await errors.abort(context, refusal(principal.message))
        if isinstance(request, Undecodable):
            await errors.abort(context, errors.undecodable(request.message))
        if denial := access.project_denial(principal, request):
            await _deny(method, denial, context)
        current_principal.set(principal)
        return principal


async def _until(
    expires_at: float, responses: AsyncGenerator[Any, None], context: Context
) -> AsyncGenerator[Any, None]:
    """`responses` until `expires_at` (epoch seconds), then UNAUTHENTICATED: a stream lives no
    longer than the credential that opened it (its client resumes with a new one)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + (expires_at - time.time())
    while True:
        try:
            # Only the wait is timed: the deadline must not cancel the caller while it sends.
            async with asyncio.timeout_at(deadline):
                response = await anext(responses)
        except StopAsyncIteration:
            return
        except TimeoutError:
            await errors.abort(
                context, errors.unauthenticated("the session token expired; resume with a new one")
            )
        yield response


async def _deny(method: str, denial: str, context: Context) -> NoReturn:
    log.warning("refused %s: %s", method, denial)
    await errors.abort(context, errors.permission_denied(denial))
