"""Typed errors: every refusal of the service, parsed from its google.rpc.Status details.

Every error the SDK raises for a call is a `TurngateError` (the gRPC error is its `__cause__`).
The subclass says what happened; refusals carry the contract's `ErrorInfo.reason` and, for
admission, the `AdmissionRefusal` fields.
"""

from __future__ import annotations

from datetime import datetime
from typing import TypeVar

import grpc
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from turngate.client.convert import instant, seconds
from turngate.v1 import turngate_pb2 as pb

DOMAIN = "turngate.v1"
M = TypeVar("M", bound=Message)


class TurngateError(Exception):
    """A call failed. `code` is the gRPC status code; `reason` the contract's ErrorInfo reason
    (e.g. `SESSION_TURN_IN_USE`), empty when the status carried none."""

    def __init__(self, message: str, *, code: grpc.StatusCode, reason: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason


class ServiceUnavailable(TurngateError):
    """The service could not be reached (UNAVAILABLE, DEADLINE_EXCEEDED, contention) within the
    retry budget; nothing is known to have changed."""


class InvalidRequest(TurngateError):
    """INVALID_ARGUMENT: the request broke the contract's input rules; nothing changed."""

    def __init__(
        self, message: str, *, code: grpc.StatusCode, violations: tuple[tuple[str, str], ...]
    ) -> None:
        super().__init__(message, code=code)
        self.violations = violations
        """(field path, description) pairs."""


class NotFound(TurngateError):
    """NOT_FOUND: e.g. GetTurn of a turn that was never admitted."""


class NotAuthenticated(TurngateError):
    """UNAUTHENTICATED: the service requires a bearer token and none was sent, or it knows no
    such token (`Client(token=...)`). Nothing was read or changed."""


class PermissionDenied(TurngateError):
    """PERMISSION_DENIED: the token's principal lacks the role the call needs, or may not act on
    the project. Nothing was read or changed."""


class TurnHeldByOtherPrincipal(PermissionDenied):
    """PERMISSION_DENIED: the turn was admitted to another principal (another runner's token);
    only that one may heartbeat, record or complete it, or admit it again."""


class SessionBusy(TurngateError):
    """Admission refused: another turn holds the session (`SESSION_TURN_IN_USE`, or
    `SESSION_STOPPING` while it winds down). Nothing changed; retry after `retry_after` seconds
    at the latest, or watch the session to learn sooner."""

    def __init__(
        self,
        message: str,
        *,
        code: grpc.StatusCode,
        reason: str,
        active_turn_id: str,
        active_phase: pb.TurnPhase.ValueType,
        active_lease_expires_at: datetime | None,
        retry_after: float,
    ) -> None:
        super().__init__(message, code=code, reason=reason)
        self.active_turn_id = active_turn_id
        self.active_phase = active_phase
        self.active_lease_expires_at = active_lease_expires_at
        self.retry_after = retry_after
        """Seconds until the active turn's earliest deadline (lease or stop grace)."""

    @property
    def stopping(self) -> bool:
        return self.reason == "SESSION_STOPPING"


class TurnCancelled(TurngateError):
    """Admission refused: this turn was stopped before it started. Never retry it."""


class TurnAlreadySettled(TurngateError):
    """Admission refused: this turn already ran; `outcome` is how it ended."""

    def __init__(self, message: str, *, code: grpc.StatusCode, outcome: pb.TurnOutcome.ValueType) -> None:
        super().__init__(message, code=code, reason="TURN_ALREADY_SETTLED")
        self.outcome = outcome


class TurnOwnedByOtherRunner(TurngateError):
    """Admission refused: this turn is active under another runner id (`active_turn_id`)."""

    def __init__(self, message: str, *, code: grpc.StatusCode, active_turn_id: str) -> None:
        super().__init__(message, code=code, reason="TURN_OWNED_BY_OTHER_RUNNER")
        self.active_turn_id = active_turn_id


class TurnNotActive(TurngateError):
    """A runner write presented a lease that is no longer the active turn's: it was fenced."""


class InteractionNotPending(TurngateError):
    """ResolveInteraction: the interaction was already resolved, cancelled, or is unknown."""


class LimitExceeded(TurngateError):
    """RESOURCE_EXHAUSTED: a per-turn limit (or a watcher's buffer) named by `limit`."""

    def __init__(self, message: str, *, code: grpc.StatusCode, limit: str) -> None:
        super().__init__(message, code=code, reason="LIMIT_EXCEEDED")
        self.limit = limit


class TurnEnded(TurngateError):
    """Raised by `Turn.interaction` when the turn is no longer this runner's to write: it ended,
    or it was abandoned (settled by the watchdog or a forced Stop, fenced, or its lease could not
    be kept). `outcome` is its outcome when known."""

    def __init__(self, message: str, *, outcome: pb.TurnOutcome.ValueType | None = None) -> None:
        super().__init__(message, code=grpc.StatusCode.FAILED_PRECONDITION, reason="TURN_NOT_ACTIVE")
        self.outcome = outcome


class InteractionCancelled(TurngateError):
    """Raised by `Turn.interaction` when the interaction was cancelled (by a Stop) instead of
    resolved."""

    def __init__(self, interaction_id: str) -> None:
        super().__init__(f"interaction {interaction_id} was cancelled", code=grpc.StatusCode.CANCELLED)
        self.interaction_id = interaction_id


_TRANSIENT = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})


