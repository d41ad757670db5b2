"""CancelTurn: guarded Stop (I4), Stop as a request (I5), forced Stop and request_id replay."""

from __future__ import annotations

from turngate.service.core import (
    Cancelled,
    Directive,
    ErrorReason,
    Expire,
    HeartbeatReply,
    Idle,
    Interaction,
    InteractionChanged,
    InteractionStatus,
    Mismatch,
    SettledBy,
    StopRequest,
    StopRequested,
    Swept,
    ToolCallStatus,
    TurnOutcome,
    TurnPhase,
    TurnSettled,
)

from .helpers import (
    SECOND,
    STOP_GRACE,
    TOMBSTONE_TTL,
    Timeline,
    admit,
    assert_refused,
    assert_unchanged,
    bodies,
    cancel,
    complete,
    heartbeat,
    interaction,
    kinds,
    resolve,
    running,
    stopping,
)


def test_i4_stop_of_ended_turn_while_another_active_is_mismatch() -> None:
    timeline, first = running("t1")
    timeline.do(complete(first), after=SECOND)
    timeline.admit("t2", "r2")
    before = timeline.state

    decision = timeline.do(cancel("t1"), after=SECOND)

    assert decision.reply == Mismatch("t1", "t2", TurnPhase.RUNNING, TurnOutcome.COMPLETED)
    assert_unchanged(decision, before)


def test_i4_stop_of_ended_turn_while_idle_is_idle_with_its_outcome() -> None:
    timeline, first = running("t1")
    timeline.do(complete(first, TurnOutcome.FAILED), after=SECOND)
    before = timeline.state

    decision = timeline.do(cancel("t1"), after=SECOND)

    assert decision.reply == Idle("t1", TurnOutcome.FAILED, "t1", TurnOutcome.FAILED)
    assert_unchanged(decision, before)


def test_i4_stop_before_start_tombstones_and_admit_refused_turn_cancelled() -> None:
    timeline = Timeline()

    decision = timeline.do(cancel("t1", reason="changed my mind"))

    assert decision.reply == Cancelled(("t1",), before_start=True)
    assert bodies(decision) == [
        StopRequested("t1", 0, "changed my mind", timeline.now, None, before_start=True)
    ]
    assert timeline.state.tombstones == {"t1": timeline.now + TOMBSTONE_TTL}
    before = timeline.state
    assert_refused(timeline.do(admit("t1"), after=SECOND), before, ErrorReason.TURN_CANCELLED)


def test_i4_stop_before_start_leaves_the_active_turn_untouched() -> None:
    timeline, _ = running("t1", pending=["i1"])
    active = timeline.active

    decision = timeline.do(cancel("t9"), after=SECOND)

    # The answer names the turn that runs on: nothing running was stopped.
    assert decision.reply == Cancelled(("t9",), before_start=True, active_turn_id="t1")
    assert kinds(decision) == ["stop_requested"]
    assert timeline.active == active
    assert "t9" in timeline.state.tombstones


def test_i4_repeated_stop_before_start_same_answer_no_event() -> None:
    timeline = Timeline()
    first = timeline.do(cancel("t1"))
    before = timeline.state

    again = timeline.do(cancel("t1"), after=SECOND)

    assert again.reply == first.reply
    assert_unchanged(again, before)
    assert before.tombstones["t1"] == first.events[0].time + TOMBSTONE_TTL  # the tombstone is not extended


def test_i5_stop_moves_running_to_stopping_cancels_pending_interactions() -> None:
    timeline, lease = running("t1", open_calls=["c1"], pending=["i1", "i2"])
    timeline.do(resolve("i2"), after=1)
    now = timeline.now + SECOND

    decision = timeline.do(cancel("t1", reason="too slow"), after=SECOND)

    deadline = now + STOP_GRACE
    assert decision.reply == Cancelled(
        ("t1",), stopping_turn_id="t1", cancelled_interaction_ids=("i1",), stop_deadline=deadline
    )
    assert bodies(decision) == [
        StopRequested("t1", lease.generation, "too slow", now, deadline),
        InteractionChanged(
            "t1",
            lease.generation,
            "i1",
            Interaction("approval", InteractionStatus.CANCELLED, now - SECOND - 2, now),
        ),
    ]
    turn = timeline.active
    assert turn.phase is TurnPhase.STOPPING
    assert turn.stop == StopRequest(now, "too slow", deadline, ("i1",))
    assert turn.interactions["i2"].status is InteractionStatus.RESOLVED
    assert turn.tool_calls["c1"].status is ToolCallStatus.OPEN  # a Stop asks; only settlement interrupts


