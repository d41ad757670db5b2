"""api/convert.py: core values to contract messages, each field where the contract puts it, times
exact to the microsecond (the core counts µs; Timestamp and Duration count ns).

The values come from `decide()` on a timeline at an odd microsecond, or are written out where a
reply is simpler to state than to provoke. Expected messages use protobuf's own µs conversions.
"""

from __future__ import annotations

from dataclasses import replace
from enum import IntEnum
from typing import Any, TypeVar

import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from turngate.service import core
from turngate.service.api import convert
from turngate.service.core import (
    Admit,
    Directive,
    Event,
    EventBody,
    InteractionStatus,
    SessionKey,
    SessionPhase,
    SettledBy,
    ToolCallStatus,
    TurnOutcome,
    TurnPhase,
)
from turngate.service.ports.history import turn_view
from turngate.v1 import turngate_pb2 as pb

from .helpers import (
    LEASE_TTL,
    SECOND,
    STOP_GRACE,
    T0,
    Lease,
    Timeline,
    cancel,
    complete,
    interaction,
    resolve,
    tool_call,
)

KEY = SessionKey("p1", "s1")
REF = pb.SessionRef(project_id="p1", session_id="s1")
TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
START = T0 + 123_457  # an odd microsecond: nothing lands on it by rounding
_B = TypeVar("_B", bound=EventBody)


def ts(us: int) -> Timestamp:
    stamp = Timestamp()
    stamp.FromMicroseconds(us)
    return stamp


def dur(us: int) -> Duration:
    duration = Duration()
    duration.FromMicroseconds(us)
    return duration


class Story:
    """Turn t1 of session KEY, from its admission at START, one step a microsecond (or so) apart:
    a failed call, a resolved approval, an open call and a pending approval, a Stop, then the
    runner's CANCELLED report. `log` holds every event, `at` the store clock of each step."""

    def __init__(self) -> None:
        self.timeline = Timeline(now=START)
        admitted = self.timeline.do(Admit("t1", "r1", LEASE_TTL, traceparent=TRACE)).reply
        assert isinstance(admitted, core.Admitted)
        self.admitted = admitted
        self.lease = Lease("t1", admitted.generation)
        self.at: dict[str, int] = {"admit": START}

    def step(self, name: str, command: core.Command, after: int = 1) -> core.Decision:
        decision = self.timeline.do(command, after=after)
        self.at[name] = self.timeline.now
        return decision

    def run_until_stopped(self) -> None:
        lease = self.lease
        self.step("c1 open", tool_call(lease, "c1"), after=SECOND + 1)
        self.step("c1 failed", tool_call(lease, "c1", ToolCallStatus.FAILED, error="disk full"))
        self.step("i1 asked", interaction(lease, "i1"))
        self.step("i1 resolved", resolve("i1", "approved"))
        self.step("c2 open", tool_call(lease, "c2", name="browser"))
        self.step("i2 asked", interaction(lease, "i2", kind="question"))
        self.step("stop", cancel("t1", reason="user pressed stop"))

    def settle(self) -> None:
        self.step("settled", complete(self.lease, TurnOutcome.CANCELLED, error="wound down"))

    def event(self, kind: type[_B], nth: int = 0) -> tuple[Event, _B]:
        found = [(e, e.body) for e in self.timeline.log if isinstance(e.body, kind)]
        event, body = found[nth]
        assert isinstance(body, kind)
        return event, body


# --- times --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("us", "seconds", "nanos"),
    [
        (0, 0, 0),
        (1, 0, 1_000),
        (999_999, 0, 999_999_000),
        (1_000_000, 1, 0),
        (T0 + 123_457, 1_700_000_000, 123_457_000),
        (2**62 + 7, 2**62 // 1_000_000, (2**62 + 7) % 1_000_000 * 1_000),
    ],
)
def test_timestamps_and_durations_are_exact_to_the_microsecond(us: int, seconds: int, nanos: int) -> None:
    assert convert.timestamp(us) == Timestamp(seconds=seconds, nanos=nanos)
    assert convert.duration(us) == Duration(seconds=seconds, nanos=nanos)


