"""OpenTelemetry in the SDK, when it is installed (`pip install 'turngate-client[otel]'`): the
runner-side span of a turn, its attributes, and the gRPC client interceptors that trace every
call and carry the W3C traceparent (docs/telemetry.md).

This module is the one place that decides: with `opentelemetry-api` and
`opentelemetry-instrumentation-grpc` importable, the SDK traces as documented; without either,
it traces nothing and propagates nothing, and works the same otherwise.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

import grpc

try:
    from opentelemetry import trace as _trace
    from opentelemetry.instrumentation.grpc import aio_client_interceptors as _aio_client_interceptors
except ImportError:  # the `otel` extra is not installed
    ENABLED = False
else:
    ENABLED = True

if TYPE_CHECKING or ENABLED:
    from opentelemetry.trace import TracerProvider
else:

    class TracerProvider:
        """Stands for `opentelemetry.trace.TracerProvider` where OpenTelemetry is not installed."""


log = logging.getLogger("turngate.client")

TRACER_NAME = "turngate.client"
TURN_SPAN = "turngate.turn"
PROJECT_ID = "turngate.project_id"
SESSION_ID = "turngate.session_id"
TURN_ID = "turngate.turn_id"
GENERATION = "turngate.generation"
OUTCOME = "turngate.outcome"
SETTLED_BY = "turngate.settled_by"
REFUSAL = "turngate.refusal"

__all__ = ["ENABLED", "Span", "Tracer", "TracerProvider", "client_interceptors", "tracer"]


class Span(Protocol):
    """What the SDK does with a span: set attributes on it."""

    def set_attribute(self, key: str, value: str | int) -> object: ...


class _NoSpan:
    def set_attribute(self, key: str, value: str | int) -> None:
        pass


class Tracer:
    """Starts the SDK's spans: OpenTelemetry's tracer from a provider (the global one when None),
    or nothing when OpenTelemetry is not installed."""

    def __init__(self, provider: TracerProvider | None) -> None:
        self._tracer = _trace.get_tracer(TRACER_NAME, tracer_provider=provider) if ENABLED else None

    @contextmanager
    def span(self, name: str, attributes: dict[str, str]) -> Iterator[Span]:
        """A span, current while the block runs (so the calls made in it are its children)."""
        if self._tracer is None:
            yield _NoSpan()
            return
        with self._tracer.start_as_current_span(name, attributes=attributes) as span:
            yield span


def tracer(provider: TracerProvider | None) -> Tracer:
    """The SDK's tracer, from `provider` or the global one (a no-op until one is configured)."""
    return Tracer(provider)


def client_interceptors(provider: TracerProvider | None) -> Sequence[grpc.aio.ClientInterceptor]:
    """OpenTelemetry's grpc.aio client interceptors: every call a client span, child of the
    current span, carrying the W3C traceparent. None without OpenTelemetry."""
    if not ENABLED:
        if provider is not None:
            log.warning("tracer_provider given, but opentelemetry-instrumentation-grpc is not installed")
        return ()
    interceptors: list[Any] = _aio_client_interceptors(tracer_provider=provider)  # type: ignore[no-untyped-call]
    return interceptors