def test_i5_heartbeat_after_stop_directs_stop_with_deadline_and_reason() -> None:
    timeline, lease = stopping("t1")
    stop_deadline = timeline.now + STOP_GRACE

    reply = timeline.do(heartbeat(lease), after=SECOND).reply

    assert reply == HeartbeatReply(
        Directive.STOP, timeline.now + timeline.active.lease_ttl, stop_deadline, "user pressed stop"
    )


def test_i5_repeated_stop_same_answer_no_event() -> None:
    timeline, _ = running("t1", pending=["i1"])
    first = timeline.do(cancel("t1"), after=SECOND)
    before = timeline.state

    guarded = timeline.do(cancel("t1", reason="again", stop_grace=1), after=SECOND)
    unguarded = timeline.do(cancel(""), after=SECOND)

    assert guarded.reply == unguarded.reply == first.reply
    assert_unchanged(guarded, before)
    assert_unchanged(unguarded, before)


def test_i5_force_settles_now_cancelled_by_gateway() -> None:
    timeline, lease = running("t1", open_calls=["c1"], pending=["i1"])
    now = timeline.now + SECOND

    decision = timeline.do(cancel("t1", force=True), after=SECOND)

    assert decision.reply == Cancelled(("t1",), settled=True, cancelled_interaction_ids=("i1",))
    assert kinds(decision) == ["stop_requested", "interaction", "tool_call", "turn_settled"]
    stop = decision.events[0].body
    assert isinstance(stop, StopRequested)
    assert (stop.force, stop.deadline, stop.generation) == (True, None, lease.generation)
    settled = decision.events[-1].body
    assert isinstance(settled, TurnSettled)
    assert (settled.turn.outcome, settled.turn.settled_by) == (TurnOutcome.CANCELLED, SettledBy.GATEWAY)
    assert (settled.turn.settled_at, settled.turn.stop_requested) == (now, True)
    assert settled.interrupted_tool_call_ids == ("c1",)
    assert settled.cancelled_interaction_ids == ()  # already cancelled by the Stop, in this decision
    assert timeline.state.active is None
    assert timeline.state.last_settled == settled.turn


def test_i5_force_on_stopping_turn_settles_it_with_the_first_stop_reason() -> None:
    timeline, _ = stopping("t1", pending=["i1"])

    decision = timeline.do(cancel("t1", force=True, reason="now!"), after=SECOND)

    assert decision.reply == Cancelled(("t1",), settled=True, cancelled_interaction_ids=("i1",))
    assert kinds(decision) == ["stop_requested", "turn_settled"]
    settled = decision.events[-1].body
    assert isinstance(settled, TurnSettled)
    assert (settled.turn.outcome, settled.turn.settled_by) == (TurnOutcome.CANCELLED, SettledBy.GATEWAY)
    assert settled.turn.stop_reason == "user pressed stop"


def test_i5_runner_reports_cancelled_while_stopping_settles_by_runner() -> None:
    timeline, lease = stopping("t1")

    decision = timeline.do(complete(lease, TurnOutcome.CANCELLED, "stopped by user"), after=SECOND)

    settled = decision.events[-1].body
    assert isinstance(settled, TurnSettled)
    assert (settled.turn.outcome, settled.turn.settled_by) == (TurnOutcome.CANCELLED, SettledBy.RUNNER)
    assert (settled.turn.stop_requested, settled.turn.error) == (True, "stopped by user")


def test_unguarded_stop_on_fresh_session_is_idle_and_changes_nothing() -> None:
    timeline = Timeline()
    before = timeline.state

    decision = timeline.do(cancel(""))

    assert decision.reply == Idle("", None, "", None)
    assert_unchanged(decision, before)


def test_unguarded_stop_on_idle_session_names_the_last_turn() -> None:
    timeline, lease = running("t1")
    timeline.do(complete(lease), after=SECOND)
    before = timeline.state

    decision = timeline.do(cancel(""), after=SECOND)

    assert decision.reply == Idle("", None, "t1", TurnOutcome.COMPLETED)
    assert_unchanged(decision, before)