def test_no_time_is_no_timestamp() -> None:
    assert convert.timestamp(None) is None
    assert not pb.StopRequested(deadline=convert.timestamp(None)).HasField("deadline")


@pytest.mark.parametrize(
    ("core_enum", "pb_enum", "prefix"),
    [
        (SessionPhase, pb.SessionPhase, "SESSION_PHASE_"),
        (TurnPhase, pb.TurnPhase, "TURN_PHASE_"),
        (TurnOutcome, pb.TurnOutcome, "TURN_OUTCOME_"),
        (SettledBy, pb.SettledBy, "SETTLED_BY_"),
        (ToolCallStatus, pb.ToolCallStatus, "TOOL_CALL_STATUS_"),
        (InteractionStatus, pb.InteractionStatus, "INTERACTION_STATUS_"),
        (Directive, pb.Directive, "DIRECTIVE_"),
        (core.ErrorReason, pb.ErrorReason, "ERROR_REASON_"),
        (core.SteerStatus, pb.SteerStatus, "STEER_STATUS_"),
        (core.SteerFallback, pb.SteerFallback, "STEER_FALLBACK_"),
    ],
)
def test_every_core_enum_value_is_the_contract_value_of_the_same_name(
    core_enum: type[IntEnum], pb_enum: Any, prefix: str
) -> None:
    assert {prefix + member.name: int(member) for member in core_enum} == {
        name: number for name, number in pb_enum.items() if number != 0
    }


def test_absent_phases_and_outcomes_are_unspecified() -> None:
    assert convert.turn_phase(None) == pb.TURN_PHASE_UNSPECIFIED
    assert convert.outcome(None) == pb.TURN_OUTCOME_UNSPECIFIED
    assert convert.outcome(TurnOutcome.LOST) == pb.TURN_OUTCOME_LOST


@pytest.mark.parametrize(
    ("traceparent", "trace_id"),
    [
        (TRACE, TRACE_ID),
        ("", ""),
        ("00-t1-trace", ""),
        ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331", ""),
        ("00-0af7651916cd43dd-b7ad6b7169203331-01", ""),
    ],
)
def test_the_trace_id_is_the_second_part_of_a_w3c_traceparent(traceparent: str, trace_id: str) -> None:
    assert convert.trace_id(traceparent) == trace_id


# --- events -------------------------------------------------------------------------------------


def test_turn_admitted_carries_the_turn_its_lease_and_the_time() -> None:
    story = Story()
    event, _ = story.event(core.TurnAdmitted)

    assert convert.event(KEY, event) == pb.SessionEvent(
        seq=1,
        time=ts(START),
        session=REF,
        epoch=START,
        turn_admitted=pb.TurnAdmitted(
            turn=pb.TurnRecord(
                turn_id="t1",
                runner_id="r1",
                generation=START,  # max(previous + 1, now in µs) on a new session
                phase=pb.TURN_PHASE_RUNNING,
                admitted_at=ts(START),
                lease_expires_at=ts(START + LEASE_TTL),
                trace_id=TRACE_ID,
            )
        ),
    )


def test_tool_call_changed_carries_the_call_with_its_error_and_times() -> None:
    story = Story()
    story.run_until_stopped()
    opened, _ = story.event(core.ToolCallChanged, 0)
    failed, _ = story.event(core.ToolCallChanged, 1)

    assert convert.event(KEY, failed) == pb.SessionEvent(
        seq=3,
        time=ts(story.at["c1 failed"]),
        session=REF,
        epoch=START,
        tool_call=pb.ToolCallChanged(
            turn_id="t1",
            generation=story.lease.generation,
            tool_call=pb.ToolCall(
                call_id="c1",
                name="shell",
                status=pb.TOOL_CALL_STATUS_FAILED,
                error="disk full",
                opened_at=ts(story.at["c1 open"]),
                closed_at=ts(story.at["c1 failed"]),
            ),
        ),
    )
    assert not convert.event(KEY, opened).tool_call.tool_call.HasField("closed_at")


