"""`rpc.server.call.duration` (OpenTelemetry's RPC metric conventions, in seconds) of each RPC, by
`rpc.system`, `rpc.service`, `rpc.method` and `rpc.grpc.status_code`.

opentelemetry-instrumentation-grpc records no server metrics, hence this interceptor. The status is
what the context holds when the handler ends (every abort sets it); an exception that escapes a
handler ends its RPC as UNKNOWN, a call its caller cancelled as CANCELLED. Health checks are not
measured: probes would drown the RPCs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, cast

import grpc
from opentelemetry.metrics import Histogram
from opentelemetry.semconv._incubating.attributes.rpc_attributes import (
    RPC_GRPC_STATUS_CODE,
    RPC_METHOD,
    RPC_SERVICE,
    RPC_SYSTEM,
)

Context = grpc.aio.ServicerContext[Any, Any]
_HEALTH = "/grpc.health.v1.Health/"
# Seconds: most answers take milliseconds; a Watch lasts as long as its watcher stays.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0, 600.0)


class Measured(grpc.aio.ServerInterceptor):
    """Records each RPC's duration in `histogram`."""

    def __init__(self, histogram: Histogram) -> None:
        self._histogram = histogram

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        method: str = handler_call_details.method
        if handler is None or method.startswith(_HEALTH):
            return handler
        service, _, name = method.lstrip("/").partition("/")
        attributes = {RPC_SYSTEM: "grpc", RPC_SERVICE: service, RPC_METHOD: name}
        # grpc's handlers are namedtuples: the wrapped behavior replaces the original.
        replaced: Any = handler
        if replaced.unary_unary is not None:
            replaced = replaced._replace(unary_unary=self._unary(attributes, replaced.unary_unary))
        elif replaced.unary_stream is not None:
            replaced = replaced._replace(unary_stream=self._streaming(attributes, replaced.unary_stream))
        return cast("grpc.RpcMethodHandler[Any, Any]", replaced)

    def _unary(
        self, attributes: dict[str, str], behavior: Callable[[Any, Context], Awaitable[Any]]
    ) -> Callable[[Any, Context], Awaitable[Any]]:
        async def measured(request: Any, context: Context) -> Any:
            started = time.monotonic()
            ended: grpc.StatusCode | None = grpc.StatusCode.UNKNOWN
            try:
                answer = await behavior(request, context)
                ended = None
                return answer
            except grpc.aio.AbortError:
                ended = None
                raise
            except asyncio.CancelledError:
                ended = grpc.StatusCode.CANCELLED
                raise
            finally:
                self._record(attributes, context, started, ended)

        return measured

    def _streaming(
        self, attributes: dict[str, str], behavior: Callable[[Any, Context], AsyncIterator[Any]]
    ) -> Callable[[Any, Context], AsyncIterator[Any]]:
        async def measured(request: Any, context: Context) -> AsyncIterator[Any]:
            started = time.monotonic()
            ended: grpc.StatusCode | None = grpc.StatusCode.UNKNOWN
            try:
                async for response in behavior(request, context):
                    yield response
                ended = None
            except grpc.aio.AbortError:
                ended = None
                raise
            except (asyncio.CancelledError, GeneratorExit):
                # The caller went away (cancelled, or its deadline passed): grpc cancels the stream.
                ended = grpc.StatusCode.CANCELLED
                raise
            finally:
                self._record(attributes, context, started, ended)

        return measured

    def _record(
        self, attributes: dict[str, str], context: Context, started: float, ended: grpc.StatusCode | None
    ) -> None:
        """`ended`: how the handler ended if not by returning or aborting; then the context's code
        holds the status (None until one is set: OK)."""
        code: grpc.StatusCode | None = ended or context.code()
        status = grpc.StatusCode.OK.value[0] if code is None else code.value[0]
        self._histogram.record(time.monotonic() - started, {**attributes, RPC_GRPC_STATUS_CODE: status})