def test_unguarded_stop_stops_whatever_is_active() -> None:
    timeline, _ = running("t7")

    decision = timeline.do(cancel(""), after=SECOND)

    assert isinstance(decision.reply, Cancelled)
    assert decision.reply.stopping_turn_id == "t7"
    assert timeline.active.phase is TurnPhase.STOPPING


def test_stop_grace_expiry_settles_cancelled_by_watchdog() -> None:
    timeline, lease = stopping("t1", open_calls=["c1"])
    timeline.do(heartbeat(lease, lease_ttl=3600 * SECOND), after=SECOND)
    stop_deadline = timeline.now - SECOND + STOP_GRACE

    early = timeline.do(Expire(), after=STOP_GRACE - SECOND - 1)
    assert early.reply == Swept(settled=False)
    decision = timeline.do(Expire(), after=1)

    assert timeline.now == stop_deadline
    assert decision.reply == Swept(settled=True)
    assert kinds(decision) == ["tool_call", "turn_settled"]
    settled = decision.events[-1].body
    assert isinstance(settled, TurnSettled)
    assert (settled.turn.outcome, settled.turn.settled_by) == (TurnOutcome.CANCELLED, SettledBy.WATCHDOG)
    assert settled.interrupted_tool_call_ids == ("c1",)


def test_cancel_request_id_replay_same_answer_no_change() -> None:
    timeline, lease = running("t1")
    first = timeline.do(cancel("t1", request_id="req-1"), after=SECOND)
    timeline.do(complete(lease, TurnOutcome.CANCELLED), after=SECOND)
    timeline.admit("t2")
    before = timeline.state

    retry = timeline.do(cancel("t1", request_id="req-1"), after=SECOND)

    assert retry.reply == first.reply
    assert isinstance(retry.reply, Cancelled)
    assert_unchanged(retry, before)


def test_cancel_request_id_replay_of_a_force_does_not_touch_the_next_turn() -> None:
    timeline, _ = running("t1")
    first = timeline.do(cancel("", force=True, request_id="req-1"), after=SECOND)
    timeline.admit("t2")
    before = timeline.state

    retry = timeline.do(cancel("", force=True, request_id="req-1"), after=SECOND)

    assert retry.reply == first.reply
    assert_unchanged(retry, before)
    assert timeline.active.phase is TurnPhase.RUNNING


def test_cancel_request_id_memo_expires_after_its_ttl() -> None:
    timeline, lease = running("t1")
    timeline.do(cancel("t1", request_id="req-1", tombstone_ttl=TOMBSTONE_TTL), after=SECOND)
    timeline.do(complete(lease, TurnOutcome.CANCELLED), after=SECOND)
    timeline.admit("t2", lease_ttl=2 * TOMBSTONE_TTL)
    before = timeline.state

    replay = timeline.do(cancel("t1", request_id="req-1"), after=TOMBSTONE_TTL - SECOND - 1)
    assert isinstance(replay.reply, Cancelled)
    assert_unchanged(replay, before)
    expired = timeline.do(cancel("t1", request_id="req-1"), after=1)

    assert isinstance(expired.reply, Mismatch)  # decided afresh, not the first answer
    assert timeline.state.requests["req-1"].reply == expired.reply
    assert timeline.state.requests["req-1"].expires_at == timeline.now + TOMBSTONE_TTL


def test_cancel_mismatch_with_request_id_is_remembered_without_an_event() -> None:
    timeline, first = running("t1")
    timeline.do(complete(first), after=SECOND)
    timeline.admit("t2")

    decision = timeline.do(cancel("t1", request_id="req-1"), after=SECOND)

    assert isinstance(decision.reply, Mismatch)
    assert decision.events == ()
    assert timeline.state.requests["req-1"].reply == decision.reply
    assert timeline.active.phase is TurnPhase.RUNNING


def test_interactions_recorded_while_stopping_are_cancelled_at_once() -> None:
    timeline, lease = stopping("t1")

    decision = timeline.do(interaction(lease, "late"), after=SECOND)

    now = timeline.now
    cancelled = Interaction("approval", InteractionStatus.CANCELLED, now, now)
    assert bodies(decision) == [InteractionChanged("t1", lease.generation, "late", cancelled)]
    assert timeline.active.interactions["late"] == cancelled
    before = timeline.state
    assert_refused(timeline.do(resolve("late"), after=1), before, ErrorReason.INTERACTION_NOT_PENDING)
