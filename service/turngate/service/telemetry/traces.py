"""Spans: the server span of each RPC (`spans.ServerInterceptor`) and turngate's own.

Tracing is on once `enable()` finds an SDK tracer provider installed in the process (by
`setup.configured`, or by a test). Until then no span is started anywhere: each helper hands back
a null context holding the invalid span, so the hot path does no span work at all.

* `turngate.store.apply` encloses one store apply (every attempt of its compare-and-set);
* `turngate.decide` encloses each run of the core's decide() (one per attempt);
* `turngate.watchdog.settle` encloses the watchdog's apply of Expire to one session, as a root.

A span whose apply settled a turn describes that turn and links to the span context that
admitted it (the traceparent stored with the turn), so a turn settled after its runner died, or
by a Stop, still leads back to the runner's trace. A span whose apply promoted a turn from the
queue names it and links to the span context that queued it (kept while it waited), so the
runner's trace leads on to the write that started its turn.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import assert_never

import grpc
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.instrumentation.grpc import filters
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.semconv._incubating.attributes.rpc_attributes import RPC_GRPC_STATUS_CODE
from opentelemetry.trace import INVALID_SPAN, Span, SpanContext, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from turngate.service.core import (
    AcknowledgeSteer,
    Admit,
    Admitted,
    Cancel,
    ClearQueue,
    Command,
    Complete,
    Decision,
    Expire,
    Heartbeat,
    MoveQueuedTurn,
    Queued,
    RecordInteraction,
    RecordToolCall,
    Refusal,
    ResolveInteraction,
    ResumeQueue,
    Retire,
    SessionKey,
    SteerTurn,
    TurnAdmitted,
    TurnSettled,
)
from turngate.service.ports.store import Applied
from turngate.service.telemetry.attributes import PREFIX, Fields, event_fields, prefixed, session_fields
from turngate.service.telemetry.spans import ServerInterceptor

STORE_APPLY = "turngate.store.apply"
DECIDE = "turngate.decide"
WATCHDOG_SETTLE = "turngate.watchdog.settle"
COMMAND = PREFIX + "command"
ATTEMPTS = PREFIX + "attempts"
CHANGED = PREFIX + "changed"
REFUSAL = PREFIX + "refusal"
GENERATION = PREFIX + "generation"
TRACE_ID = PREFIX + "trace_id"
POSITION = PREFIX + "position"
PROMOTED_TURN_ID = PREFIX + "promoted_turn_id"
PROMOTED_GENERATION = PREFIX + "promoted_generation"
# A server span is an error for these codes only (OpenTelemetry's semantic conventions for gRPC).
_SERVER_ERRORS = frozenset(
    {
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)
_OFF: AbstractContextManager[Span] = nullcontext(INVALID_SPAN)
_TRACE_CONTEXT = TraceContextTextMapPropagator()
_tracer: Tracer | None = None


def enable() -> bool:
    """Turns tracing on if an SDK tracer provider is installed (off otherwise); returns whether."""
    global _tracer
    provider = trace.get_tracer_provider()
    _tracer = provider.get_tracer("turngate") if isinstance(provider, TracerProvider) else None
    return _tracer is not None


def server_interceptors() -> list[grpc.aio.ServerInterceptor]:
    """A server span per RPC, the child of the caller's traceparent; none while tracing is off.
    Health checks make none: probes would drown the RPCs."""
    if _tracer is None:
        return []
    interceptor: grpc.aio.ServerInterceptor = ServerInterceptor(  # type: ignore[no-untyped-call]
        _tracer, filter_=filters.negate(filters.health_check())
    )
    return [interceptor]


def applying(key: SessionKey, command: Command) -> AbstractContextManager[Span]:
    """The `turngate.store.apply` span of one apply."""
    if _tracer is None:
        return _OFF
    attributes = prefixed({**session_fields(key), **_command_fields(command)})
    attributes[COMMAND] = type(command).__name__
    return _tracer.start_as_current_span(STORE_APPLY, attributes=attributes)


def applied(span: Span, done: Applied, *, attempts: int) -> None:
    """What the apply decided: its refusal, the generation it admitted or the queue position it
    gave, the turns it settled and promoted."""
    if not span.is_recording():
        return
    span.set_attribute(ATTEMPTS, attempts)
    reply = done.decision.reply
    if isinstance(reply, Refusal):
        span.set_attribute(REFUSAL, reply.reason.name)
    elif isinstance(reply, Admitted):
        span.set_attribute(GENERATION, reply.generation)
    elif isinstance(reply, Queued):
        span.set_attribute(POSITION, reply.position)
    turns_moved(span, done.decision)


def deciding(command: Command) -> AbstractContextManager[Span]:
    """The `turngate.decide` span of one decide()."""
    if _tracer is None:
        return _OFF
    return _tracer.start_as_current_span(DECIDE, attributes={COMMAND: type(command).__name__})


def decided(span: Span, decision: Decision) -> None:
    """Whether decide() changed anything (nothing to write when not)."""
    if span.is_recording():
        span.set_attribute(CHANGED, decision.changed)


def settling(key: SessionKey) -> AbstractContextManager[Span]:
    """The watchdog's `turngate.watchdog.settle` span for one session: a root."""
    if _tracer is None:
        return _OFF
    return _tracer.start_as_current_span(
        WATCHDOG_SETTLE, context=otel_context.Context(), attributes=prefixed(session_fields(key))
    )


