"""The edge every turngate RPC passes first, in this order: authentication (bearer token →
principal, else UNAUTHENTICATED), the role the RPC needs or a session token's scope (else
PERMISSION_DENIED), a decodable request (else INVALID_ARGUMENT), the project the request names or
a session token's session (else PERMISSION_DENIED), and a default deadline for unary calls whose
caller set none. Nothing is read or changed before all of them pass."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator
from contextvars import ContextVar
from typing import Any, NoReturn

from google.protobuf.message import Message

from turngate.service.api import errors
from turngate.service.api.decoding import Undecodable
from turngate.service.auth import access
from turngate.service.auth.principals import ANONYMOUS, Principal, Tokens
from turngate.service.auth.session_tokens import Refused, SessionTokenKeys
from turngate.service.wrapping import Context, Streaming, Unary, WrappingInterceptor

log = logging.getLogger("turngate.auth")


# The caller of the RPC being served. Each RPC is served in its own task, whose context this
# is set in, so it never leaks into another RPC.
current_principal: ContextVar[Principal] = ContextVar("turngate_principal", default=ANONYMOUS)

_BEARER = "bearer "
_MAX_TOKEN = 4096


class Gatekeeper:
    """Whom tokens name; `tokens` None means authentication is off (every caller is ANONYMOUS).
    A bearer token the tokens file does not list may be a session token, checked with
    `session_keys` (None: session tokens are off). Each is replaced whole on reload, so a call
    sees either the old one or the new one."""

    def __init__(self, tokens: Tokens | None, session_keys: SessionTokenKeys | None = None) -> None:
        self.tokens = tokens
        self.session_keys = session_keys

    def authenticate(self, context: Context) -> Principal | None:
        tokens = self.tokens
        if tokens is None:
            return ANONYMOUS
        values = [value for key, value in context.invocation_metadata() or () if key == "authorization"]
        if len(values) != 1 or not isinstance(values[0], str):
            return None
        header = values[0]
        if len(header) > _MAX_TOKEN or header[: len(_BEARER)].lower() != _BEARER:
            return None
        token = header[len(_BEARER) :].strip(" \t")
        return tokens.identify(token) or self._session_principal(token, tokens)

    def _session_principal(self, token: str, tokens: Tokens) -> Principal | None:
        keys = self.session_keys
        if keys is None or token.count(".") != 2:
            return None
        try:
            minter, principal = keys.verify(token)
        except Refused as error:
            log.info("session token refused: %s", error)
            return None
        assert principal.reach is not None
        # Revoking a gateway's entry (the tokens file, reloaded) revokes the session tokens it
        # minted, even if a principal of the same name is listed again later.
        entry = tokens.entry(minter.entry)
        if (
            entry is None
            or entry.name != minter.name
            or not access.may_mint(entry, principal.reach.project_id)
        ):
            log.info("session token refused: its minter %r may no longer mint for its project", minter.name)
            return None
        return principal


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
        principal = self._gatekeeper.authenticate(context)
        if principal is None:
            log.warning("refused %s: missing or unknown bearer token from %s", method, context.peer())
            await errors.abort(
                context, errors.unauthenticated("a valid bearer token is required (authorization metadata)")
            )
        if denial := access.role_denial(principal, method):
            await _deny(method, denial, context)
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
