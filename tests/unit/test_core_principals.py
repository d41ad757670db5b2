"""A turn belongs to the principal that admitted it (TURN_HELD_BY_OTHER_PRINCIPAL), and may be
interrupted by another principal only when that one may stop others' turns; and the bounds the
settings give commands: sessions with an active turn per project, open tool calls and pending
interactions per turn (LIMIT_EXCEEDED)."""

from __future__ import annotations

from dataclasses import replace

from turngate.service.core import (
    Admit,
    Admitted,
    ErrorReason,
    HeartbeatReply,
    QueueAction,
    Queued,
    RunnerCommand,
    TurnOutcome,
    TurnPhase,
)

from .helpers import (
    SECOND,
    Lease,
    Timeline,
    admit,
    assert_refused,
    cancel,
    complete,
    heartbeat,
    interaction,
    interrupt,
    tool_call,
)

R1 = "runner-one"
R2 = "runner-two"


def owned(principal: str = R1) -> tuple[Timeline, Lease]:
    timeline = Timeline()
    reply = timeline.do(replace(admit("t1"), principal=principal)).reply
    assert isinstance(reply, Admitted)
    return timeline, Lease("t1", reply.generation)


def test_turn_held_by_other_principal_the_admitting_principal_is_kept_with_the_turn() -> None:
    timeline, _ = owned(R1)
    assert timeline.active.principal == R1


def test_turn_held_by_other_principal_refuses_every_runner_write_from_another_principal() -> None:
    timeline, lease = owned(R1)
    writes: list[RunnerCommand] = [
        replace(heartbeat(lease), principal=R2),
        replace(tool_call(lease, "c1"), principal=R2),
        replace(interaction(lease, "i1"), principal=R2),
        replace(complete(lease, TurnOutcome.COMPLETED), principal=R2),
    ]
    for write in writes:
        before = timeline.state
        assert_refused(timeline.do(write, after=SECOND), before, ErrorReason.TURN_HELD_BY_OTHER_PRINCIPAL)


def test_turn_held_by_other_principal_the_owner_still_writes_after_a_refused_foreigner() -> None:
    timeline, lease = owned(R1)
    timeline.do(replace(heartbeat(lease), principal=R2), after=SECOND)
    reply = timeline.do(replace(heartbeat(lease), principal=R1), after=SECOND).reply
    assert isinstance(reply, HeartbeatReply)
    assert timeline.active.lease_expires_at == timeline.now + timeline.active.lease_ttl


def test_turn_held_by_other_principal_admission_replay_by_another_principal_is_refused() -> None:
    timeline, _ = owned(R1)
    before = timeline.state
    refusal = assert_refused(
        timeline.do(replace(admit("t1"), principal=R2), after=SECOND),
        before,
        ErrorReason.TURN_HELD_BY_OTHER_PRINCIPAL,
    )
    assert "another principal" in refusal.message


def test_turn_held_by_other_principal_a_stop_is_not_a_runner_write() -> None:
    timeline, _ = owned(R1)
    timeline.do(cancel("t1"), after=SECOND)
    assert timeline.active.stop is not None


def interrupt_by(principal: str, *, may_stop_others: bool = False) -> Admit:
    return replace(interrupt("t2"), principal=principal, may_stop_others=may_stop_others)


def test_interrupt_of_another_principals_turn_is_refused_and_changes_nothing() -> None:
    timeline, _ = owned(R1)
    before = timeline.state
    refusal = assert_refused(
        timeline.do(interrupt_by(R2), after=SECOND), before, ErrorReason.TURN_HELD_BY_OTHER_PRINCIPAL
    )
    assert "another principal" in refusal.message


def test_interrupt_of_another_principals_stopping_turn_leaves_its_stop_pausing_the_queue() -> None:
    timeline, _ = owned(R1)
    timeline.do(cancel("t1"), after=SECOND)
    assert timeline.active.stop is not None
    assert timeline.active.stop.queue is QueueAction.PAUSE
    before = timeline.state
    assert_refused(
        timeline.do(interrupt_by(R2), after=SECOND), before, ErrorReason.TURN_HELD_BY_OTHER_PRINCIPAL
    )


def test_interrupt_of_another_principals_turn_by_one_who_may_stop_others_stops_it() -> None:
    timeline, _ = owned(R1)
    reply = timeline.do(interrupt_by(R2, may_stop_others=True), after=SECOND).reply
    assert isinstance(reply, Queued)
    assert timeline.active.phase is TurnPhase.STOPPING
    assert [queued.principal for queued in timeline.state.queue] == [R2]


def test_interrupt_of_its_own_principals_turn_needs_no_more() -> None:
    timeline, _ = owned(R1)
    reply = timeline.do(interrupt_by(R1), after=SECOND).reply
    assert isinstance(reply, Queued)
    assert timeline.active.phase is TurnPhase.STOPPING


def test_interrupt_on_an_idle_session_stops_nothing_and_needs_no_more() -> None:
    timeline = Timeline()
    reply = timeline.do(interrupt_by(R2)).reply
    assert isinstance(reply, Admitted)


def test_limit_exceeded_active_sessions_per_project_refuses_a_new_turn_at_the_bound() -> None:
    timeline = Timeline()
    command = replace(admit("t1"), active_in_project=3, max_active_in_project=3)
    refusal = assert_refused(timeline.do(command), timeline.state, ErrorReason.LIMIT_EXCEEDED)
    assert refusal.limit == "active_sessions_per_project"
    assert isinstance(timeline.do(replace(command, active_in_project=2)).reply, Admitted)


def test_limit_exceeded_active_sessions_per_project_never_refuses_a_replayed_admission() -> None:
    timeline, _ = owned(R1)
    replay = replace(admit("t1"), principal=R1, active_in_project=9, max_active_in_project=1)
    reply = timeline.do(replay, after=SECOND).reply
    assert isinstance(reply, Admitted)
    assert reply.replayed


def test_limit_exceeded_bounds_carried_by_commands_are_the_ones_enforced() -> None:
    timeline, lease = owned("")
    timeline.do(replace(tool_call(lease, "c1"), max_open=1), after=1)
    before = timeline.state
    refusal = assert_refused(
        timeline.do(replace(tool_call(lease, "c2"), max_open=1), after=1), before, ErrorReason.LIMIT_EXCEEDED
    )
    assert refusal.limit == "open_tool_calls"
    timeline.do(replace(interaction(lease, "i1"), max_pending=1), after=1)
    before = timeline.state
    refusal = assert_refused(
        timeline.do(replace(interaction(lease, "i2"), max_pending=1), after=1),
        before,
        ErrorReason.LIMIT_EXCEEDED,
    )
    assert refusal.limit == "pending_interactions"


def test_turn_held_by_other_principal_a_settled_turns_outcome_is_told_only_to_its_principal() -> None:
    timeline, lease = owned(R1)
    timeline.do(replace(complete(lease, TurnOutcome.COMPLETED), principal=R1), after=SECOND)
    for write in (heartbeat(lease), complete(lease, TurnOutcome.FAILED)):
        before = timeline.state
        assert_refused(
            timeline.do(replace(write, principal=R2), after=SECOND),
            before,
            ErrorReason.TURN_HELD_BY_OTHER_PRINCIPAL,
        )
    reply = timeline.do(replace(heartbeat(lease), principal=R1), after=SECOND).reply
    assert isinstance(reply, HeartbeatReply)
    assert reply.settled_outcome is TurnOutcome.COMPLETED