def test_interaction_changed_carries_the_interaction_with_its_resolution_and_times() -> None:
    story = Story()
    story.run_until_stopped()
    resolved, _ = story.event(core.InteractionChanged, 1)

    assert convert.event(KEY, resolved) == pb.SessionEvent(
        seq=5,
        time=ts(story.at["i1 resolved"]),
        session=REF,
        epoch=START,
        interaction=pb.InteractionChanged(
            turn_id="t1",
            generation=story.lease.generation,
            interaction=pb.Interaction(
                interaction_id="i1",
                kind="approval",
                status=pb.INTERACTION_STATUS_RESOLVED,
                resolution="approved",
                opened_at=ts(story.at["i1 asked"]),
                closed_at=ts(story.at["i1 resolved"]),
            ),
        ),
    )


def test_stop_requested_carries_the_reason_and_the_stop_deadline() -> None:
    story = Story()
    story.run_until_stopped()
    stopped, _ = story.event(core.StopRequested)

    assert convert.event(KEY, stopped) == pb.SessionEvent(
        seq=8,
        time=ts(story.at["stop"]),
        session=REF,
        epoch=START,
        stop_requested=pb.StopRequested(
            turn_id="t1",
            generation=story.lease.generation,
            reason="user pressed stop",
            deadline=ts(story.at["stop"] + STOP_GRACE),
        ),
    )


def test_a_stop_before_the_turn_started_has_no_generation_and_no_deadline() -> None:
    timeline = Timeline(now=START)
    timeline.do(cancel("t9", reason="too late to start"))
    [event] = timeline.log

    assert convert.event(KEY, event) == pb.SessionEvent(
        seq=1,
        time=ts(START),
        session=REF,
        epoch=START,
        stop_requested=pb.StopRequested(turn_id="t9", reason="too late to start", before_start=True),
    )


def test_a_forced_stop_says_so() -> None:
    story = Story()
    story.step("forced", cancel("t1", force=True))
    stopped, body = story.event(core.StopRequested)

    assert body.force
    assert convert.event(KEY, stopped).stop_requested == pb.StopRequested(
        turn_id="t1",
        generation=story.lease.generation,
        reason="user pressed stop",
        force=True,
    ), "no deadline: the turn is settled at once"


def test_turn_settled_carries_the_settled_turn_what_settlement_closed_and_the_trace_id() -> None:
    story = Story()
    story.run_until_stopped()
    story.settle()
    settled, _ = story.event(core.TurnSettled)

    assert convert.event(KEY, settled) == pb.SessionEvent(
        seq=settled.seq,
        time=ts(story.at["settled"]),
        session=REF,
        epoch=START,
        turn_settled=pb.TurnSettled(
            turn=pb.TurnRecord(
                turn_id="t1",
                runner_id="r1",
                generation=story.lease.generation,
                phase=pb.TURN_PHASE_SETTLED,
                outcome=pb.TURN_OUTCOME_CANCELLED,
                settled_by=pb.SETTLED_BY_RUNNER,
                stop_requested=True,
                admitted_at=ts(START),
                settled_at=ts(story.at["settled"]),
                error="wound down",
                stop_reason="user pressed stop",
            ),
            interrupted_tool_call_ids=["c2"],
            cancelled_interaction_ids=[],  # i2 was cancelled by the Stop already (I5)
            trace_id="0af7651916cd43dd8448eb211c80319c",
        ),
    )


def test_every_event_of_a_turn_converts_with_its_seq_time_and_session() -> None:
    story = Story()
    story.run_until_stopped()
    story.settle()
    converted = [convert.event(KEY, event) for event in story.timeline.log]

    assert [m.seq for m in converted] == list(range(1, 12))
    assert [m.time for m in converted] == [ts(event.time) for event in story.timeline.log]
    assert all(m.session == REF for m in converted)
    assert [m.WhichOneof("kind") for m in converted] == [
        "turn_admitted",
        "tool_call",
        "tool_call",
        "interaction",
        "interaction",
        "tool_call",
        "interaction",
        "stop_requested",
        "interaction",  # i2 cancelled by the Stop, in the same write
        "tool_call",  # c2 interrupted by the settlement (I7), in the same write
        "turn_settled",
    ]
    cancelled = converted[8].interaction.interaction
    assert (cancelled.interaction_id, cancelled.status, cancelled.closed_at) == (
        "i2",
        pb.INTERACTION_STATUS_CANCELLED,
        ts(story.at["stop"]),
    )
    interrupted = converted[9].tool_call.tool_call
    assert (interrupted.call_id, interrupted.name, interrupted.status, interrupted.error) == (
        "c2",
        "browser",
        pb.TOOL_CALL_STATUS_INTERRUPTED,
        "",
    )