def turns_moved(span: Span, decision: Decision) -> None:
    """If `decision` settled a turn: the turn, its outcome, who settled it, its trace id, and a
    link to the span context that admitted it. If it promoted a turn from the queue: that turn,
    its generation, and a link to the span context that queued it (naming the turn)."""
    if not span.is_recording():
        return
    for event in decision.events:
        match event.body:
            case TurnSettled() as body:
                span.set_attributes(prefixed(event_fields(event)))
                admitting = _admitting_context(body.traceparent)
                if admitting is not None:
                    span.set_attribute(TRACE_ID, trace.format_trace_id(admitting.trace_id))
                    span.add_link(admitting)
            case TurnAdmitted(from_queue=True) as body:
                span.set_attribute(PROMOTED_TURN_ID, body.turn_id)
                span.set_attribute(PROMOTED_GENERATION, body.generation)
                queuing = _admitting_context(body.traceparent)
                if queuing is not None:
                    span.add_link(queuing, prefixed({"turn_id": body.turn_id, "generation": body.generation}))


def _admitting_context(traceparent: str) -> SpanContext | None:
    """The span context of a W3C traceparent (the one stored with a turn, or with a queued turn);
    None if there is none."""
    carrier = {"traceparent": traceparent}
    context = trace.get_current_span(_TRACE_CONTEXT.extract(carrier)).get_span_context()
    return context if context.is_valid else None


def rpc_failed(status: grpc.Status) -> None:
    """Records on the current server span the status its RPC ends with (the interceptor sees
    `abort` but not `abort_with_status`)."""
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attribute(RPC_GRPC_STATUS_CODE, status.code.value[0])
        if status.code in _SERVER_ERRORS:
            span.set_status(Status(StatusCode.ERROR, f"{status.code}: {status.details}"))


def _command_fields(command: Command) -> Fields:
    """The turn a command names, if it names one."""
    match command:
        case Heartbeat() | RecordToolCall() | RecordInteraction() | Complete():
            return {"turn_id": command.turn_id, "generation": command.generation}
        case AcknowledgeSteer():
            return {
                "turn_id": command.turn_id,
                "generation": command.generation,
                "steer_id": command.steer_id,
            }
        case Admit() | MoveQueuedTurn():
            return {"turn_id": command.turn_id}
        case SteerTurn():
            return {"turn_id": command.expected_turn_id, "steer_id": command.steer_id}
        case Cancel():
            return {"turn_id": command.expected_turn_id} if command.expected_turn_id else {}
        case ResolveInteraction() | ResumeQueue() | ClearQueue() | Expire() | Retire():
            return {}
        case _:
            assert_never(command)
