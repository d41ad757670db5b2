"""The SDK's types without a server: its enums are the contract's, numbers a newer service sends
read as UNSPECIFIED, and every message becomes its dataclass (times aware UTC, durations in
seconds, unset fields None) keeping the message as `raw`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import assert_never

import pytest
from google.protobuf.descriptor import EnumDescriptor
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from turngate.client import (
    AdmissionMode,
    Cancelled,
    ErrorReason,
    Event,
    EventBody,
    Idle,
    Interaction,
    InteractionChanged,
    InteractionStatus,
    Mismatch,
    QueueAction,
    QueuedTurn,
    QueuePaused,
    QueueReordered,
    QueueResumed,
    ResumedQueue,
    SessionPhase,
    SessionRef,
    SessionSnapshot,
    SessionTokenScope,
    SettledBy,
    Steered,
    SteerEnded,
    SteerFallback,
    SteerInput,
    SteerMismatch,
    SteerQueued,
    SteerStatus,
    StopRequested,
    ToolCall,
    ToolCallChanged,
    ToolCallStatus,
    TurnAdmitted,
    TurnDequeued,
    TurnOutcome,
    TurnPhase,
    TurnQueued,
    TurnRecord,
    TurnSettled,
    TurnSteered,
    UnknownEvent,
    convert,
)
from turngate.client.enums import ContractEnum
from turngate.v1 import turngate_pb2 as pb

AT = datetime(2026, 11, 29, 14, 56, 49, 420_123, tzinfo=UTC)
ENUMS: list[tuple[type[ContractEnum], EnumDescriptor]] = [
    (SessionPhase, pb.SessionPhase.DESCRIPTOR),
    (TurnPhase, pb.TurnPhase.DESCRIPTOR),
    (TurnOutcome, pb.TurnOutcome.DESCRIPTOR),
    (SettledBy, pb.SettledBy.DESCRIPTOR),
    (ToolCallStatus, pb.ToolCallStatus.DESCRIPTOR),
    (InteractionStatus, pb.InteractionStatus.DESCRIPTOR),
    (AdmissionMode, pb.AdmissionMode.DESCRIPTOR),
    (QueueAction, pb.QueueAction.DESCRIPTOR),
    (SessionTokenScope, pb.SessionTokenScope.DESCRIPTOR),
    (SteerStatus, pb.SteerStatus.DESCRIPTOR),
    (SteerFallback, pb.SteerFallback.DESCRIPTOR),
]


def ts(at: datetime) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(at)
    return stamp


def ref() -> pb.SessionRef:
    return pb.SessionRef(project_id="p", session_id="s")


@pytest.mark.parametrize(("enum", "contract"), ENUMS, ids=[enum.__name__ for enum, _ in ENUMS])
def test_each_enum_has_exactly_the_contracts_values_and_names(
    enum: type[ContractEnum], contract: EnumDescriptor
) -> None:
    assert {member.proto_name: int(member) for member in enum} == {
        value.name: value.number for value in contract.values
    }
    assert enum(0).name == "UNSPECIFIED"


def test_members_equal_the_generated_constants_for_code_written_against_them() -> None:
    old: int = pb.TURN_OUTCOME_CANCELLED
    assert old == TurnOutcome.CANCELLED
    assert (
        ErrorReason.TURN_HELD_BY_OTHER_PRINCIPAL.number == pb.ERROR_REASON_TURN_HELD_BY_OTHER_PRINCIPAL == 9
    )
    assert (TurnOutcome.CANCELLED.name, TurnOutcome.CANCELLED.proto_name) == (
        "CANCELLED",
        "TURN_OUTCOME_CANCELLED",
    )


def test_error_reasons_are_the_contracts_and_equal_their_errorinfo_strings() -> None:
    assert {member.proto_name: member.number for member in ErrorReason} == {
        value.name: value.number for value in pb.ErrorReason.DESCRIPTOR.values
    }
    # As when the SDK's errors carried reasons as plain strings ('' for none).
    busy: str = ErrorReason.SESSION_TURN_IN_USE
    none: str = ErrorReason.UNSPECIFIED
    assert (busy, none, f"{ErrorReason.TURN_CANCELLED}") == ("SESSION_TURN_IN_USE", "", "TURN_CANCELLED")
    assert not ErrorReason.UNSPECIFIED


def test_a_number_a_newer_service_sends_reads_as_unspecified_and_stays_in_raw() -> None:
    assert TurnOutcome(99) is TurnOutcome.UNSPECIFIED
    with pytest.raises(ValueError, match="is not a valid"):
        TurnOutcome("CANCELLED")  # type: ignore[arg-type]  # only numbers fall back
    record = convert.turn_record(pb.TurnRecord(turn_id="t1", outcome=pb.TurnOutcome.ValueType(99)))
    assert record.outcome is TurnOutcome.UNSPECIFIED
    assert record.raw is not None
    assert record.raw.outcome == 99
    assert ErrorReason.named("SESSION_QUEUE_EMPTY") is ErrorReason.UNSPECIFIED
    assert ErrorReason.named("SESSION_QUEUE_FULL") is ErrorReason.SESSION_QUEUE_FULL
    assert ErrorReason.named("TURN_CANCELLED") is ErrorReason.TURN_CANCELLED


def test_a_turn_record_becomes_python_values_with_unset_times_as_none() -> None:
    message = pb.TurnRecord(
        turn_id="t1",
        runner_id="r1",
        generation=1_795_964_209_420_641,
        phase=pb.TURN_PHASE_SETTLED,
        outcome=pb.TURN_OUTCOME_CANCELLED,
        settled_by=pb.SETTLED_BY_RUNNER,
        stop_requested=True,
        admitted_at=ts(AT),
        settled_at=ts(AT + timedelta(seconds=7)),
        stop_reason="user",
        tool_calls=[
            pb.ToolCall(call_id="c1", name="search", status=pb.TOOL_CALL_STATUS_OPEN, opened_at=ts(AT)),
        ],
        interactions=[
            pb.Interaction(
                interaction_id="i1",
                kind="approval",
                status=pb.INTERACTION_STATUS_RESOLVED,
                resolution="yes",
                opened_at=ts(AT),
                closed_at=ts(AT + timedelta(seconds=1)),
            )
        ],
    )
    record = convert.turn_record(message)
    assert record == TurnRecord(
        turn_id="t1",
        runner_id="r1",
        generation=1_795_964_209_420_641,
        phase=TurnPhase.SETTLED,
        outcome=TurnOutcome.CANCELLED,
        settled_by=SettledBy.RUNNER,
        stop_requested=True,
        admitted_at=AT,
        settled_at=AT + timedelta(seconds=7),
        error="",
        tool_calls=(ToolCall("c1", "search", ToolCallStatus.OPEN, "", AT, None),),
        interactions=(
            Interaction("i1", "approval", InteractionStatus.RESOLVED, "yes", AT, AT + timedelta(seconds=1)),
        ),
        lease_expires_at=None,
        stop_reason="user",
        stop_deadline=None,
    )
    assert record.admitted_at.tzinfo is UTC
    assert record.raw is message
    assert record.tool_calls[0].raw is message.tool_calls[0]
    assert "raw" not in repr(record)


def test_a_snapshot_without_turns_has_none_for_them() -> None:
    snapshot = convert.snapshot(pb.SessionSnapshot(session=ref(), seq=0, phase=pb.SESSION_PHASE_IDLE))
    assert snapshot == SessionSnapshot(SessionRef("p", "s"), 0, SessionPhase.IDLE, None, None, False)
    busy = convert.snapshot(
        pb.SessionSnapshot(
            session=ref(),
            seq=4,
            phase=pb.SESSION_PHASE_RUNNING,
            active=pb.TurnRecord(turn_id="t2", admitted_at=ts(AT), lease_expires_at=ts(AT)),
        )
    )
    assert busy.active is not None
    assert (busy.active.turn_id, busy.active.lease_expires_at, busy.last_settled) == ("t2", AT, None)


def test_a_snapshot_shows_the_queue_head_first_and_who_paused_it() -> None:
    waiting = [
        pb.QueuedTurn(turn_id=f"t{n}", runner_id="r", position=n, queued_at=ts(AT), expires_at=ts(AT))
        for n in (1, 2)
    ]
    snapshot = convert.snapshot(
        pb.SessionSnapshot(
            session=ref(),
            seq=9,
            phase=pb.SESSION_PHASE_IDLE,
            queue=waiting,
            queue_paused=True,
            queue_paused_by="t0",
        )
    )
    assert snapshot.queue == (QueuedTurn("t1", "r", 1, AT, AT), QueuedTurn("t2", "r", 2, AT, AT))
    assert (snapshot.queue_paused, snapshot.queue_paused_by) == (True, "t0")
    assert snapshot.raw is not None
    assert snapshot.queue[1].raw is snapshot.raw.queue[1]
    moved = convert.moved(snapshot.queue[1], 1)  # its place, as a waiting runner learns it
    assert moved == QueuedTurn("t2", "r", 1, AT, AT)
    assert moved.raw is not None
    assert (moved.raw.turn_id, moved.raw.position, snapshot.raw.queue[1].position) == ("t2", 1, 2)


def test_a_promoted_turn_says_when_it_was_queued_and_how_long_it_waited() -> None:
    promoted = pb.TurnAdmitted(
        turn=pb.TurnRecord(
            turn_id="t2",
            admitted_at=ts(AT),
            queued_at=ts(AT - timedelta(seconds=4)),
            waited=Duration(seconds=4),
        ),
        from_queue=True,
        waited=Duration(seconds=4),
    )
    body = convert.event(pb.SessionEvent(seq=3, time=ts(AT), session=ref(), turn_admitted=promoted)).body
    assert isinstance(body, TurnAdmitted)
    assert (body.from_queue, body.waited, body.turn.queued_at, body.turn.waited) == (
        True,
        4.0,
        AT - timedelta(seconds=4),
        4.0,
    )
    at_once = convert.event(
        pb.SessionEvent(
            seq=3, time=ts(AT), session=ref(), turn_admitted=pb.TurnAdmitted(turn=pb.TurnRecord())
        )
    ).body
    assert isinstance(at_once, TurnAdmitted)
    assert (at_once.from_queue, at_once.waited, at_once.turn.queued_at, at_once.turn.waited) == (
        False,
        None,
        None,
        None,
    )


def events() -> list[pb.SessionEvent]:
    """One event of each kind the contract has."""
    turn = pb.TurnRecord(turn_id="t1", generation=7, admitted_at=ts(AT))
    call = pb.ToolCall(call_id="c1", name="search", status=pb.TOOL_CALL_STATUS_INTERRUPTED, opened_at=ts(AT))
    asked = pb.Interaction(interaction_id="i1", kind="approval", status=pb.INTERACTION_STATUS_PENDING)
    waiting = pb.QueuedTurn(
        turn_id="t2", runner_id="r2", position=2, queued_at=ts(AT), expires_at=ts(AT + timedelta(minutes=10))
    )
    bodies = [
        {"snapshot": pb.SessionSnapshot(session=ref(), seq=1, resync=True)},
        {"turn_admitted": pb.TurnAdmitted(turn=turn)},
        {"stop_requested": pb.StopRequested(turn_id="t1", generation=7, reason="user", deadline=ts(AT))},
        {"tool_call": pb.ToolCallChanged(turn_id="t1", generation=7, tool_call=call)},
        {"interaction": pb.InteractionChanged(turn_id="t1", generation=7, interaction=asked)},
        {
            "turn_settled": pb.TurnSettled(
                turn=turn, interrupted_tool_call_ids=["c1"], cancelled_interaction_ids=["i1"], trace_id="ab"
            )
        },
        {"turn_queued": pb.TurnQueued(turn=waiting, position=2)},
        {
            "turn_dequeued": pb.TurnDequeued(
                turn_id="t2",
                runner_id="r2",
                outcome=pb.TURN_OUTCOME_CANCELLED,
                reason="user",
                cleared=True,
                waited=Duration(seconds=3, nanos=500_000_000),
            )
        },
        {"queue_paused": pb.QueuePaused(turn_id="t1", outcome=pb.TURN_OUTCOME_FAILED)},
        {"queue_resumed": pb.QueueResumed(turn_id="t1")},
        {
            "turn_steered": pb.TurnSteered(
                turn_id="t1",
                generation=7,
                steer=pb.SteerInput(steer_id="s1", content="hurry"),
                expires_at=ts(AT),
            )
        },
        {
            "steer_ended": pb.SteerEnded(
                turn_id="t1", generation=7, steer_id="s1", status=pb.STEER_STATUS_UNCONSUMED, requeued=True
            )
        },
        {"queue_reordered": pb.QueueReordered(turn_ids=["t3", "t2"], moved_turn_id="t3")},
    ]
    return [
        pb.SessionEvent(seq=seq, time=ts(AT), session=ref(), **body)  # type: ignore[arg-type]
        for seq, body in enumerate(bodies, 1)
    ]


def described(body: EventBody) -> str:
    """An exhaustive match, as SDK users write it (mypy checks that no kind is forgotten)."""
    match body:
        case SessionSnapshot(resync=resync):
            return f"snapshot resync={resync}"
        case TurnAdmitted(turn=turn):
            return f"admitted {turn.turn_id}"
        case StopRequested(turn_id=turn_id, deadline=deadline):
            return f"stop {turn_id} {deadline == AT}"
        case ToolCallChanged(tool_call=call):
            return f"call {call.call_id} {call.status.name}"
        case InteractionChanged(interaction=asked):
            return f"interaction {asked.interaction_id} {asked.status.name} {asked.closed_at}"
        case TurnSettled(interrupted_tool_call_ids=calls, cancelled_interaction_ids=asked, trace_id=trace):
            return f"settled {calls} {asked} {trace}"
        case TurnQueued(turn=waiting, position=position):
            return f"queued {waiting.turn_id} {waiting.runner_id} {position} {waiting.expires_at - AT}"
        case TurnDequeued(turn_id=turn_id, outcome=outcome, cleared=cleared, waited=waited):
            return f"dequeued {turn_id} {outcome.name} cleared={cleared} {waited}"
        case QueuePaused(turn_id=turn_id, outcome=outcome):
            return f"paused by {turn_id} {outcome.name}"
        case QueueResumed(turn_id=turn_id):
            return f"resumed, paused by {turn_id}"
        case TurnSteered(steer=steer, expires_at=expires_at):
            return f"steered {steer.steer_id} {steer.content!r} {expires_at == AT}"
        case SteerEnded(steer_id=steer_id, status=status, requeued=requeued):
            return f"steer {steer_id} ended {status.name} requeued={requeued}"
        case QueueReordered(turn_ids=turn_ids, moved_turn_id=moved):
            return f"reordered {turn_ids} moved {moved}"
        case UnknownEvent():
            return "unknown"
        case _:
            assert_never(body)


def test_every_event_kind_becomes_its_body_and_the_event_keeps_its_message() -> None:
    converted = [convert.event(message) for message in events()]
    assert [event.kind for event in converted] == [
        "snapshot",
        "turn_admitted",
        "stop_requested",
        "tool_call",
        "interaction",
        "turn_settled",
        "turn_queued",
        "turn_dequeued",
        "queue_paused",
        "queue_resumed",
        "turn_steered",
        "steer_ended",
        "queue_reordered",
    ]
    assert [described(event.body) for event in converted] == [
        "snapshot resync=True",
        "admitted t1",
        "stop t1 True",
        "call c1 INTERRUPTED",
        "interaction i1 PENDING None",
        "settled ('c1',) ('i1',) ab",
        "queued t2 r2 2 0:10:00",
        "dequeued t2 CANCELLED cleared=True 3.5",
        "paused by t1 FAILED",
        "resumed, paused by t1",
        "steered s1 'hurry' True",
        "steer s1 ended UNCONSUMED requeued=True",
        "reordered ('t3', 't2') moved t3",
    ]
    first = converted[0]
    assert (first.seq, first.time, first.session) == (1, AT, SessionRef("p", "s"))
    assert [event.raw for event in converted] == events()


def test_an_event_of_a_kind_added_later_is_an_unknown_event_with_its_cursor() -> None:
    known = pb.SessionEvent(seq=12, time=ts(AT), session=ref()).SerializeToString()
    later = pb.SessionEvent.FromString(known + bytes([0xA2, 0x01, 0x00]))  # field 20, empty
    event = convert.event(later)
    assert (event.seq, event.body, event.kind) == (12, UnknownEvent(), "")
    assert described(event.body) == "unknown"


def test_stop_answers_become_their_dataclasses() -> None:
    cancelled = pb.CancelTurnResponse(
        cancelled=pb.CancelTurnResponse.Cancelled(
            cancelled_turn_ids=["t1"], stopping_turn_id="t1", stop_deadline=ts(AT)
        )
    )
    mismatch = pb.CancelTurnResponse(
        mismatch=pb.CancelTurnResponse.Mismatch(
            expected_turn_id="t1",
            current_turn_id="t2",
            current_phase=pb.TURN_PHASE_STOPPING,
            expected_outcome=pb.TURN_OUTCOME_LOST,
        )
    )
    idle = pb.CancelTurnResponse(idle=pb.CancelTurnResponse.Idle(last_turn_id="t2"))
    assert convert.stop_result(cancelled) == Cancelled(("t1",), "t1", False, False, (), AT)
    assert convert.stop_result(mismatch) == Mismatch("t1", "t2", TurnPhase.STOPPING, TurnOutcome.LOST)
    assert convert.stop_result(idle) == Idle("", TurnOutcome.UNSPECIFIED, "t2", TurnOutcome.UNSPECIFIED)
    assert convert.stop_result(idle).raw is idle.idle
    with pytest.raises(ValueError, match="without an outcome"):
        convert.stop_result(pb.CancelTurnResponse())
    queued = pb.CancelTurnResponse(
        cancelled=pb.CancelTurnResponse.Cancelled(
            cancelled_turn_ids=["t3"], queued=True, cleared_turn_ids=["t4"]
        )
    )
    assert convert.stop_result(queued) == Cancelled(("t3",), "", False, False, (), None, True, ("t4",))


def test_s1_steer_answers_become_their_dataclasses_with_the_mismatchs_reason() -> None:
    steered = pb.SteerTurnResponse(steered=pb.SteerTurnResponse.Steered(turn_id="t1", steer_id="s1", seq=9))
    mismatch = pb.SteerTurnResponse(
        mismatch=pb.SteerTurnResponse.Mismatch(
            expected_turn_id="t0",
            reason=pb.ERROR_REASON_ACTIVE_TURN_MISMATCH,
            current_turn_id="t1",
            current_phase=pb.TURN_PHASE_RUNNING,
            expected_phase=pb.TURN_PHASE_SETTLED,
            expected_outcome=pb.TURN_OUTCOME_COMPLETED,
        )
    )
    waiting = pb.QueuedTurn(
        turn_id="s1",
        runner_id="r",
        position=1,
        queued_at=ts(AT),
        expires_at=ts(AT),
        steer=pb.SteerInput(steer_id="s1", content="then this", content_type="text/plain"),
    )
    queued = pb.SteerTurnResponse(queued=pb.SteerTurnResponse.Queued(turn=waiting, position=1, queue_depth=1))
    assert convert.steer_result(steered) == Steered("t1", "s1", 9, False)
    assert convert.steer_result(mismatch) == SteerMismatch(
        "t0",
        ErrorReason.ACTIVE_TURN_MISMATCH,
        "t1",
        TurnPhase.RUNNING,
        TurnPhase.SETTLED,
        TurnOutcome.COMPLETED,
    )
    steer = SteerInput("s1", "then this", "text/plain")
    assert convert.steer_result(queued) == SteerQueued(
        QueuedTurn("s1", "r", 1, AT, AT, steer), 1, 1, admitted=False, replayed=False
    )
    later = pb.SteerTurnResponse(mismatch=pb.SteerTurnResponse.Mismatch(reason=99))  # type: ignore[arg-type]
    assert convert.steer_result(later).reason is ErrorReason.UNSPECIFIED  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="without an outcome"):
        convert.steer_result(pb.SteerTurnResponse())


def test_a_resumed_queue_names_the_turn_it_admitted_and_those_still_waiting() -> None:
    waiting = pb.QueuedTurn(turn_id="t3", runner_id="r", position=1, queued_at=ts(AT), expires_at=ts(AT))
    resumed = convert.resumed_queue(pb.ResumeQueueResponse(admitted_turn_id="t2", queue=[waiting]))
    assert resumed == ResumedQueue("t2", (QueuedTurn("t3", "r", 1, AT, AT),))


def test_durations_are_float_seconds_and_back() -> None:
    assert convert.seconds(Duration(seconds=6, nanos=500_000_000)) == 6.5
    assert convert.duration(0.25) == Duration(nanos=250_000_000)
    refusal = convert.admission_refusal(
        pb.AdmissionRefusal(
            active_turn_id="t1",
            active_phase=pb.TURN_PHASE_RUNNING,
            active_lease_expires_at=ts(AT),
            retry_after=Duration(seconds=14, nanos=500_000_000),
        )
    )
    assert (refusal.active_phase, refusal.active_lease_expires_at, refusal.retry_after) == (
        TurnPhase.RUNNING,
        AT,
        14.5,
    )


def test_values_are_frozen() -> None:
    ref_ = SessionRef("p", "s")
    with pytest.raises(AttributeError):
        ref_.session_id = "other"  # type: ignore[misc]
    assert isinstance(convert.event(events()[0]), Event)
