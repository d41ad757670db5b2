"""Typed errors: every refusal of the service, parsed from its google.rpc.Status details.

Every error the SDK raises for a call is a `TurngateError` (the gRPC error is its `__cause__`).
The subclass says what happened. Refusals for one of the contract's reasons are `Refused`, with
the reason as an `ErrorReason`, in families: `AdmissionRefused` (every refusal of a turn's
admission, with the `AdmissionRefusal` fields), `WriteRefused` (a runner's writes),
`ControlRefused` (a gateway's calls) and `LimitExceeded`:

    TurngateError
    ├── ServiceUnavailable (WriteOutcomeUnknown), InvalidRequest, NotFound, NotAuthenticated
    ├── PermissionDenied
    ├── Refused
    │   ├── AdmissionRefused: SessionBusy, TurnCancelled, TurnAlreadySettled,
    │   │                     TurnOwnedByOtherRunner, TurnHeldByOtherPrincipal, AdmissionLimitExceeded,
    │   │                     SessionQueuePaused, ActiveTurnMismatch, SessionQueueFull,
    │   │                     LeftQueue: QueuedTurnCancelled (QueuedTurnCleared), QueuedTurnExpired
    │   ├── WriteRefused: TurnNotActive, TurnHeldByOtherPrincipal, SteerNotFound
    │   ├── ControlRefused: InteractionNotPending, QueueVersionMismatch, TurnNotQueued
    │   └── LimitExceeded: AdmissionLimitExceeded (SessionQueueFull)
    └── TurnEnded, InteractionCancelled (raised by the SDK itself)

`TurnHeldByOtherPrincipal` is also a `PermissionDenied`. `LeftQueue` is raised by the SDK itself
when a turn that waited in the session's queue leaves it without running: a
`QueuedTurnCancelled` is also a `TurnCancelled`, a `QueuedTurnExpired` a `TurnAlreadySettled`
(what admitting the turn again answers).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar, assert_never

import grpc
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from turngate.client import convert
from turngate.client.enums import ErrorReason, TurnOutcome, TurnPhase
from turngate.client.models import AdmissionRefusal, TurnDequeued
from turngate.v1 import turngate_pb2 as pb

DOMAIN = "turngate.v1"
# The service's setting that bounds a session's queue (SESSION_QUEUE_FULL's `limit`).
MAX_QUEUE_DEPTH = "max_queue_depth"
M = TypeVar("M", bound=Message)


class TurngateError(Exception):
    """A call failed. `code` is the gRPC status code; `reason` the contract's `ErrorReason`
    (`google.rpc.ErrorInfo`'s reason, e.g. `ErrorReason.SESSION_TURN_IN_USE`), UNSPECIFIED when
    the status carried none."""

    def __init__(
        self, message: str, *, code: grpc.StatusCode, reason: ErrorReason = ErrorReason.UNSPECIFIED
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason


class ServiceUnavailable(TurngateError):
    """The service could not be reached (UNAVAILABLE, DEADLINE_EXCEEDED, contention, CANCELLED by a
    draining server) within the retry budget; nothing is known to have changed. (gRPC cannot tell
    a connection lost before the service had the request from one lost after: the service says
    which of its own failures changed nothing, and `WriteOutcomeUnknown` is the others.)"""


class WriteOutcomeUnknown(ServiceUnavailable):
    """A write may have taken effect, or not, and retrying did not learn which before the retry
    budget ran out: an attempt was answered UNAVAILABLE WRITE_OUTCOME_UNKNOWN (the service's store
    lost the write's reply, or its replication was not confirmed), or passed its deadline while the
    service had it. Send the same request again to learn what it did: the SDK's writes are
    idempotent by their ids, and `request_id` is the id to send again where the request has one
    (a Stop, a resolution, a resume). Also a `ServiceUnavailable`, as before it existed."""

    def __init__(self, message: str, *, code: grpc.StatusCode, request_id: str = "") -> None:
        super().__init__(message, code=code, reason=ErrorReason.WRITE_OUTCOME_UNKNOWN)
        self.request_id = request_id


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
    the project (`reason` UNSPECIFIED), or the turn is another principal's
    (`TurnHeldByOtherPrincipal`). Nothing was read or changed."""


class Refused(TurngateError):
    """The service refused the request for one of the contract's reasons (`reason`; UNSPECIFIED
    for a reason this SDK does not know, from a newer service). Nothing changed.

    Families: `AdmissionRefused` (entering a turn), `WriteRefused` (a runner's heartbeat, record
    or completion), `ControlRefused` (a gateway's call), and `LimitExceeded` (any call)."""

    REASON = ErrorReason.UNSPECIFIED
    """The reason an instance of the class has unless it is given another."""

    def __init__(self, message: str, *, code: grpc.StatusCode, reason: ErrorReason | None = None) -> None:
        super().__init__(message, code=code, reason=self.REASON if reason is None else reason)


class AdmissionRefused(Refused):
    """Admission refused: the turn was not admitted, and nothing changed. Every refusal of
    `runner.turn(...)` is one; the subclass (or `reason`) says why, and the fields describe the
    turn in the way."""

    def __init__(
        self,
        message: str,
        *,
        code: grpc.StatusCode,
        reason: ErrorReason | None = None,
        active_turn_id: str = "",
        active_phase: TurnPhase = TurnPhase.UNSPECIFIED,
        active_lease_expires_at: datetime | None = None,
        retry_after: float = 0.0,
        settled_outcome: TurnOutcome = TurnOutcome.UNSPECIFIED,
    ) -> None:
        super().__init__(message, code=code, reason=reason)
        self.active_turn_id = active_turn_id
        """The turn holding the session (SESSION_TURN_IN_USE, SESSION_STOPPING,
        TURN_OWNED_BY_OTHER_RUNNER)."""
        self.active_phase = active_phase
        self.active_lease_expires_at = active_lease_expires_at
        self.retry_after = retry_after
        """Seconds until the active turn's earliest deadline (lease or stop grace): the session
        will have changed by then without any runner's help. 0 when there is none."""
        self.settled_outcome = settled_outcome
        """For TURN_ALREADY_SETTLED: how that turn ended."""


class WriteRefused(Refused):
    """A runner's write (heartbeat, tool call, interaction, completion) was refused: the turn is
    no longer this runner's to write. The SDK's `Turn` abandons the turn on these."""


class ControlRefused(Refused):
    """A gateway's call was refused for one of the contract's reasons."""


class SessionBusy(AdmissionRefused):
    """Admission refused: another turn holds the session (`SESSION_TURN_IN_USE`, or
    `SESSION_STOPPING` while it winds down). Nothing changed; retry after `retry_after` seconds
    at the latest, or watch the session to learn sooner."""

    REASON = ErrorReason.SESSION_TURN_IN_USE

    @property
    def stopping(self) -> bool:
        return self.reason == ErrorReason.SESSION_STOPPING


class TurnCancelled(AdmissionRefused):
    """Admission refused: this turn was stopped before it started. Never retry it."""

    REASON = ErrorReason.TURN_CANCELLED


class TurnAlreadySettled(AdmissionRefused):
    """Admission refused: this turn already ran; `outcome` is how it ended."""

    REASON = ErrorReason.TURN_ALREADY_SETTLED

    @property
    def outcome(self) -> TurnOutcome:
        """How the turn ended (`settled_outcome`)."""
        return self.settled_outcome


class TurnOwnedByOtherRunner(AdmissionRefused):
    """Admission refused: this turn is active under another runner id (`active_turn_id`)."""

    REASON = ErrorReason.TURN_OWNED_BY_OTHER_RUNNER


class TurnHeldByOtherPrincipal(AdmissionRefused, WriteRefused, PermissionDenied):
    """PERMISSION_DENIED: the turn was admitted to another principal (another runner's token);
    only that one may heartbeat, record or complete it, or admit it again. Raised on entering
    the turn (an `AdmissionRefused`) as on a write (a `WriteRefused`), and a `PermissionDenied`."""

    REASON = ErrorReason.TURN_HELD_BY_OTHER_PRINCIPAL


class TurnNotActive(WriteRefused):
    """A runner write presented a lease that is no longer the active turn's: it was fenced."""

    REASON = ErrorReason.TURN_NOT_ACTIVE


class InteractionNotPending(ControlRefused):
    """ResolveInteraction: the interaction was already resolved, cancelled, or is unknown."""

    REASON = ErrorReason.INTERACTION_NOT_PENDING


class SteerNotFound(WriteRefused):
    """`turn.acknowledge` named no steer of the turn."""

    REASON = ErrorReason.STEER_NOT_FOUND


class QueueVersionMismatch(ControlRefused):
    """The queue changed since `expected_queue_version` was read (ABORTED): read it again."""

    REASON = ErrorReason.QUEUE_VERSION_MISMATCH


class TurnNotQueued(ControlRefused):
    """The queue edit named a turn that is not waiting in the queue."""

    REASON = ErrorReason.TURN_NOT_QUEUED


class LimitExceeded(Refused):
    """RESOURCE_EXHAUSTED: a limit named by `limit` (per turn: open tool calls, pending
    interactions; per project: sessions with an active turn; watch streams; a watcher's
    buffer)."""

    REASON = ErrorReason.LIMIT_EXCEEDED

    def __init__(
        self, message: str, *, code: grpc.StatusCode, limit: str = "", reason: ErrorReason | None = None
    ) -> None:
        super().__init__(message, code=code, reason=reason)
        self.limit = limit


class AdmissionLimitExceeded(AdmissionRefused, LimitExceeded):
    """Admission refused over a limit (`limit`, e.g. `active_sessions_per_project`): both an
    `AdmissionRefused` and a `LimitExceeded`."""

    REASON = ErrorReason.LIMIT_EXCEEDED

    def __init__(
        self, message: str, *, code: grpc.StatusCode, limit: str, refusal: AdmissionRefusal | None
    ) -> None:
        AdmissionRefused.__init__(self, message, code=code, **_fields(refusal))
        self.limit = limit


class SessionQueueFull(AdmissionLimitExceeded):
    """Admission refused (ENQUEUE, INTERRUPT): the session's queue holds `max_queue_depth` turns
    already (`limit`); nothing was stopped or queued. `active_turn_id` is the active turn, or the
    queue's head (phase QUEUED) when none is active."""

    REASON = ErrorReason.SESSION_QUEUE_FULL


class SessionQueuePaused(AdmissionRefused):
    """Admission refused (REJECT): no turn is active, but turns wait in a paused queue and this
    admission does not jump it. `active_turn_id` is the queue's head (phase QUEUED); there is no
    `retry_after`: nothing changes until a gateway resumes the queue (`resume_queue`). Admit with
    `AdmissionMode.ENQUEUE` to wait in it instead."""

    REASON = ErrorReason.SESSION_QUEUE_PAUSED


class ActiveTurnMismatch(AdmissionRefused):
    """Admission refused (INTERRUPT): `expected_active_turn_id` is not the active turn (another
    turn is active: `active_turn_id`, or none is); nothing was stopped or queued."""

    REASON = ErrorReason.ACTIVE_TURN_MISMATCH


class LeftQueue(AdmissionRefused):
    """The turn waited in the session's queue and left it without running: it was never admitted,
    and admitting it again is refused. Raised by `runner.turn(...)` with ENQUEUE or INTERRUPT;
    the subclass says why."""

    def __init__(
        self,
        message: str,
        *,
        turn_id: str,
        outcome: TurnOutcome,
        waited: float | None = None,
        stop_reason: str = "",
    ) -> None:
        super().__init__(message, code=grpc.StatusCode.FAILED_PRECONDITION, settled_outcome=outcome)
        self.turn_id = turn_id
        self.waited = waited
        """Seconds it waited in the queue (None when the SDK did not see it leave)."""
        self.stop_reason = stop_reason
        """The reason of the Stop that removed it, when one did."""

    @property
    def outcome(self) -> TurnOutcome:
        """CANCELLED or EXPIRED (`settled_outcome`)."""
        return self.settled_outcome


class QueuedTurnCancelled(LeftQueue, TurnCancelled):
    """A Stop named the queued turn (or cleared the queue: `QueuedTurnCleared`); also a
    `TurnCancelled`."""


class QueuedTurnCleared(QueuedTurnCancelled):
    """A Stop with `QueueAction.CLEAR` cancelled every queued turn, this one too."""


class QueuedTurnExpired(LeftQueue, TurnAlreadySettled):
    """The turn waited past its `max_queue_wait` and left the queue EXPIRED; also a
    `TurnAlreadySettled`."""


class TurnEnded(TurngateError):
    """Raised by `Turn.interaction` when the turn is no longer this runner's to write: it ended,
    or it was abandoned (settled by the watchdog or a forced Stop, fenced, or its lease could not
    be kept). `outcome` is its outcome when known."""

    def __init__(self, message: str, *, outcome: TurnOutcome | None = None) -> None:
        super().__init__(
            message, code=grpc.StatusCode.FAILED_PRECONDITION, reason=ErrorReason.TURN_NOT_ACTIVE
        )
        self.outcome = outcome


class InteractionCancelled(TurngateError):
    """Raised by `Turn.interaction` when the interaction was cancelled (by a Stop) instead of
    resolved."""

    def __init__(self, interaction_id: str) -> None:
        super().__init__(f"interaction {interaction_id} was cancelled", code=grpc.StatusCode.CANCELLED)
        self.interaction_id = interaction_id


def left_queue(dequeued: TurnDequeued) -> LeftQueue:
    """The error for a `turn_dequeued` event of the caller's own turn."""
    kind: type[LeftQueue]
    match dequeued.outcome:
        case TurnOutcome.EXPIRED:
            kind, what = QueuedTurnExpired, f"waited {dequeued.waited:.1f}s in the queue and expired"
        case TurnOutcome.CANCELLED if dequeued.cleared:
            kind, what = QueuedTurnCleared, "was cleared from the queue by a Stop"
        case TurnOutcome.CANCELLED:
            kind, what = QueuedTurnCancelled, "was cancelled in the queue by a Stop"
        case _:
            kind, what = LeftQueue, f"left the queue {dequeued.outcome.name}"
    return kind(
        f"turn {dequeued.turn_id} {what}",
        turn_id=dequeued.turn_id,
        outcome=dequeued.outcome,
        waited=dequeued.waited,
        stop_reason=dequeued.reason,
    )


def unseen_departure(turn_id: str, refused: AdmissionRefused) -> LeftQueue | None:
    """What admitting a queued turn again answered once it was gone from the queue without its
    `turn_dequeued` being seen (events skipped by a resync), as a `LeftQueue`; None when the
    refusal says something else (e.g. it was promoted and settled before its runner came)."""
    match refused:
        case TurnCancelled():
            return QueuedTurnCancelled(str(refused), turn_id=turn_id, outcome=TurnOutcome.CANCELLED)
        case TurnAlreadySettled(outcome=TurnOutcome.EXPIRED):
            return QueuedTurnExpired(str(refused), turn_id=turn_id, outcome=TurnOutcome.EXPIRED)
        case _:
            return None


def _fields(refusal: AdmissionRefusal | None) -> dict[str, Any]:
    """An AdmissionRefused's keyword arguments from the refusal's detail."""
    if refusal is None:
        return {}
    return {
        "active_turn_id": refusal.active_turn_id,
        "active_phase": refusal.active_phase,
        "active_lease_expires_at": refusal.active_lease_expires_at,
        "retry_after": refusal.retry_after,
        "settled_outcome": refusal.settled_outcome,
    }


# CANCELLED too: a draining server cancels calls it received but never started (grpc-core issue
# 41785); a caller's own cancellation is asyncio.CancelledError, never a status.
_TRANSIENT = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED}
)


