"""Rich gRPC errors (google.rpc.Status with ErrorInfo, RetryInfo, BadRequest, AdmissionRefusal).

Which gRPC code each refusal carries is decided here, once; the reasons themselves come from
the core.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import wraps
from typing import Any, NoReturn, TypeVar

import grpc
from google.protobuf import any_pb2
from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from turngate.service import core
from turngate.service.api import convert
from turngate.service.api.fields import InvalidArgument
from turngate.service.ports.store import StoreContention, StoreUnavailable, WriteOutcomeUnknown
from turngate.service.telemetry import traces
from turngate.v1 import turngate_pb2 as pb

DOMAIN = "turngate.v1"
log = logging.getLogger("turngate.api")

_CODES = {
    core.ErrorReason.SESSION_TURN_IN_USE: code_pb2.ABORTED,
    core.ErrorReason.SESSION_STOPPING: code_pb2.ABORTED,
    core.ErrorReason.TURN_CANCELLED: code_pb2.FAILED_PRECONDITION,
    core.ErrorReason.TURN_ALREADY_SETTLED: code_pb2.FAILED_PRECONDITION,
    core.ErrorReason.TURN_OWNED_BY_OTHER_RUNNER: code_pb2.FAILED_PRECONDITION,
    core.ErrorReason.TURN_NOT_ACTIVE: code_pb2.FAILED_PRECONDITION,
    core.ErrorReason.INTERACTION_NOT_PENDING: code_pb2.FAILED_PRECONDITION,
    core.ErrorReason.LIMIT_EXCEEDED: code_pb2.RESOURCE_EXHAUSTED,
    core.ErrorReason.TURN_HELD_BY_OTHER_PRINCIPAL: code_pb2.PERMISSION_DENIED,
    core.ErrorReason.SESSION_QUEUE_FULL: code_pb2.RESOURCE_EXHAUSTED,
    core.ErrorReason.SESSION_QUEUE_PAUSED: code_pb2.ABORTED,
    core.ErrorReason.ACTIVE_TURN_MISMATCH: code_pb2.FAILED_PRECONDITION,
    core.ErrorReason.STEER_NOT_FOUND: code_pb2.FAILED_PRECONDITION,
    # The queue changed since the editor read it: read it again, no use waiting (no RetryInfo).
    core.ErrorReason.QUEUE_VERSION_MISMATCH: code_pb2.ABORTED,
    core.ErrorReason.TURN_NOT_QUEUED: code_pb2.FAILED_PRECONDITION,
}


def _status(code: int, message: str, *details: Message) -> grpc.Status:
    packed = []
    for detail in details:
        any_detail = any_pb2.Any()
        any_detail.Pack(detail)
        packed.append(any_detail)
    status: grpc.Status = rpc_status.to_status(status_pb2.Status(code=code, message=message, details=packed))
    return status


async def abort(context: grpc.aio.ServicerContext[Any, Any], status: grpc.Status) -> NoReturn:
    """Ends the RPC with `status`, also on its span."""
    traces.rpc_failed(status)
    await context.abort_with_status(status)


def refusal(value: core.Refusal, *, admission: bool = False) -> grpc.Status:
    """The status for a core refusal; AdmitTurn refusals also carry an AdmissionRefusal."""
    # An answer, not a fault: at debug, by reason only (the message may name the caller's ids).
    log.debug("refused: %s", value.reason.name)
    metadata = {
        "activeTurnId": value.active_turn_id,
        "activePhase": value.active_phase.name if value.active_phase else "",
        "settledOutcome": value.settled_outcome.name if value.settled_outcome else "",
        "limit": value.limit,
    }
    info = error_details_pb2.ErrorInfo(
        reason=value.reason.name, domain=DOMAIN, metadata={k: v for k, v in metadata.items() if v}
    )
    details: list[Message] = [info]
    if value.retry_after is not None:
        details.append(error_details_pb2.RetryInfo(retry_delay=convert.duration(value.retry_after)))
    if admission:
        details.append(
            pb.AdmissionRefusal(
                reason=pb.ErrorReason.ValueType(value.reason),
                active_turn_id=value.active_turn_id,
                active_phase=convert.turn_phase(value.active_phase),
                active_lease_expires_at=convert.timestamp(value.active_lease_expires_at),
                retry_after=convert.duration(value.retry_after) if value.retry_after is not None else None,
                settled_outcome=convert.outcome(value.settled_outcome),
            )
        )
    return _status(_CODES[value.reason], value.message, *details)


def limit_exceeded(limit: str, message: str) -> grpc.Status:
    info = error_details_pb2.ErrorInfo(
        reason=core.ErrorReason.LIMIT_EXCEEDED.name, domain=DOMAIN, metadata={"limit": limit}
    )
    return _status(code_pb2.RESOURCE_EXHAUSTED, message, info)


def bad_request(error: InvalidArgument) -> grpc.Status:
    # At debug, naming the fields only: their descriptions may quote what the caller sent.
    log.debug("bad request: invalid %s", ", ".join(field for field, _ in error.violations) or "request")
    violations = [
        error_details_pb2.BadRequest.FieldViolation(field=field, description=description)
        for field, description in error.violations
    ]
    return _status(
        code_pb2.INVALID_ARGUMENT,
        f"invalid request: {error}",
        error_details_pb2.BadRequest(field_violations=violations),
    )


def unauthenticated(message: str) -> grpc.Status:
    return _status(code_pb2.UNAUTHENTICATED, message)


def permission_denied(message: str) -> grpc.Status:
    return _status(code_pb2.PERMISSION_DENIED, message)


def failed_precondition(message: str) -> grpc.Status:
    return _status(code_pb2.FAILED_PRECONDITION, message)


def deadline_exceeded(message: str) -> grpc.Status:
    return _status(code_pb2.DEADLINE_EXCEEDED, message)


def undecodable(message_name: str) -> grpc.Status:
    """For bytes that do not decode as the request message (e.g. a string that is not UTF-8)."""
    problem = f"is not a valid {message_name} (protobuf wire format, strings in UTF-8)"
    return _status(
        code_pb2.INVALID_ARGUMENT,
        f"the request {problem}",
        error_details_pb2.BadRequest(
            field_violations=[error_details_pb2.BadRequest.FieldViolation(field="", description=problem)]
        ),
    )


def not_found(message: str) -> grpc.Status:
    return _status(code_pb2.NOT_FOUND, message)


def unavailable(message: str) -> grpc.Status:
    return _status(code_pb2.UNAVAILABLE, message)


def outcome_unknown() -> grpc.Status:
    """For a write sent to the store whose reply, or replication, never came (docs/design.md §3.2)."""
    info = error_details_pb2.ErrorInfo(reason=core.ErrorReason.WRITE_OUTCOME_UNKNOWN.name, domain=DOMAIN)
    return _status(
        code_pb2.UNAVAILABLE,
        "store unavailable after the write was sent; it may have taken effect: "
        "send the same request again to learn what it did",
        info,
    )


def for_exception(error: Exception) -> grpc.Status:
    """The status for an exception escaping a handler; never a traceback to the caller. Only what
    is known is promised: "nothing was changed" where the store says so."""
    match error:
        case InvalidArgument():
            return bad_request(error)
        case WriteOutcomeUnknown():
            log.warning("a write's outcome is unknown: %s", error)
            return outcome_unknown()
        case StoreUnavailable():
            return unavailable("store unavailable; nothing was changed, retry")
        case StoreContention():
            return _status(
                code_pb2.ABORTED, "too much contention on this session; nothing was changed, retry"
            )
    log.exception("unexpected error in handler", exc_info=error)
    return _status(code_pb2.INTERNAL, "internal error; whether the request took effect is unknown")


_Self = TypeVar("_Self")
_Req = TypeVar("_Req")
_Resp = TypeVar("_Resp")
Handler = Callable[[_Self, _Req, grpc.aio.ServicerContext[_Req, _Resp]], Awaitable[_Resp]]


def guarded(handler: Handler[_Self, _Req, _Resp]) -> Handler[_Self, _Req, _Resp]:
    """Turns any exception of a unary handler into a clean status (aborts pass through)."""

    @wraps(handler)
    async def run(self: _Self, request: _Req, context: grpc.aio.ServicerContext[_Req, _Resp]) -> _Resp:
        try:
            return await handler(self, request, context)
        except grpc.aio.AbortError:
            raise
        except Exception as error:  # mapped to a status, logged when unexpected
            await abort(context, for_exception(error))

    return run
