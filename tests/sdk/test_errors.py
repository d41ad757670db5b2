"""The SDK's typed errors without a server: each google.rpc.Status the service sends (ErrorInfo,
AdmissionRefusal, BadRequest details) becomes one class of a family, with Python-typed fields;
a reason added to the contract later is still a refusal of its family."""

from __future__ import annotations

from datetime import UTC, datetime

import grpc
import pytest
from google.protobuf import any_pb2
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from google.rpc import error_details_pb2, status_pb2

from turngate.client import (
    ActiveTurnMismatch,
    AdmissionLimitExceeded,
    AdmissionRefused,
    ControlRefused,
    ErrorReason,
    InteractionNotPending,
    InvalidRequest,
    LeftQueue,
    LimitExceeded,
    NotAuthenticated,
    NotFound,
    PermissionDenied,
    QueuedTurnCancelled,
    QueuedTurnCleared,
    QueuedTurnExpired,
    Refused,
    ServiceUnavailable,
    SessionBusy,
    SessionQueueFull,
    SessionQueuePaused,
    TurnAlreadySettled,
    TurnCancelled,
    TurnDequeued,
    TurngateError,
    TurnHeldByOtherPrincipal,
    TurnNotActive,
    TurnOutcome,
    TurnOwnedByOtherRunner,
    TurnPhase,
    WriteRefused,
)
from turngate.client.errors import from_rpc, left_queue, unseen_departure
from turngate.v1 import turngate_pb2 as pb

AT = datetime(2026, 11, 29, 14, 56, 49, tzinfo=UTC)


def failed(code: grpc.StatusCode, *details: Message, message: str = "refused") -> grpc.aio.AioRpcError:
    """A failed call as grpc.aio reports it, with a google.rpc.Status in its trailers."""
    packed = []
    for detail in details:
        wrapped = any_pb2.Any()
        wrapped.Pack(detail)
        packed.append(wrapped)
    status = status_pb2.Status(code=code.value[0], message=message, details=packed)
    trailers = grpc.aio.Metadata(("grpc-status-details-bin", status.SerializeToString()))
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), trailers, message)


def info(reason: str, **metadata: str) -> error_details_pb2.ErrorInfo:
    return error_details_pb2.ErrorInfo(reason=reason, domain="turngate.v1", metadata=metadata)


def refusal(reason: int, **fields: object) -> pb.AdmissionRefusal:
    return pb.AdmissionRefusal(reason=pb.ErrorReason.ValueType(reason), **fields)  # type: ignore[arg-type]


def at(when: datetime) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(when)
    return stamp


def test_a_busy_session_is_an_admission_refusal_with_python_typed_fields() -> None:
    error = from_rpc(
        failed(
            grpc.StatusCode.ABORTED,
            info("SESSION_STOPPING", activeTurnId="t1"),
            refusal(
                2,
                active_turn_id="t1",
                active_phase=pb.TURN_PHASE_STOPPING,
                active_lease_expires_at=at(AT),
                retry_after=Duration(seconds=3, nanos=250_000_000),
            ),
        )
    )
    assert isinstance(error, SessionBusy)
    assert isinstance(error, AdmissionRefused)
    assert isinstance(error, Refused)
    assert (error.reason, error.active_turn_id, error.active_phase) == (
        ErrorReason.SESSION_STOPPING,
        "t1",
        TurnPhase.STOPPING,
    )
    assert (error.active_lease_expires_at, error.retry_after, error.stopping) == (AT, 3.25, True)
    assert (error.code, str(error)) == (grpc.StatusCode.ABORTED, "refused")


