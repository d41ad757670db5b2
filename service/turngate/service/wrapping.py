"""Server interceptors that wrap what each RPC's handler does (the edge's checks, the RPC duration
metric): one place knows how a grpc.aio handler is taken apart and put back together."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, cast

import grpc

Context = grpc.aio.ServicerContext[Any, Any]
Unary = Callable[[Any, Context], Awaitable[Any]]
Streaming = Callable[[Any, Context], AsyncGenerator[Any, None]]


class WrappingInterceptor(grpc.aio.ServerInterceptor, ABC):
    """Wraps the unary and server-streaming behavior of every handler whose method `wraps`."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        method: str = handler_call_details.method
        if handler is None or not self.wraps(method):
            return handler
        # grpc's handlers are namedtuples: the wrapped behavior replaces the original.
        replaced: Any = handler
        if replaced.unary_unary is not None:
            replaced = replaced._replace(unary_unary=self.unary(method, replaced.unary_unary))
        elif replaced.unary_stream is not None:
            replaced = replaced._replace(unary_stream=self.streaming(method, replaced.unary_stream))
        return cast("grpc.RpcMethodHandler[Any, Any]", replaced)

    @abstractmethod
    def wraps(self, method: str) -> bool:
        """Whether the handlers of `method` (e.g. `/turngate.v1.AdmissionService/AdmitTurn`) are wrapped."""

    @abstractmethod
    def unary(self, method: str, behavior: Unary) -> Unary:
        """`behavior` of a unary RPC, wrapped."""

    @abstractmethod
    def streaming(self, method: str, behavior: Streaming) -> Streaming:
        """`behavior` of a server-streaming RPC, wrapped."""