# --- snapshots ----------------------------------------------------------------------------------


def test_the_snapshot_of_a_session_never_written_is_idle_at_seq_0() -> None:
    assert convert.snapshot(KEY, core.Session()) == pb.SessionSnapshot(
        session=REF, seq=0, phase=pb.SESSION_PHASE_IDLE
    )


def test_the_snapshot_of_a_stopping_turn_has_its_stop_and_lease_but_not_its_calls() -> None:
    story = Story()
    story.run_until_stopped()
    state = story.timeline.state

    assert convert.snapshot(KEY, state) == pb.SessionSnapshot(
        session=REF,
        epoch=START,
        seq=9,
        phase=pb.SESSION_PHASE_STOPPING,
        active=pb.TurnRecord(
            turn_id="t1",
            runner_id="r1",
            generation=story.lease.generation,
            phase=pb.TURN_PHASE_STOPPING,
            stop_requested=True,
            admitted_at=ts(START),
            lease_expires_at=ts(START + LEASE_TTL),
            stop_reason="user pressed stop",
            stop_deadline=ts(story.at["stop"] + STOP_GRACE),
            trace_id=TRACE_ID,
        ),
    )


def test_the_snapshot_after_a_settlement_has_the_last_settled_turn_and_the_next_active_one() -> None:
    story = Story()
    story.run_until_stopped()
    story.settle()
    second = story.step("t2", Admit("t2", "r2", 5 * SECOND))
    assert isinstance(second.reply, core.Admitted)

    snapshot = convert.snapshot(KEY, story.timeline.state, resync=True)

    assert snapshot == pb.SessionSnapshot(
        session=REF,
        epoch=START,
        seq=12,
        phase=pb.SESSION_PHASE_RUNNING,
        active=pb.TurnRecord(
            turn_id="t2",
            runner_id="r2",
            generation=second.reply.generation,
            phase=pb.TURN_PHASE_RUNNING,
            admitted_at=ts(story.at["t2"]),
            lease_expires_at=ts(story.at["t2"] + 5 * SECOND),
        ),
        last_settled=pb.TurnRecord(
            turn_id="t1",
            runner_id="r1",
            generation=story.lease.generation,
            phase=pb.TURN_PHASE_SETTLED,
            outcome=pb.TURN_OUTCOME_CANCELLED,
            settled_by=pb.SETTLED_BY_RUNNER,
            stop_requested=True,
            admitted_at=ts(START),
            settled_at=ts(story.at["settled"]),
            error="wound down",
            stop_reason="user pressed stop",
        ),
        resync=True,
    )
    assert second.reply.generation == story.at["t2"], "max(previous + 1, now in µs)"


def test_a_snapshot_event_is_at_the_head_and_the_time_given() -> None:
    story = Story()
    story.run_until_stopped()
    state = story.timeline.state

    assert convert.snapshot_event(KEY, state, START + 42, resync=False) == pb.SessionEvent(
        seq=9, time=ts(START + 42), session=REF, snapshot=convert.snapshot(KEY, state), epoch=START
    )
    assert convert.snapshot_event(KEY, state, START, resync=True).snapshot.resync


# --- turn records -------------------------------------------------------------------------------


