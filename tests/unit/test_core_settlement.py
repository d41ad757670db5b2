"""Settlement: one outcome (I6), nothing left open (I7), no resurrection (I8), one clock (I10), the
event log (I9) and the watchdog's Expire."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from turngate.service.core import (
    Admitted,
    Command,
    CompleteReply,
    Directive,
    Expire,
    HeartbeatReply,
    Interaction,
    InteractionChanged,
    InteractionStatus,
    SettledBy,
    Swept,
    ToolCall,
    ToolCallChanged,
    ToolCallStatus,
    TurnOutcome,
    TurnSettled,
    decide,
)
from turngate.service.core.limits import RECENT_TURNS

from .helpers import (
    LEASE_TTL,
    SECOND,
    STOP_GRACE,
    T0,
    Lease,
    Timeline,
    admit,
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
    tool_call,
)


def settled_body(timeline: Timeline) -> TurnSettled:
    body = timeline.log[-1].body
    assert isinstance(body, TurnSettled), body
    return body


def test_i6_complete_settles_once_with_the_runners_outcome_and_error() -> None:
    timeline, lease = running("t1")

    decision = timeline.do(complete(lease, TurnOutcome.FAILED, "model timed out"), after=SECOND)

    assert isinstance(decision.reply, CompleteReply)
    assert decision.reply.recorded is True
    turn = decision.reply.turn
    assert (turn.turn_id, turn.runner_id, turn.generation) == ("t1", "r1", lease.generation)
    assert (turn.outcome, turn.settled_by, turn.error) == (
        TurnOutcome.FAILED,
        SettledBy.RUNNER,
        "model timed out",
    )
    assert (turn.admitted_at, turn.settled_at, turn.stop_requested) == (T0, T0 + SECOND, False)
    assert bodies(decision) == [TurnSettled(turn, traceparent="00-t1-trace")]
    assert timeline.state.active is None
    assert timeline.state.recent == (turn,)


@pytest.mark.parametrize(
    "settle",
    [
        pytest.param(lambda lease: complete(lease, TurnOutcome.COMPLETED), id="runner"),
        pytest.param(lambda lease: cancel(lease.turn_id, force=True), id="force"),
        pytest.param(lambda lease: Expire(), id="lease-expiry"),
    ],
)
def test_i6_late_complete_gets_recorded_outcome_recorded_false(settle: Callable[[Lease], Command]) -> None:
    timeline, lease = running("t1")
    timeline.do(settle(lease), after=LEASE_TTL)
    first = settled_body(timeline).turn
    before = timeline.state

    late = timeline.do(complete(lease, TurnOutcome.FAILED, "too late"), after=SECOND)

    assert late.reply == CompleteReply(first, recorded=False)
    assert_unchanged(late, before)


def test_i6_complete_after_lease_expiry_settles_lost_once_and_reports_it() -> None:
    timeline, lease = running("t1")

    decision = timeline.do(complete(lease), after=LEASE_TTL)

    assert isinstance(decision.reply, CompleteReply)
    assert decision.reply.recorded is False
    assert (decision.reply.turn.outcome, decision.reply.turn.settled_by) == (
        TurnOutcome.LOST,
        SettledBy.WATCHDOG,
    )
    assert kinds(decision) == ["turn_settled"]


def test_i7_settlement_interrupts_open_calls_only_finished_keep_status() -> None:
    timeline, lease = running("t1", open_calls=["c1", "c2", "c3"], pending=["i1", "i2"])
    timeline.do(tool_call(lease, "c2", ToolCallStatus.SUCCEEDED), after=1)
    timeline.do(tool_call(lease, "c3", ToolCallStatus.FAILED, error="exit 1"), after=1)
    timeline.do(resolve("i2"), after=1)
    calls, interactions = timeline.active.tool_calls, timeline.active.interactions
    now = timeline.now + SECOND

    decision = timeline.do(complete(lease), after=SECOND)

    interrupted = ToolCall("shell", ToolCallStatus.INTERRUPTED, calls["c1"].opened_at, now)
    cancelled = Interaction("approval", InteractionStatus.CANCELLED, interactions["i1"].opened_at, now)
    settled = decision.events[-1].body
    assert isinstance(settled, TurnSettled)
    assert bodies(decision) == [
        ToolCallChanged("t1", lease.generation, "c1", interrupted),
        InteractionChanged("t1", lease.generation, "i1", cancelled),
        settled,
    ]
    assert settled.interrupted_tool_call_ids == ("c1",)
    assert settled.cancelled_interaction_ids == ("i1",)
    assert settled.turn.outcome is TurnOutcome.COMPLETED  # interrupting a call is not a failure


@pytest.mark.parametrize(
    ("settle", "after", "outcome", "settled_by"),
    [
        pytest.param(complete, SECOND, TurnOutcome.COMPLETED, SettledBy.RUNNER, id="runner"),
        pytest.param(
            lambda lease: cancel(force=True), SECOND, TurnOutcome.CANCELLED, SettledBy.GATEWAY, id="force"
        ),
        pytest.param(lambda lease: Expire(), LEASE_TTL, TurnOutcome.LOST, SettledBy.WATCHDOG, id="lease"),
        pytest.param(heartbeat, LEASE_TTL, TurnOutcome.LOST, SettledBy.WATCHDOG, id="heartbeat-late"),
        pytest.param(
            lambda lease: admit("t2", "r2"), LEASE_TTL, TurnOutcome.LOST, SettledBy.WATCHDOG, id="next-admit"
        ),
    ],
)
def test_i7_every_settlement_path_closes_everything_left_open_in_the_same_decision(
    settle: Callable[[Lease], Command], after: int, outcome: TurnOutcome, settled_by: SettledBy
) -> None:
    timeline, lease = running("t1", open_calls=["c1", "c2"], pending=["i1"])

    decision = timeline.do(settle(lease), after=after)

    settled = next(b for b in bodies(decision) if isinstance(b, TurnSettled))
    assert (settled.turn.outcome, settled.turn.settled_by) == (outcome, settled_by)
    assert set(settled.interrupted_tool_call_ids) == {"c1", "c2"}
    assert {b.call_id for b in bodies(decision) if isinstance(b, ToolCallChanged)} == {"c1", "c2"}
    assert all(
        b.call.status is ToolCallStatus.INTERRUPTED and b.error == ""
        for b in bodies(decision)
        if isinstance(b, ToolCallChanged)
    )
    assert {b.interaction_id for b in bodies(decision) if isinstance(b, InteractionChanged)} == {"i1"}


def test_i8_heartbeat_after_lease_expiry_settles_lost_and_abandons() -> None:
    timeline, lease = running("t1", open_calls=["c1"])

    decision = timeline.do(heartbeat(lease), after=LEASE_TTL + SECOND)

    assert decision.reply == HeartbeatReply(Directive.ABANDON, settled_outcome=TurnOutcome.LOST)
    assert kinds(decision) == ["tool_call", "turn_settled"]
    assert settled_body(timeline).turn.settled_at == timeline.now
    assert timeline.state.active is None


def test_i8_lease_ends_at_lease_expires_at_inclusive() -> None:
    timeline, lease = running("t1")

    alive = timeline.do(heartbeat(lease), after=LEASE_TTL - 1)
    assert isinstance(alive.reply, HeartbeatReply)
    assert alive.reply.directive is Directive.CONTINUE
    late = timeline.do(heartbeat(lease), after=LEASE_TTL)

    assert isinstance(late.reply, HeartbeatReply)
    assert late.reply.directive is Directive.ABANDON


def test_i8_heartbeat_in_time_extends_the_lease_by_the_admitted_length_or_the_asked_one() -> None:
    timeline, lease = running("t1")

    kept = timeline.do(heartbeat(lease), after=5 * SECOND)
    assert kept.reply == HeartbeatReply(Directive.CONTINUE, timeline.now + LEASE_TTL)
    parked = timeline.do(heartbeat(lease, lease_ttl=3600 * SECOND), after=5 * SECOND)
    assert parked.reply == HeartbeatReply(Directive.CONTINUE, timeline.now + 3600 * SECOND)

    assert parked.events == ()
    assert timeline.active.lease_expires_at == timeline.now + 3600 * SECOND
    assert timeline.active.lease_ttl == LEASE_TTL  # the admitted length stays the default
    assert timeline.state.deadline() == timeline.active.lease_expires_at


def test_i8_heartbeat_of_a_settled_turn_abandons_with_its_outcome_and_changes_nothing() -> None:
    timeline, lease = running("t1")
    timeline.do(complete(lease, TurnOutcome.FAILED), after=SECOND)
    before = timeline.state

    decision = timeline.do(heartbeat(lease), after=SECOND)

    assert decision.reply == HeartbeatReply(Directive.ABANDON, settled_outcome=TurnOutcome.FAILED)
    assert_unchanged(decision, before)


def test_i10_expiry_decided_by_now_argument_not_by_caller() -> None:
    timeline, lease = running("t1")
    state, expiry = timeline.state, T0 + LEASE_TTL

    assert_unchanged(decide(state, Expire(), expiry - 1), state)
    by_watchdog = decide(state, Expire(), expiry)
    by_next_runner = decide(state, admit("t2", "r2"), expiry)

    assert by_watchdog.reply == Swept(settled=True)
    assert kinds(by_next_runner) == ["turn_settled", "turn_admitted"]
    assert by_next_runner.events[0] == by_watchdog.events[0]
    assert isinstance(by_next_runner.reply, Admitted)
    assert by_next_runner.reply.generation > lease.generation


def test_expire_when_nothing_is_due_changes_nothing() -> None:
    idle = Timeline()
    assert_unchanged(idle.do(Expire(), after=10**12), idle.state)
    timeline, _ = stopping("t1")
    before = timeline.state

    decision = timeline.do(Expire(), after=LEASE_TTL - 2)

    assert decision.reply == Swept(settled=False)
    assert_unchanged(decision, before)


def test_lease_expiry_before_stop_deadline_settles_lost_not_cancelled() -> None:
    timeline, _ = stopping("t1")  # lease ends T0+LEASE_TTL, before the stop grace ends
    assert timeline.state.deadline() == T0 + LEASE_TTL

    decision = timeline.do(Expire(), after=STOP_GRACE)

    assert decision.reply == Swept(settled=True)
    turn = settled_body(timeline).turn
    assert (turn.outcome, turn.settled_by, turn.stop_requested) == (
        TurnOutcome.LOST,
        SettledBy.WATCHDOG,
        True,
    )


def test_i9_seq_gapless_across_commands() -> None:
    timeline, lease = running("t1", open_calls=["c1"], pending=["i1"])
    timeline.do(heartbeat(lease), after=1)  # writes, but no event
    timeline.do(admit("t2"), after=1)  # refused: no event
    timeline.do(cancel("t1"), after=1)
    timeline.do(interaction(lease, "i2"), after=1)
    timeline.do(complete(lease, TurnOutcome.CANCELLED), after=1)
    timeline.do(cancel("t9"), after=1)
    second = timeline.admit("t2")
    timeline.do(Expire(), after=LEASE_TTL)
    timeline.do(complete(second), after=1)

    assert [event.seq for event in timeline.log] == list(range(1, len(timeline.log) + 1))
    assert timeline.state.next_seq == len(timeline.log) + 1
    assert timeline.state.head == len(timeline.log) == 11


def test_recent_remembers_only_the_last_settled_turns() -> None:
    timeline = Timeline()
    for number in range(RECENT_TURNS + 1):
        lease = timeline.admit(f"t{number}", after=1)
        timeline.do(complete(lease), after=1)

    assert len(timeline.state.recent) == RECENT_TURNS
    assert timeline.state.recent[0].turn_id == "t1"
    assert timeline.state.last_settled is not None
    assert timeline.state.last_settled.turn_id == f"t{RECENT_TURNS}"
