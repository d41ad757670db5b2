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
    AdmissionLimitExceeded,
    AdmissionRefused,
    ControlRefused,
    ErrorReason,
    InteractionNotPending,
    InvalidRequest,
    LimitExceeded,
    NotAuthenticated,
    NotFound,
    PermissionDenied,
    Refused,
    ServiceUnavailable,
    SessionBusy,
    TurnAlreadySettled,
    TurnCancelled,
    TurngateError,
    TurnHeldByOtherPrincipal,
    TurnNotActive,
    TurnOutcome,
    TurnOwnedByOtherRunner,
    TurnPhase,
    WriteRefused,
)
from turngate.client.errors import from_rpc
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
        failed(grpc.StatusCode.ABORTED, info("SESSION_QUEUE_PAUSED"), refusal(11, active_turn_id="t1"))
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