def test_a_turn_record_has_its_calls_and_interactions_in_order_with_their_texts_unless_asked_without() -> (
    None
):
    story = Story()
    story.run_until_stopped()
    active = story.timeline.state.active
    assert active is not None
    view = turn_view(active)
    view = replace(
        view,
        tool_calls=(replace(view.tool_calls[0], error="disk full"), view.tool_calls[1]),
        interactions=(replace(view.interactions[0], resolution="approved"), view.interactions[1]),
    )

    with_calls = convert.turn_record(view)
    without = convert.turn_record(view, with_calls=False)

    assert list(with_calls.tool_calls) == [
        pb.ToolCall(
            call_id="c1",
            name="shell",
            status=pb.TOOL_CALL_STATUS_FAILED,
            error="disk full",
            opened_at=ts(story.at["c1 open"]),
            closed_at=ts(story.at["c1 failed"]),
        ),
        pb.ToolCall(
            call_id="c2", name="browser", status=pb.TOOL_CALL_STATUS_OPEN, opened_at=ts(story.at["c2 open"])
        ),
    ]
    assert list(with_calls.interactions) == [
        pb.Interaction(
            interaction_id="i1",
            kind="approval",
            status=pb.INTERACTION_STATUS_RESOLVED,
            resolution="approved",
            opened_at=ts(story.at["i1 asked"]),
            closed_at=ts(story.at["i1 resolved"]),
        ),
        pb.Interaction(
            interaction_id="i2",
            kind="question",
            status=pb.INTERACTION_STATUS_CANCELLED,
            opened_at=ts(story.at["i2 asked"]),
            closed_at=ts(story.at["stop"]),
        ),
    ]
    assert (len(without.tool_calls), len(without.interactions)) == (0, 0)
    with_calls.ClearField("tool_calls")
    with_calls.ClearField("interactions")
    assert with_calls == without == convert.snapshot(KEY, story.timeline.state).active


def test_a_settled_turn_record_has_no_lease_and_no_stop_deadline() -> None:
    story = Story()
    story.run_until_stopped()
    active = story.timeline.state.active
    assert active is not None
    settled_view = replace(
        turn_view(active),
        phase=TurnPhase.SETTLED,
        outcome=TurnOutcome.LOST,
        settled_by=SettledBy.WATCHDOG,
        settled_at=START + 99,
    )

    record = convert.turn_record(settled_view)

    assert not record.HasField("lease_expires_at")
    assert not record.HasField("stop_deadline")
    assert (record.phase, record.outcome, record.settled_by, record.settled_at) == (
        pb.TURN_PHASE_SETTLED,
        pb.TURN_OUTCOME_LOST,
        pb.SETTLED_BY_WATCHDOG,
        ts(START + 99),
    )
    assert len(record.tool_calls) == 2, "a settled turn's calls are kept (GetTurn from the ledger)"


# --- replies ------------------------------------------------------------------------------------


def test_admitted_is_the_lease_its_expiry_and_the_heartbeat_interval() -> None:
    story = Story()
    expected = pb.AdmitTurnResponse(
        lease=pb.TurnLease(session=REF, turn_id="t1", generation=START),
        lease_expires_at=ts(START + LEASE_TTL),
        heartbeat_interval=dur(LEASE_TTL // 3),
        replayed=False,
    )
    assert convert.admitted(KEY, story.admitted) == expected
    assert expected.heartbeat_interval == Duration(seconds=6, nanos=666_666_000)

    replayed = story.step("again", Admit("t1", "r1", LEASE_TTL, traceparent=TRACE)).reply
    assert isinstance(replayed, core.Admitted)
    expected.replayed = True
    assert convert.admitted(KEY, replayed) == expected


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        pytest.param(
            core.HeartbeatReply(Directive.CONTINUE, lease_expires_at=START + 1),
            pb.HeartbeatResponse(directive=pb.DIRECTIVE_CONTINUE, lease_expires_at=ts(START + 1)),
            id="continue",
        ),
        pytest.param(
            core.HeartbeatReply(
                Directive.STOP,
                lease_expires_at=START + 2,
                stop_deadline=START + 3,
                stop_reason="user pressed stop",
            ),
            pb.HeartbeatResponse(
                directive=pb.DIRECTIVE_STOP,
                lease_expires_at=ts(START + 2),
                stop_deadline=ts(START + 3),
                stop_reason="user pressed stop",
            ),
            id="stop",
        ),
        pytest.param(
            core.HeartbeatReply(Directive.ABANDON, settled_outcome=TurnOutcome.LOST),
            pb.HeartbeatResponse(directive=pb.DIRECTIVE_ABANDON, settled_outcome=pb.TURN_OUTCOME_LOST),
            id="abandon-settled",
        ),
        pytest.param(
            core.HeartbeatReply(Directive.ABANDON),
            pb.HeartbeatResponse(directive=pb.DIRECTIVE_ABANDON),
            id="abandon-unknown",
        ),
    ],
)
def test_a_heartbeat_reply_is_its_directive_with_what_goes_with_it(
    reply: core.HeartbeatReply, expected: pb.HeartbeatResponse
) -> None:
    assert convert.heartbeat(reply) == expected


