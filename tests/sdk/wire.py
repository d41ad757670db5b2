"""A client interceptor for SDK tests: counts every attempt the SDK sends, by method, and can fail,
hold, mute or alter them to play a flaky network, a stuck heartbeat, a push path that went quiet
or a cursor the service cannot resume."""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from google.protobuf.message import Message


def _method(details: grpc.aio.ClientCallDetails) -> str:
    method: str | bytes = details.method  # typed str; grpc.aio passes bytes
    name = method.decode() if isinstance(method, bytes) else method
    return name.rsplit("/", 1)[-1]


def _unavailable(what: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(grpc.StatusCode.UNAVAILABLE, None, None, f"injected by the test: {what}")


class Wire:
    """Sits inside the SDK's OpenTelemetry interceptors (`Client(interceptors=wire.interceptors)`),
    on every attempt."""

    def __init__(self) -> None:
        self.sent: Counter[str] = Counter()
        """Attempts per method (e.g. `Heartbeat`), failed ones included."""
        self.requests: defaultdict[str, list[Message]] = defaultdict(list)
        self._lost_before: Counter[str] = Counter()
        self._lost_after: Counter[str] = Counter()
        self._held: dict[str, asyncio.Event] = {}
        self._rewrites: dict[str, Callable[[Message], None]] = {}
        self.mute_watch = False
        """Watch streams opened from now on deliver their first event (the snapshot), then nothing."""
        # A channel files each interceptor under one kind of call only: one per kind.
        self.interceptors: list[grpc.aio.ClientInterceptor] = [_Unary(self), _Stream(self)]

    def lose(self, method: str, times: int = 1, *, after_sending: bool = False) -> None:
        """The next `times` attempts fail UNAVAILABLE: before reaching the service, or after it
        answered (the reply is lost, as when a connection drops)."""
        (self._lost_after if after_sending else self._lost_before)[method] += times

    def hold(self, method: str) -> asyncio.Event:
        """Attempts of `method` wait (unsent) until the returned event is set."""
        return self._held.setdefault(method, asyncio.Event())

    def rewrite_next(self, method: str, change: Callable[[Message], None]) -> None:
        """The next attempt of `method` is sent as a copy of its request that `change` altered
        (e.g. a watch's cursor, to make the service resync it)."""
        self._rewrites[method] = change

    async def attempt(self, details: grpc.aio.ClientCallDetails, request: Message) -> tuple[str, Message]:
        """The method, and the request to send for it."""
        method = _method(details)
        self.sent[method] += 1
        self.requests[method].append(request)
        if method in self._held:
            await self._held[method].wait()
        if self._lost_before[method] > 0:
            self._lost_before[method] -= 1
            raise _unavailable(f"{method} lost before sending")
        if (change := self._rewrites.pop(method, None)) is not None:
            altered = type(request)()
            altered.CopyFrom(request)
            change(altered)
            return method, altered
        return method, request

    def reply_lost(self, method: str) -> bool:
        if self._lost_after[method] == 0:
            return False
        self._lost_after[method] -= 1
        return True


class _Unary(grpc.aio.UnaryUnaryClientInterceptor):
    def __init__(self, wire: Wire) -> None:
        self._wire = wire

    async def intercept_unary_unary(
        self,
        continuation: Callable[[grpc.aio.ClientCallDetails, Any], Awaitable[Any]],
        client_call_details: grpc.aio.ClientCallDetails,
        request: Any,
    ) -> Any:
        method, request = await self._wire.attempt(client_call_details, request)
        call = await continuation(client_call_details, request)
        if self._wire.reply_lost(method):
            await call
            raise _unavailable(f"{method} reply lost")
        return call


class _Stream(grpc.aio.UnaryStreamClientInterceptor):
    def __init__(self, wire: Wire) -> None:
        self._wire = wire

    async def intercept_unary_stream(
        self,
        continuation: Callable[[grpc.aio.ClientCallDetails, Any], Awaitable[Any]],
        client_call_details: grpc.aio.ClientCallDetails,
        request: Any,
    ) -> Any:
        _, request = await self._wire.attempt(client_call_details, request)
        call = await continuation(client_call_details, request)
        return _first_only(call) if self._wire.mute_watch else call


async def _first_only(call: AsyncIterator[Any]) -> AsyncIterator[Any]:
    async for response in call:
        yield response
        break
    await asyncio.Event().wait()