@pytest.mark.parametrize(
    ("reason", "code", "kind", "families"),
    [
        ("TURN_CANCELLED", grpc.StatusCode.FAILED_PRECONDITION, TurnCancelled, (AdmissionRefused,)),
        (
            "TURN_ALREADY_SETTLED",
            grpc.StatusCode.FAILED_PRECONDITION,
            TurnAlreadySettled,
            (AdmissionRefused,),
        ),
        (
            "TURN_OWNED_BY_OTHER_RUNNER",
            grpc.StatusCode.FAILED_PRECONDITION,
            TurnOwnedByOtherRunner,
            (AdmissionRefused,),
        ),
        (
            "TURN_HELD_BY_OTHER_PRINCIPAL",
            grpc.StatusCode.PERMISSION_DENIED,
            TurnHeldByOtherPrincipal,
            (AdmissionRefused, WriteRefused, PermissionDenied),
        ),
        ("TURN_NOT_ACTIVE", grpc.StatusCode.FAILED_PRECONDITION, TurnNotActive, (WriteRefused,)),
        (
            "INTERACTION_NOT_PENDING",
            grpc.StatusCode.FAILED_PRECONDITION,
            InteractionNotPending,
            (ControlRefused,),
        ),
        ("LIMIT_EXCEEDED", grpc.StatusCode.RESOURCE_EXHAUSTED, LimitExceeded, ()),
        (
            "SESSION_QUEUE_FULL",
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            SessionQueueFull,
            (AdmissionRefused, AdmissionLimitExceeded, LimitExceeded),
        ),
        ("SESSION_QUEUE_PAUSED", grpc.StatusCode.ABORTED, SessionQueuePaused, (AdmissionRefused,)),
        (
            "ACTIVE_TURN_MISMATCH",
            grpc.StatusCode.FAILED_PRECONDITION,
            ActiveTurnMismatch,
            (AdmissionRefused,),
        ),
    ],
)
def test_each_reason_is_its_class_in_its_families(
    reason: str, code: grpc.StatusCode, kind: type[Refused], families: tuple[type[TurngateError], ...]
) -> None:
    error = from_rpc(failed(code, info(reason)))
    assert type(error) is kind
    expected: tuple[type[TurngateError], ...] = (Refused, *families)
    assert all(isinstance(error, family) for family in expected)
    assert error.reason is ErrorReason[reason]
    assert error.code is code


def test_q3_a_paused_queue_is_not_a_busy_session_to_retry_after_retry_after() -> None:
    paused = from_rpc(
        failed(
            grpc.StatusCode.ABORTED,
            info("SESSION_QUEUE_PAUSED", activeTurnId="t2", activePhase="QUEUED"),
            refusal(11, active_turn_id="t2", active_phase=pb.TURN_PHASE_QUEUED),
        )
    )
    assert isinstance(paused, SessionQueuePaused)
    assert not isinstance(paused, SessionBusy)  # nothing changes by itself: no retry_after
    assert (paused.active_turn_id, paused.active_phase, paused.retry_after) == ("t2", TurnPhase.QUEUED, 0.0)


def test_q4_a_full_queue_names_its_limit_and_the_turn_in_the_way() -> None:
    full = from_rpc(
        failed(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            info("SESSION_QUEUE_FULL", activeTurnId="t1"),
            refusal(10, active_turn_id="t1", active_phase=pb.TURN_PHASE_RUNNING),
        )
    )
    assert isinstance(full, SessionQueueFull)
    assert (full.reason, full.limit, full.active_turn_id) == (
        ErrorReason.SESSION_QUEUE_FULL,
        "max_queue_depth",
        "t1",
    )


@pytest.mark.parametrize(
    ("outcome", "cleared", "kind", "families"),
    [
        (TurnOutcome.CANCELLED, False, QueuedTurnCancelled, (TurnCancelled,)),
        (TurnOutcome.CANCELLED, True, QueuedTurnCleared, (QueuedTurnCancelled, TurnCancelled)),
        (TurnOutcome.EXPIRED, False, QueuedTurnExpired, (TurnAlreadySettled,)),
        (TurnOutcome.UNSPECIFIED, False, LeftQueue, ()),
    ],
)
def test_a_turn_that_left_the_queue_is_the_refusal_admitting_it_again_would_be(
    outcome: TurnOutcome, cleared: bool, kind: type[LeftQueue], families: tuple[type[TurngateError], ...]
) -> None:
    left = left_queue(TurnDequeued("t2", "r2", outcome, "user", cleared, 2.5))
    assert type(left) is kind
    assert all(isinstance(left, family) for family in (LeftQueue, AdmissionRefused, *families))
    assert (left.turn_id, left.outcome, left.waited, left.stop_reason) == ("t2", outcome, 2.5, "user")
    assert left.code is grpc.StatusCode.FAILED_PRECONDITION