def transient(error: grpc.aio.AioRpcError) -> bool:
    """A network blip, an overloaded or restarting service, or store contention (ABORTED without
    a refusal reason): the request changed nothing or was idempotent, so it may be sent again."""
    return isinstance(from_rpc(error), ServiceUnavailable)


def may_have_taken_effect(error: grpc.aio.AioRpcError) -> bool:
    """Whether a write that failed so may have taken effect: the service said so
    (WRITE_OUTCOME_UNKNOWN), or the call's deadline passed while the service had it (it finishes
    a write it started: docs/design.md §5)."""
    return (
        isinstance(from_rpc(error), WriteOutcomeUnknown) or error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    )


def outcome_unknown(error: grpc.aio.AioRpcError, request_id: str) -> WriteOutcomeUnknown:
    """The error for a write whose retries ran out after an attempt that may have taken effect;
    `error` is the last attempt's."""
    code = error.code()
    return WriteOutcomeUnknown(
        f"it may have taken effect (the last attempt: {error.details() or code.name}); "
        "send the same request again to learn what it did",
        code=code,
        request_id=request_id,
    )


def from_rpc(error: grpc.aio.AioRpcError) -> TurngateError:
    """The typed error for a failed call (a transient one is `ServiceUnavailable`: it reaches the
    caller only once retrying it is over)."""
    code = error.code()
    message = error.details() or code.name
    status = _status(error)
    info = _detail(status, error_details_pb2.ErrorInfo)
    named = info.reason if info is not None and info.domain == DOMAIN else ""
    if code == grpc.StatusCode.UNAVAILABLE and named == ErrorReason.WRITE_OUTCOME_UNKNOWN:
        return WriteOutcomeUnknown(message, code=code)
    if code in _TRANSIENT or (code == grpc.StatusCode.ABORTED and not named):
        return ServiceUnavailable(message, code=code)
    reason = ErrorReason.named(named)
    # Every admission refusal carries one (the contract); the other refusals do not.
    detail = _detail(status, pb.AdmissionRefusal)
    refusal = convert.admission_refusal(detail) if detail is not None else None
    admission = _fields(refusal)
    match reason:
        case ErrorReason.SESSION_TURN_IN_USE | ErrorReason.SESSION_STOPPING:
            return SessionBusy(message, code=code, reason=reason, **admission)
        case ErrorReason.TURN_CANCELLED:
            return TurnCancelled(message, code=code, **admission)
        case ErrorReason.TURN_ALREADY_SETTLED:
            return TurnAlreadySettled(message, code=code, **admission)
        case ErrorReason.TURN_OWNED_BY_OTHER_RUNNER:
            return TurnOwnedByOtherRunner(message, code=code, **admission)
        case ErrorReason.TURN_HELD_BY_OTHER_PRINCIPAL:
            return TurnHeldByOtherPrincipal(message, code=code, **admission)
        case ErrorReason.TURN_NOT_ACTIVE:
            return TurnNotActive(message, code=code)
        case ErrorReason.INTERACTION_NOT_PENDING:
            return InteractionNotPending(message, code=code)
        case ErrorReason.LIMIT_EXCEEDED:
            limit = info.metadata.get("limit", "") if info is not None else ""
            if refusal is not None:
                return AdmissionLimitExceeded(message, code=code, limit=limit, refusal=refusal)
            return LimitExceeded(message, code=code, limit=limit)
        case ErrorReason.SESSION_QUEUE_FULL:
            return SessionQueueFull(message, code=code, limit=MAX_QUEUE_DEPTH, refusal=refusal)
        case ErrorReason.SESSION_QUEUE_PAUSED:
            return SessionQueuePaused(message, code=code, **admission)
        case ErrorReason.ACTIVE_TURN_MISMATCH:
            return ActiveTurnMismatch(message, code=code, **admission)
        case ErrorReason.STEER_NOT_FOUND:
            return SteerNotFound(message, code=code)
        case ErrorReason.QUEUE_VERSION_MISMATCH:
            return QueueVersionMismatch(message, code=code)
        case ErrorReason.TURN_NOT_QUEUED:
            return TurnNotQueued(message, code=code)
        case ErrorReason.WRITE_OUTCOME_UNKNOWN:
            pass  # not a refusal: UNAVAILABLE, above; with another code, by the code below
        case ErrorReason.UNSPECIFIED:
            # A reason added to the contract after this SDK was built (a PERMISSION_DENIED one
            # stays a PermissionDenied, below: a turn abandons on it).
            if named and code != grpc.StatusCode.PERMISSION_DENIED:
                if refusal is not None:
                    return AdmissionRefused(message, code=code, **admission)
                return Refused(message, code=code)
        case _:
            assert_never(reason)
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        bad = _detail(status, error_details_pb2.BadRequest) or error_details_pb2.BadRequest()
        violations = tuple((v.field, v.description) for v in bad.field_violations)
        return InvalidRequest(message, code=code, violations=violations)
    if code == grpc.StatusCode.NOT_FOUND:
        return NotFound(message, code=code)
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return NotAuthenticated(message, code=code)
    if code == grpc.StatusCode.PERMISSION_DENIED:
        return PermissionDenied(message, code=code)
    return TurngateError(message, code=code)


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