def test_heartbeat_replies_from_decide_convert_exactly() -> None:
    story = Story()
    beat = story.step("beat", core.Heartbeat("t1", story.lease.generation), after=3 * SECOND + 5).reply
    assert isinstance(beat, core.HeartbeatReply)
    assert convert.heartbeat(beat) == pb.HeartbeatResponse(
        directive=pb.DIRECTIVE_CONTINUE, lease_expires_at=ts(story.at["beat"] + LEASE_TTL)
    )
    story.step("stop", cancel("t1", reason="enough"))
    told = story.step("told", core.Heartbeat("t1", story.lease.generation)).reply
    assert isinstance(told, core.HeartbeatReply)
    assert convert.heartbeat(told) == pb.HeartbeatResponse(
        directive=pb.DIRECTIVE_STOP,
        lease_expires_at=ts(story.at["told"] + LEASE_TTL),
        stop_deadline=ts(story.at["stop"] + STOP_GRACE),
        stop_reason="enough",
    )


def test_a_recorded_tool_call_is_the_call_with_its_error_and_whether_it_was_recorded() -> None:
    story = Story()
    story.step("open", tool_call(story.lease, "c1"))
    failed = story.step(
        "failed", tool_call(story.lease, "c1", ToolCallStatus.FAILED, error="disk full")
    ).reply
    again = story.step("again", tool_call(story.lease, "c1", ToolCallStatus.FAILED, error="disk full")).reply
    assert isinstance(failed, core.ToolCallReply)
    assert isinstance(again, core.ToolCallReply)
    call = pb.ToolCall(
        call_id="c1",
        name="shell",
        status=pb.TOOL_CALL_STATUS_FAILED,
        error="disk full",
        opened_at=ts(story.at["open"]),
        closed_at=ts(story.at["failed"]),
    )

    assert convert.tool_call_recorded(failed) == pb.RecordToolCallResponse(tool_call=call, recorded=True)
    assert convert.tool_call_recorded(again).recorded is False
    assert convert.tool_call_recorded(again).tool_call.closed_at == ts(story.at["failed"])


def test_a_recorded_and_a_resolved_interaction_carry_the_interaction() -> None:
    story = Story()
    asked = story.step("asked", interaction(story.lease, "i1")).reply
    answered = story.step("answered", resolve("i1", "approved")).reply
    assert isinstance(asked, core.InteractionReply)
    assert isinstance(answered, core.InteractionReply)

    assert convert.interaction_recorded(asked) == pb.RecordInteractionResponse(
        interaction=pb.Interaction(
            interaction_id="i1",
            kind="approval",
            status=pb.INTERACTION_STATUS_PENDING,
            opened_at=ts(story.at["asked"]),
        ),
        recorded=True,
    )
    assert convert.interaction_resolved(answered) == pb.ResolveInteractionResponse(
        interaction=pb.Interaction(
            interaction_id="i1",
            kind="approval",
            status=pb.INTERACTION_STATUS_RESOLVED,
            resolution="approved",
            opened_at=ts(story.at["asked"]),
            closed_at=ts(story.at["answered"]),
        ),
        turn_id="t1",
    )