def test_a_departure_learned_by_admitting_again_is_a_left_queue_error_too() -> None:
    cancelled = unseen_departure("t2", TurnCancelled("cancelled", code=grpc.StatusCode.FAILED_PRECONDITION))
    assert type(cancelled) is QueuedTurnCancelled
    expired = unseen_departure(
        "t2",
        TurnAlreadySettled(
            "settled", code=grpc.StatusCode.FAILED_PRECONDITION, settled_outcome=TurnOutcome.EXPIRED
        ),
    )
    assert type(expired) is QueuedTurnExpired
    assert (expired.turn_id, expired.outcome, expired.waited) == ("t2", TurnOutcome.EXPIRED, None)
    lost = TurnAlreadySettled(
        "settled", code=grpc.StatusCode.FAILED_PRECONDITION, settled_outcome=TurnOutcome.LOST
    )
    assert unseen_departure("t2", lost) is None


def test_admission_refusals_carry_the_turn_in_the_way_and_its_outcome() -> None:
    settled = from_rpc(
        failed(
            grpc.StatusCode.FAILED_PRECONDITION,
            info("TURN_ALREADY_SETTLED"),
            refusal(4, settled_outcome=pb.TURN_OUTCOME_LOST),
        )
    )
    assert isinstance(settled, TurnAlreadySettled)
    assert settled.outcome is TurnOutcome.LOST
    owned = from_rpc(
        failed(
            grpc.StatusCode.FAILED_PRECONDITION,
            info("TURN_OWNED_BY_OTHER_RUNNER"),
            refusal(5, active_turn_id="t1", active_phase=pb.TURN_PHASE_RUNNING),
        )
    )
    assert isinstance(owned, TurnOwnedByOtherRunner)
    assert (owned.active_turn_id, owned.active_phase) == ("t1", TurnPhase.RUNNING)


def test_a_limit_on_admission_is_both_an_admission_refusal_and_a_limit() -> None:
    error = from_rpc(
        failed(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            info("LIMIT_EXCEEDED", limit="active_sessions_per_project"),
            refusal(8),
        )
    )
    assert isinstance(error, AdmissionLimitExceeded)
    assert isinstance(error, AdmissionRefused)
    assert isinstance(error, LimitExceeded)
    assert (error.limit, error.reason) == ("active_sessions_per_project", ErrorReason.LIMIT_EXCEEDED)
    watch = from_rpc(failed(grpc.StatusCode.RESOURCE_EXHAUSTED, info("LIMIT_EXCEEDED", limit="watch_buffer")))
    assert isinstance(watch, LimitExceeded)
    assert not isinstance(watch, AdmissionRefused)
    assert watch.limit == "watch_buffer"


def test_a_reason_added_to_the_contract_later_is_still_a_refusal_of_its_family() -> None:
    admission = from_rpc(
        failed(grpc.StatusCode.ABORTED, info("SESSION_QUEUE_EMPTY"), refusal(99, active_turn_id="t1"))
    )
    assert type(admission) is AdmissionRefused
    assert (admission.reason, admission.active_turn_id) == (ErrorReason.UNSPECIFIED, "t1")
    other = from_rpc(failed(grpc.StatusCode.FAILED_PRECONDITION, info("SOMETHING_NEW")))
    assert type(other) is Refused
    denied = from_rpc(failed(grpc.StatusCode.PERMISSION_DENIED, info("SOMETHING_NEW")))
    assert type(denied) is PermissionDenied


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        (grpc.StatusCode.UNAVAILABLE, ServiceUnavailable),
        (grpc.StatusCode.DEADLINE_EXCEEDED, ServiceUnavailable),
        (grpc.StatusCode.ABORTED, ServiceUnavailable),  # contention: no reason
        (grpc.StatusCode.CANCELLED, ServiceUnavailable),  # by a draining server, not the caller
        (grpc.StatusCode.NOT_FOUND, NotFound),
        (grpc.StatusCode.UNAUTHENTICATED, NotAuthenticated),
        (grpc.StatusCode.PERMISSION_DENIED, PermissionDenied),
        (grpc.StatusCode.INTERNAL, TurngateError),
    ],
)
def test_errors_without_a_reason_are_typed_by_their_code(
    code: grpc.StatusCode, kind: type[TurngateError]
) -> None:
    error = from_rpc(failed(code))
    assert type(error) is kind
    assert error.reason is ErrorReason.UNSPECIFIED


def test_bad_input_names_the_fields() -> None:
    violation = error_details_pb2.BadRequest.FieldViolation(field="session.session_id", description="bad id")
    error = from_rpc(
        failed(grpc.StatusCode.INVALID_ARGUMENT, error_details_pb2.BadRequest(field_violations=[violation]))
    )
    assert isinstance(error, InvalidRequest)
    assert error.violations == (("session.session_id", "bad id"),)