def transient(error: grpc.aio.AioRpcError) -> bool:
    """A network blip, an overloaded or restarting service, or store contention (ABORTED without
    a refusal reason): the request changed nothing or was idempotent, so it may be sent again."""
    return isinstance(from_rpc(error), ServiceUnavailable)


def from_rpc(error: grpc.aio.AioRpcError) -> TurngateError:
    """The typed error for a failed call (a transient one is `ServiceUnavailable`: it reaches the
    caller only once retrying it is over)."""
    code = error.code()
    message = error.details() or code.name
    status = _status(error)
    info = _detail(status, error_details_pb2.ErrorInfo)
    reason = info.reason if info is not None and info.domain == DOMAIN else ""
    if code in _TRANSIENT or (code == grpc.StatusCode.ABORTED and not reason):
        return ServiceUnavailable(message, code=code)
    # Every admission refusal carries one (the contract); the other reasons do not need it.
    refusal = _detail(status, pb.AdmissionRefusal) or pb.AdmissionRefusal()
    match reason:
        case "SESSION_TURN_IN_USE" | "SESSION_STOPPING":
            return SessionBusy(
                message,
                code=code,
                reason=reason,
                active_turn_id=refusal.active_turn_id,
                active_phase=refusal.active_phase,
                active_lease_expires_at=instant(refusal, "active_lease_expires_at"),
                retry_after=seconds(refusal.retry_after),
            )
        case "TURN_CANCELLED":
            return TurnCancelled(message, code=code, reason=reason)
        case "TURN_ALREADY_SETTLED":
            return TurnAlreadySettled(message, code=code, outcome=refusal.settled_outcome)
        case "TURN_OWNED_BY_OTHER_RUNNER":
            return TurnOwnedByOtherRunner(message, code=code, active_turn_id=refusal.active_turn_id)
        case "TURN_NOT_ACTIVE":
            return TurnNotActive(message, code=code, reason=reason)
        case "TURN_HELD_BY_OTHER_PRINCIPAL":
            return TurnHeldByOtherPrincipal(message, code=code, reason=reason)
        case "INTERACTION_NOT_PENDING":
            return InteractionNotPending(message, code=code, reason=reason)
        case "LIMIT_EXCEEDED":
            assert info is not None
            return LimitExceeded(message, code=code, limit=info.metadata.get("limit", ""))
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        bad = _detail(status, error_details_pb2.BadRequest) or error_details_pb2.BadRequest()
        violations = tuple((v.field, v.description) for v in bad.field_violations)
        return InvalidRequest(message, code=code, violations=violations)
    if code == grpc.StatusCode.NOT_FOUND:
        return NotFound(message, code=code)
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return NotAuthenticated(message, code=code)
    if code == grpc.StatusCode.PERMISSION_DENIED:
        return PermissionDenied(message, code=code, reason=reason)
    return TurngateError(message, code=code, reason=reason)


def _status(error: grpc.aio.AioRpcError) -> status_pb2.Status | None:
    """The google.rpc.Status in the error's trailers, if any."""
    try:
        status: status_pb2.Status | None = rpc_status.from_call(error)
    except ValueError:  # a status whose code disagrees with the call's: ignore its details
        return None
    return status


def _detail(status: status_pb2.Status | None, kind: type[M]) -> M | None:
    for packed in status.details if status is not None else ():
        if packed.Is(kind.DESCRIPTOR):
            message = kind()
            packed.Unpack(message)
            return message
    return None