def test_a_completion_is_the_settled_turn_and_whether_this_report_recorded_it() -> None:
    story = Story()
    first = story.step("done", complete(story.lease, TurnOutcome.FAILED, error="boom"), after=7).reply
    late = story.step("late", complete(story.lease, TurnOutcome.COMPLETED)).reply
    assert isinstance(first, core.CompleteReply)
    assert isinstance(late, core.CompleteReply)
    record = pb.TurnRecord(
        turn_id="t1",
        runner_id="r1",
        generation=START,
        phase=pb.TURN_PHASE_SETTLED,
        outcome=pb.TURN_OUTCOME_FAILED,
        settled_by=pb.SETTLED_BY_RUNNER,
        admitted_at=ts(START),
        settled_at=ts(START + 7),
        error="boom",
    )

    assert convert.completed(first) == pb.CompleteTurnResponse(turn=record, recorded=True)
    assert convert.completed(late) == pb.CompleteTurnResponse(turn=record, recorded=False), (
        "I6: the first outcome"
    )


def test_a_cancel_reply_is_cancelled_mismatch_or_idle() -> None:
    story = Story()
    story.step("i1", interaction(story.lease, "i1"))
    stopped = story.step("stop", cancel("t1", reason="enough")).reply
    assert isinstance(stopped, core.Cancelled)
    assert convert.cancelled(stopped) == pb.CancelTurnResponse(
        cancelled=pb.CancelTurnResponse.Cancelled(
            cancelled_turn_ids=["t1"],
            stopping_turn_id="t1",
            cancelled_interaction_ids=["i1"],
            stop_deadline=ts(story.at["stop"] + STOP_GRACE),
        )
    )
    forced = story.step("forced", cancel("t1", force=True)).reply
    assert isinstance(forced, core.Cancelled)
    assert convert.cancelled(forced).cancelled.settled
    idle = story.step("idle", cancel("t1")).reply
    assert idle == core.Idle("t1", TurnOutcome.CANCELLED, "t1", TurnOutcome.CANCELLED)
    assert convert.cancelled(idle) == pb.CancelTurnResponse(
        idle=pb.CancelTurnResponse.Idle(
            expected_turn_id="t1",
            expected_outcome=pb.TURN_OUTCOME_CANCELLED,
            last_turn_id="t1",
            last_outcome=pb.TURN_OUTCOME_CANCELLED,
        )
    )
    story.step("t2", Admit("t2", "r2", LEASE_TTL))
    mismatch = story.step("mismatch", cancel("t1")).reply
    assert mismatch == core.Mismatch("t1", "t2", TurnPhase.RUNNING, TurnOutcome.CANCELLED)
    assert convert.cancelled(mismatch) == pb.CancelTurnResponse(
        mismatch=pb.CancelTurnResponse.Mismatch(
            expected_turn_id="t1",
            current_turn_id="t2",
            current_phase=pb.TURN_PHASE_RUNNING,
            expected_outcome=pb.TURN_OUTCOME_CANCELLED,
        )
    )
    tombstoned = story.step("t9", cancel("t9")).reply  # I4: a turn never seen is stopped before it starts
    assert isinstance(tombstoned, core.Cancelled)
    assert convert.cancelled(tombstoned) == pb.CancelTurnResponse(
        cancelled=pb.CancelTurnResponse.Cancelled(
            cancelled_turn_ids=["t9"], before_start=True, active_turn_id="t2"
        )
    )


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        pytest.param(
            core.Cancelled(("t0",), before_start=True),
            pb.CancelTurnResponse(
                cancelled=pb.CancelTurnResponse.Cancelled(cancelled_turn_ids=["t0"], before_start=True)
            ),
            id="cancelled-before-start",
        ),
        pytest.param(
            core.Mismatch("t0", "t2", TurnPhase.STOPPING, None),
            pb.CancelTurnResponse(
                mismatch=pb.CancelTurnResponse.Mismatch(
                    expected_turn_id="t0", current_turn_id="t2", current_phase=pb.TURN_PHASE_STOPPING
                )
            ),
            id="mismatch-expected-unknown",
        ),
        pytest.param(
            core.Idle("", None, "", None),
            pb.CancelTurnResponse(idle=pb.CancelTurnResponse.Idle()),
            id="idle-never-ran",
        ),
    ],
)
def test_cancel_replies_without_outcomes_leave_them_unspecified(
    reply: core.CancelReply, expected: pb.CancelTurnResponse
) -> None:
    assert convert.cancelled(reply) == expected
    assert convert.cancelled(reply).WhichOneof("outcome") == reply.kind
