"""AdmitTurn: single turn (I1), fencing tokens (I2), idempotent admission (I3) and its refusals."""

from __future__ import annotations

import pytest

from turngate.service.core import (
    Admitted,
    ErrorReason,
    Session,
    SessionPhase,
    TurnAdmitted,
    TurnOutcome,
    TurnPhase,
    decide,
)

from .helpers import (
    LEASE_TTL,
    SECOND,
    STOP_GRACE,
    T0,
    TOMBSTONE_TTL,
    Timeline,
    active_of,
    admit,
    assert_refused,
    bodies,
    cancel,
    complete,
    heartbeat,
    running,
    stopping,
)


def test_admit_on_fresh_session_starts_a_running_turn_with_one_event() -> None:
    decision = decide(Session(), admit("t1", "r1", LEASE_TTL), T0)

    assert decision.changed
    assert decision.reply == Admitted("t1", T0, T0 + LEASE_TTL, LEASE_TTL // 3, replayed=False)
    turn = decision.state.active
    assert turn is not None
    assert (turn.turn_id, turn.runner_id, turn.phase) == ("t1", "r1", TurnPhase.RUNNING)
    assert (turn.admitted_at, turn.lease_ttl, turn.lease_expires_at) == (T0, LEASE_TTL, T0 + LEASE_TTL)
    assert turn.traceparent == "00-t1-trace"
    assert decision.state.phase is SessionPhase.RUNNING
    assert decision.state.generation == turn.generation == T0
    assert bodies(decision) == [TurnAdmitted("t1", "r1", T0, T0, T0 + LEASE_TTL, "00-t1-trace")]
    assert [event.seq for event in decision.events] == [1]
    assert decision.events[0].time == T0


def test_i1_admit_refused_while_another_turn_runs_and_active_unchanged() -> None:
    timeline, _ = running("t1")
    before = timeline.state

    refusal = assert_refused(
        timeline.do(admit("t2", "r2"), after=SECOND), before, ErrorReason.SESSION_TURN_IN_USE
    )

    assert refusal.active_turn_id == "t1"
    assert refusal.active_phase is TurnPhase.RUNNING
    assert refusal.active_lease_expires_at == active_of(before).lease_expires_at


def test_i1_admit_after_settlement_starts_the_next_turn() -> None:
    timeline, lease = running("t1")
    timeline.do(complete(lease), after=SECOND)

    second = timeline.admit("t2", "r2")

    assert second.generation > lease.generation
    assert timeline.active.turn_id == "t2"


def test_i2_generation_strictly_increases_even_if_clock_goes_back() -> None:
    timeline, first = running("t1")
    timeline.do(complete(first), after=SECOND)
    timeline.now -= 10 * SECOND  # the store's clock stepped back (failover, NTP correction)

    second = timeline.admit("t2")
    timeline.do(complete(second))
    third = timeline.admit("t3")

    assert first.generation < second.generation < third.generation
    assert second.generation == first.generation + 1
    assert timeline.state.generation == third.generation


def test_i2_generation_follows_the_clock_when_it_is_ahead() -> None:
    timeline = Timeline(state=Session(generation=5))

    lease = timeline.admit("t1")

    assert lease.generation == T0


def test_i3_same_turn_same_runner_replays_lease() -> None:
    timeline, lease = running("t1")
    before = timeline.state

    decision = timeline.do(admit("t1", "r1"), after=SECOND)

    assert decision.reply == Admitted(
        "t1", lease.generation, active_of(before).lease_expires_at, LEASE_TTL // 3, replayed=True
    )
    assert decision.changed is False
    assert decision.state is before


def test_i3_replay_while_stopping_returns_the_same_lease_not_a_refusal() -> None:
    timeline, lease = stopping("t1")

    decision = timeline.do(admit("t1", "r1"), after=SECOND)

    assert isinstance(decision.reply, Admitted)
    assert (decision.reply.generation, decision.reply.replayed) == (lease.generation, True)
    assert decision.changed is False


def test_refusal_session_turn_in_use_carries_retry_after_until_lease_expiry() -> None:
    timeline, _ = running("t1")
    before = timeline.state

    refusal = assert_refused(
        timeline.do(admit("t2", "r2"), after=5 * SECOND), before, ErrorReason.SESSION_TURN_IN_USE
    )

    assert refusal.retry_after == LEASE_TTL - 5 * SECOND
    assert refusal.settled_outcome is None


def test_refusal_session_stopping_carries_retry_after_until_earliest_deadline() -> None:
    timeline, lease = stopping("t1")
    timeline.do(heartbeat(lease, lease_ttl=3600 * SECOND), after=SECOND)  # lease now outlives the grace
    before = timeline.state
    stop_deadline = T0 + 1 + STOP_GRACE

    refusal = assert_refused(
        timeline.do(admit("t2", "r2"), after=SECOND), before, ErrorReason.SESSION_STOPPING
    )

    assert refusal.active_turn_id == "t1"
    assert refusal.active_phase is TurnPhase.STOPPING
    assert refusal.active_lease_expires_at == timeline.now - SECOND + 3600 * SECOND
    assert refusal.retry_after == stop_deadline - timeline.now


def test_refusal_turn_owned_by_other_runner_names_the_turn_without_retry() -> None:
    timeline, _ = running("t1")
    before = timeline.state

    refusal = assert_refused(
        timeline.do(admit("t1", "r2"), after=SECOND), before, ErrorReason.TURN_OWNED_BY_OTHER_RUNNER
    )

    assert refusal.active_turn_id == "t1"
    assert refusal.retry_after is None


@pytest.mark.parametrize(
    ("outcome", "runner_id"),
    [(TurnOutcome.COMPLETED, "r1"), (TurnOutcome.FAILED, "r1"), (TurnOutcome.CANCELLED, "other")],
)
def test_refusal_turn_already_settled_reports_the_outcome(outcome: TurnOutcome, runner_id: str) -> None:
    timeline, lease = running("t1")
    timeline.do(complete(lease, outcome), after=SECOND)
    before = timeline.state

    refusal = assert_refused(
        timeline.do(admit("t1", runner_id), after=SECOND), before, ErrorReason.TURN_ALREADY_SETTLED
    )

    assert refusal.settled_outcome is outcome
    assert refusal.retry_after is None


def test_refusal_turn_already_settled_wins_over_session_turn_in_use() -> None:
    timeline, lease = running("t1")
    timeline.do(complete(lease), after=SECOND)
    timeline.admit("t2")
    before = timeline.state

    assert_refused(timeline.do(admit("t1"), after=SECOND), before, ErrorReason.TURN_ALREADY_SETTLED)


def test_refusal_turn_cancelled_for_a_turn_stopped_before_start_i4() -> None:
    timeline = Timeline()
    timeline.do(cancel("t1"))
    before = timeline.state

    refusal = assert_refused(timeline.do(admit("t1"), after=SECOND), before, ErrorReason.TURN_CANCELLED)

    assert refusal.retry_after is None
    assert before.active is None


def test_i4_tombstone_expires_after_its_ttl_and_the_turn_may_then_be_admitted() -> None:
    timeline = Timeline()
    timeline.do(cancel("t1"))
    before = timeline.state
    assert_refused(timeline.do(admit("t1"), after=TOMBSTONE_TTL - 1), before, ErrorReason.TURN_CANCELLED)

    timeline.admit("t1", after=1)

    assert timeline.active.turn_id == "t1"
    assert timeline.state.tombstones == {}
