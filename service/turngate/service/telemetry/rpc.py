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
from collections.abc import AsyncGenerator
from typing import Any

import grpc
from opentelemetry.metrics import Histogram
from opentelemetry.semconv._incubating.attributes.rpc_attributes import (
    RPC_GRPC_STATUS_CODE,
    RPC_METHOD,
    RPC_SERVICE,
    RPC_SYSTEM,
)

from turngate.service.wrapping import Context, Streaming, Unary, WrappingInterceptor

_HEALTH = "/grpc.health.v1.Health/"
# Seconds: most answers take milliseconds; a Watch lasts as long as its watcher stays.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0, 600.0)


class Measured(WrappingInterceptor):
    """Records each RPC's duration in `histogram`."""

    def __init__(self, histogram: Histogram) -> None:
        self._histogram = histogram

    def wraps(self, method: str) -> bool:
        return not method.startswith(_HEALTH)

    def unary(self, method: str, behavior: Unary) -> Unary:
        attributes = _attributes(method)

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

    def streaming(self, method: str, behavior: Streaming) -> Streaming:
        attributes = _attributes(method)

        async def measured(request: Any, context: Context) -> AsyncGenerator[Any, None]:
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


def _attributes(method: str) -> dict[str, str]:
    service, _, name = method.lstrip("/").partition("/")
    return {RPC_SYSTEM: "grpc", RPC_SERVICE: service, RPC_METHOD: name}
