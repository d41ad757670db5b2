"""Admission modes and the turn queue (docs/design.md §7): rules Q1-Q7, one or more tests each."""

from __future__ import annotations

from dataclasses import replace

from turngate.service.codec import dump_session, load_session
from turngate.service.core import (
    Admit,
    Admitted,
    Cancel,
    Cancelled,
    ClearQueue,
    ErrorReason,
    Expire,
    Mismatch,
    QueueAction,
    QueueCleared,
    Queued,
    QueuePause,
    QueuePaused,
    QueueResumed,
    Resumed,
    ResumeQueue,
    Session,
    StopRequested,
    Swept,
    TurnAdmitted,
    TurnDequeued,
    TurnOutcome,
    TurnPhase,
    TurnQueued,
    TurnSettled,
)

from .helpers import (
    LEASE_TTL,
    SECOND,
    STOP_GRACE,
    TOMBSTONE_TTL,
    WAIT,
    Lease,
    Timeline,
    assert_refused,
    assert_unchanged,
    bodies,
    cancel,
    complete,
    enqueue,
    heartbeat,
    interrupt,
    kinds,
    running,
)


def reject(turn_id: str) -> Admit:
    return Admit(turn_id, f"r-{turn_id}", LEASE_TTL)


def stop(expected: str = "", queue: QueueAction = QueueAction.PAUSE, *, force: bool = False) -> Cancel:
    return replace(cancel(expected, force=force), queue=queue)


def queued_ids(timeline: Timeline) -> list[str]:
    return [q.turn_id for q in timeline.state.queue]


def lease_of(timeline: Timeline) -> Lease:
    return Lease(timeline.active.turn_id, timeline.active.generation)


def with_queue(*turn_ids: str) -> tuple[Timeline, Lease]:
    """t1 runs; turn_ids wait in that order."""
    timeline, lease = running("t1")
    for turn_id in turn_ids:
        reply = timeline.do(enqueue(turn_id), after=SECOND).reply
        assert isinstance(reply, Queued), reply
    return timeline, lease


# --- Q1 FIFO -------------------------------------------------------------------------------


def test_q1_enqueue_on_idle_session_with_empty_queue_admits_at_once() -> None:
    timeline = Timeline()
    decision = timeline.do(enqueue("t1"))
    assert isinstance(decision.reply, Admitted)
    assert decision.reply.replayed is False
    assert kinds(decision) == ["turn_admitted"]
    assert timeline.state.queue == ()


def test_q1_enqueued_turns_wait_in_order_with_position_and_depth() -> None:
    timeline, _ = running("t1")
    first = timeline.do(enqueue("t2"), after=SECOND)
    second = timeline.do(enqueue("t3"), after=SECOND)
    assert isinstance(first.reply, Queued)
    assert isinstance(second.reply, Queued)
    assert (first.reply.position, first.reply.depth) == (1, 1)
    assert (second.reply.position, second.reply.depth) == (2, 2)
    assert second.reply.turn.expires_at == timeline.now + WAIT
    assert bodies(second) == [TurnQueued("t3", "r-t3", 2, timeline.now, timeline.now + WAIT, "00-t3-trace")]
    assert queued_ids(timeline) == ["t2", "t3"]
    assert timeline.active.turn_id == "t1"  # I1: the active turn is untouched


def test_q1_queued_turns_are_admitted_in_fifo_order() -> None:
    timeline, lease = with_queue("t2", "t3", "t4")
    order = []
    for _ in range(3):
        timeline.do(complete(lease), after=SECOND)
        order.append(timeline.active.turn_id)
        lease = lease_of(timeline)
    assert order == ["t2", "t3", "t4"]


def test_q1_interrupt_turn_goes_to_the_head() -> None:
    timeline, _ = with_queue("t2", "t3")
    decision = timeline.do(interrupt("tx"), after=SECOND)
    assert isinstance(decision.reply, Queued)
    assert decision.reply.position == 1
    assert queued_ids(timeline) == ["tx", "t2", "t3"]


# --- Q2 promotion in the same write --------------------------------------------------------


def test_q2_completion_admits_the_head_in_the_same_write() -> None:
    timeline, lease = with_queue("t2")
    queued_at = timeline.state.queue[0].queued_at
    old_generation = lease.generation

    decision = timeline.do(complete(lease), after=5 * SECOND)

    assert kinds(decision) == ["turn_settled", "turn_admitted"]
    admitted = bodies(decision)[1]
    assert isinstance(admitted, TurnAdmitted)
    assert admitted.from_queue is True
    assert admitted.waited == timeline.now - queued_at
    assert admitted.generation > old_generation  # I2: a fresh generation
    assert admitted.lease_expires_at == timeline.now + LEASE_TTL  # the lease starts now
    assert admitted.traceparent == "00-t2-trace"
    assert timeline.active.turn_id == "t2"
    assert timeline.active.phase is TurnPhase.RUNNING
    assert timeline.state.queue == ()


def test_q2_promoted_runner_learns_its_lease_by_sending_the_same_admit_again() -> None:
    timeline, lease = with_queue("t2")
    timeline.do(complete(lease), after=SECOND)
    decision = timeline.do(enqueue("t2"), after=SECOND)
    assert isinstance(decision.reply, Admitted)
    assert decision.reply.replayed is True
    assert decision.reply.generation == timeline.active.generation
    assert decision.events == ()


def test_q2_promotion_when_the_watchdog_settles_the_active_turn_lost() -> None:
    timeline, _lease = running("t1")
    timeline.do(stop("t1", QueueAction.CONTINUE), after=SECOND)
    timeline.do(enqueue("t2"), after=SECOND)
    decision = timeline.do(Expire(), after=LEASE_TTL)
    assert kinds(decision) == ["turn_settled", "turn_admitted"]
    assert decision.reply == Swept(settled=True)
    assert timeline.active.turn_id == "t2"


def test_q2_promoted_turn_whose_runner_never_comes_is_lost_and_the_next_follows() -> None:
    timeline, lease = with_queue("t2", "t3")
    timeline.do(complete(lease), after=SECOND)
    assert timeline.active.turn_id == "t2"
    assert timeline.active.claimed is False

    decision = timeline.do(Expire(), after=LEASE_TTL)

    settled = bodies(decision)[0]
    assert isinstance(settled, TurnSettled)
    assert settled.turn.outcome is TurnOutcome.LOST
    assert "queue_paused" not in kinds(decision)
    assert timeline.active.turn_id == "t3"


def test_q2_session_deadline_includes_the_earliest_queued_expiry() -> None:
    timeline, _ = running("t1")
    timeline.do(enqueue("t2", wait=2 * SECOND), after=SECOND)
    assert timeline.state.deadline() == timeline.now + 2 * SECOND
    assert Session().deadline() is None


# --- Q3 pause, never surprise --------------------------------------------------------------


def test_q3_failed_turn_pauses_the_queue() -> None:
    timeline, lease = with_queue("t2")
    decision = timeline.do(complete(lease, TurnOutcome.FAILED), after=SECOND)
    assert kinds(decision) == ["turn_settled", "queue_paused"]
    assert bodies(decision)[1] == QueuePaused("t1", TurnOutcome.FAILED)
    assert timeline.state.active is None
    assert timeline.state.queue_paused_by == QueuePause("t1", TurnOutcome.FAILED)


def test_q3_lost_turn_pauses_the_queue() -> None:
    timeline, _ = with_queue("t2")
    decision = timeline.do(Expire(), after=LEASE_TTL)
    assert kinds(decision) == ["turn_settled", "queue_paused"]
    assert timeline.state.queue_paused_by == QueuePause("t1", TurnOutcome.LOST)


def test_q3_stop_pauses_the_queue_by_default() -> None:
    timeline, lease = with_queue("t2")
    timeline.do(stop("t1"), after=SECOND)
    decision = timeline.do(complete(lease, TurnOutcome.CANCELLED), after=SECOND)
    assert kinds(decision) == ["turn_settled", "queue_paused"]
    assert queued_ids(timeline) == ["t2"]
    assert timeline.state.active is None


def test_q3_stop_with_continue_promotes_the_head() -> None:
    timeline, lease = with_queue("t2")
    timeline.do(stop("t1", QueueAction.CONTINUE), after=SECOND)
    decision = timeline.do(complete(lease, TurnOutcome.CANCELLED), after=SECOND)
    assert kinds(decision) == ["turn_settled", "turn_admitted"]
    assert timeline.active.turn_id == "t2"


def test_q3_forced_stop_with_clear_cancels_every_queued_turn_in_the_same_write() -> None:
    timeline, _ = with_queue("t2", "t3")
    decision = timeline.do(stop("t1", QueueAction.CLEAR, force=True), after=SECOND)
    assert isinstance(decision.reply, Cancelled)
    assert decision.reply.settled is True
    assert decision.reply.cleared_turn_ids == ("t2", "t3")
    dequeued = [b for b in bodies(decision) if isinstance(b, TurnDequeued)]
    assert [(d.turn_id, d.outcome, d.cleared) for d in dequeued] == [
        ("t2", TurnOutcome.CANCELLED, True),
        ("t3", TurnOutcome.CANCELLED, True),
    ]
    assert timeline.state.queue == ()
    assert timeline.state.active is None
    assert not timeline.state.queue_paused
    assert_refused(timeline.do(enqueue("t2"), after=SECOND), timeline.state, ErrorReason.TURN_CANCELLED)


def test_q3_turn_ended_by_an_interrupt_does_not_pause() -> None:
    timeline, lease = with_queue("t2")
    timeline.do(interrupt("tx", "t1"), after=SECOND)
    decision = timeline.do(complete(lease, TurnOutcome.CANCELLED), after=SECOND)
    assert "queue_paused" not in kinds(decision)
    assert timeline.active.turn_id == "tx"
    assert queued_ids(timeline) == ["t2"]


def test_q3_resume_queue_admits_the_head_when_idle() -> None:
    timeline, lease = with_queue("t2", "t3")
    timeline.do(complete(lease, TurnOutcome.FAILED), after=SECOND)

    decision = timeline.do(ResumeQueue(), after=SECOND)

    assert decision.reply == Resumed("t2", timeline.state.queue)
    assert kinds(decision) == ["queue_resumed", "turn_admitted"]
    assert bodies(decision)[0] == QueueResumed("t1")
    assert timeline.active.turn_id == "t2"
    assert queued_ids(timeline) == ["t3"]
    assert not timeline.state.queue_paused


def test_q3_resume_queue_when_not_paused_changes_nothing() -> None:
    timeline, _ = with_queue("t2")
    before = timeline.state
    decision = timeline.do(ResumeQueue(), after=SECOND)
    assert decision.reply == Resumed("", before.queue)
    assert_unchanged(decision, before)


def test_q3_paused_queue_still_accepts_enqueue() -> None:
    timeline, lease = with_queue("t2")
    timeline.do(complete(lease, TurnOutcome.FAILED), after=SECOND)
    decision = timeline.do(enqueue("t3"), after=SECOND)
    assert isinstance(decision.reply, Queued)
    assert decision.reply.position == 2
    assert timeline.state.active is None
    assert timeline.state.queue_paused


def test_q3_reject_while_turns_are_queued_is_refused_in_use_or_paused() -> None:
    timeline, lease = with_queue("t2")
    refusal = assert_refused(
        timeline.do(reject("t9"), after=SECOND), timeline.state, ErrorReason.SESSION_TURN_IN_USE
    )
    assert refusal.active_turn_id == "t1"
    timeline.do(complete(lease, TurnOutcome.FAILED), after=SECOND)
    refusal = assert_refused(
        timeline.do(reject("t9"), after=SECOND), timeline.state, ErrorReason.SESSION_QUEUE_PAUSED
    )
    assert refusal.active_turn_id == "t2"
    assert refusal.active_phase is TurnPhase.QUEUED
    assert refusal.retry_after is None


def test_q3_completed_turn_does_not_pause() -> None:
    timeline, lease = with_queue("t2")
    decision = timeline.do(complete(lease), after=SECOND)
    assert "queue_paused" not in kinds(decision)


def test_q3_an_emptied_queue_is_no_longer_paused() -> None:
    timeline, lease = with_queue("t2")
    timeline.do(complete(lease, TurnOutcome.FAILED), after=SECOND)
    timeline.do(stop("t2"), after=SECOND)
    assert timeline.state.queue == ()
    assert timeline.state.queue_paused_by is None
    assert isinstance(timeline.do(reject("t3"), after=SECOND).reply, Admitted)


def test_q3_a_stop_that_pauses_the_queue_is_recorded_as_its_cause_with_its_reason() -> None:
    timeline, lease = with_queue("t2")
    timeline.do(replace(stop("t1"), reason="wrong file"), after=SECOND)
    decision = timeline.do(complete(lease, TurnOutcome.CANCELLED), after=SECOND)

    assert bodies(decision)[-1] == QueuePaused("t1", TurnOutcome.CANCELLED, True, "wrong file")
    assert timeline.state.queue_paused_by == QueuePause("t1", TurnOutcome.CANCELLED, True, "wrong file")


def test_q3_a_turn_that_fails_pauses_the_queue_by_its_own_end_with_no_stop() -> None:
    timeline, lease = with_queue("t2")
    timeline.do(complete(lease, TurnOutcome.FAILED, "boom"), after=SECOND)

    assert timeline.state.queue_paused_by == QueuePause("t1", TurnOutcome.FAILED, False, "")


def test_q3_clear_queue_cancels_every_queued_turn_in_one_write_and_leaves_the_active_turn_alone() -> None:
    timeline, _ = with_queue("t2", "t3")
    active = timeline.active

    decision = timeline.do(ClearQueue("start over", "", TOMBSTONE_TTL), after=SECOND)

    assert decision.reply == QueueCleared(("t2", "t3"), "t1")
    dequeued = [b for b in bodies(decision) if isinstance(b, TurnDequeued)]
    assert [(d.turn_id, d.outcome, d.cleared, d.reason) for d in dequeued] == [
        ("t2", TurnOutcome.CANCELLED, True, "start over"),
        ("t3", TurnOutcome.CANCELLED, True, "start over"),
    ]
    assert kinds(decision) == ["turn_dequeued", "turn_dequeued"]
    assert timeline.state.queue == ()
    assert timeline.active == active, "the active turn runs on, untouched"
    assert_refused(timeline.do(enqueue("t2"), after=SECOND), timeline.state, ErrorReason.TURN_CANCELLED)


def test_q3_clear_queue_of_a_paused_queue_on_an_idle_session_leaves_it_idle_and_unpaused() -> None:
    timeline, lease = with_queue("t2")
    timeline.do(complete(lease, TurnOutcome.FAILED), after=SECOND)

    decision = timeline.do(ClearQueue(), after=SECOND)

    assert decision.reply == QueueCleared(("t2",), "")
    assert (timeline.state.active, timeline.state.queue, timeline.state.queue_paused_by) == (None, (), None)


def test_q3_clear_queue_of_an_empty_queue_changes_nothing() -> None:
    timeline, _ = running("t1")
    before = timeline.state

    decision = timeline.do(ClearQueue(), after=SECOND)

    assert decision.reply == QueueCleared((), "t1")
    assert_unchanged(decision, before)


def test_q5_clear_queue_retried_with_its_request_id_answers_what_it_cleared() -> None:
    timeline, _ = with_queue("t2")
    first = timeline.do(ClearQueue("", "q1", TOMBSTONE_TTL), after=SECOND).reply
    timeline.do(enqueue("t3"), after=SECOND)
    before = timeline.state

    retry = timeline.do(ClearQueue("", "q1", TOMBSTONE_TTL), after=SECOND)

    assert retry.reply == first == QueueCleared(("t2",), "t1")
    assert_unchanged(retry, before)
    assert [q.turn_id for q in timeline.state.queue] == ["t3"], "what waits since is not cleared"


# --- Q4 bounded ----------------------------------------------------------------------------


def test_q4_queue_beyond_max_depth_is_refused_queue_full() -> None:
    timeline, _ = running("t1")
    timeline.do(enqueue("t2", depth=2), after=SECOND)
    timeline.do(enqueue("t3", depth=2), after=SECOND)
    refusal = assert_refused(
        timeline.do(enqueue("t4", depth=2), after=SECOND), timeline.state, ErrorReason.SESSION_QUEUE_FULL
    )
    assert refusal.active_turn_id == "t1"
    assert_refused(
        timeline.do(interrupt("t5", depth=2), after=SECOND), timeline.state, ErrorReason.SESSION_QUEUE_FULL
    )


def test_q4_queued_turn_expires_at_its_expires_at() -> None:
    timeline, _ = running("t1")
    timeline.do(enqueue("t2", wait=5 * SECOND), after=SECOND)
    timeline.do(heartbeat(lease_of(timeline)), after=4 * SECOND)
    assert queued_ids(timeline) == ["t2"]

    before = timeline.state.generation
    decision = timeline.do(Expire(), after=SECOND)

    assert decision.reply == Swept(settled=False, expired_turn_ids=("t2",))
    # It takes a generation of its own as it leaves: its place in history, never a lease.
    generation = timeline.state.generation
    assert generation > before
    assert bodies(decision) == [
        TurnDequeued("t2", "r-t2", generation, TurnOutcome.EXPIRED, timeline.now - 5 * SECOND)
    ]
    assert timeline.state.queue == ()
    assert timeline.state.settled("t2") is not None
    assert timeline.state.last_settled is None  # an expired turn never ran
    refusal = assert_refused(
        timeline.do(enqueue("t2"), after=SECOND), timeline.state, ErrorReason.TURN_ALREADY_SETTLED
    )
    assert refusal.settled_outcome is TurnOutcome.EXPIRED


# --- Q5 idempotent -------------------------------------------------------------------------


def test_q5_same_enqueue_answers_position_then_lease_then_outcome() -> None:
    timeline, lease = with_queue("t2", "t3")
    before = timeline.state
    again = timeline.do(enqueue("t3"), after=SECOND)
    assert isinstance(again.reply, Queued)
    assert (again.reply.position, again.reply.depth, again.reply.replayed) == (2, 2, True)
    assert_unchanged(again, before)

    timeline.do(complete(lease), after=SECOND)
    timeline.do(complete(lease_of(timeline)), after=SECOND)
    admitted = timeline.do(enqueue("t3"), after=SECOND)
    assert isinstance(admitted.reply, Admitted)
    assert admitted.reply.replayed is True

    timeline.do(complete(lease_of(timeline)), after=SECOND)
    refusal = assert_refused(
        timeline.do(enqueue("t3"), after=SECOND), timeline.state, ErrorReason.TURN_ALREADY_SETTLED
    )
    assert refusal.settled_outcome is TurnOutcome.COMPLETED


def test_q5_same_turn_from_another_runner_is_refused() -> None:
    timeline, _ = with_queue("t2")
    assert_refused(
        timeline.do(enqueue("t2", "other"), after=SECOND),
        timeline.state,
        ErrorReason.TURN_OWNED_BY_OTHER_RUNNER,
    )


# --- Q6 Stop stays guarded -----------------------------------------------------------------


def test_q6_stop_naming_a_queued_turn_removes_only_it() -> None:
    timeline, _ = with_queue("t2", "t3")
    decision = timeline.do(stop("t2"), after=SECOND)
    assert decision.reply == Cancelled(("t2",), queued=True, active_turn_id="t1")
    generation = timeline.state.generation
    assert bodies(decision) == [
        TurnDequeued(
            "t2", "r-t2", generation, TurnOutcome.CANCELLED, timeline.now - 2 * SECOND, "user pressed stop"
        )
    ]
    assert queued_ids(timeline) == ["t3"]
    assert timeline.active.turn_id == "t1"
    assert timeline.active.phase is TurnPhase.RUNNING
    assert timeline.state.tombstones["t2"] == timeline.now + TOMBSTONE_TTL


def test_q6_stop_naming_the_active_turn_leaves_the_queue() -> None:
    timeline, _ = with_queue("t2", "t3")
    decision = timeline.do(stop("t1"), after=SECOND)
    assert isinstance(decision.reply, Cancelled)
    assert decision.reply.cleared_turn_ids == ()
    assert queued_ids(timeline) == ["t2", "t3"]


def test_q6_stop_naming_the_active_turn_with_clear_empties_the_queue() -> None:
    timeline, _ = with_queue("t2", "t3")
    decision = timeline.do(stop("t1", QueueAction.CLEAR), after=SECOND)
    assert isinstance(decision.reply, Cancelled)
    assert decision.reply.stopping_turn_id == "t1"
    assert decision.reply.cleared_turn_ids == ("t2", "t3")
    assert timeline.state.queue == ()


def test_q6_stop_naming_an_unseen_turn_still_tombstones_it() -> None:
    timeline, _ = with_queue("t2")
    decision = timeline.do(stop("t9"), after=SECOND)
    assert decision.reply == Cancelled(("t9",), before_start=True, active_turn_id="t1")
    assert "t9" in timeline.state.tombstones
    assert_refused(timeline.do(enqueue("t9"), after=SECOND), timeline.state, ErrorReason.TURN_CANCELLED)
    assert queued_ids(timeline) == ["t2"]


def test_q6_stop_naming_a_settled_turn_while_another_runs_is_still_mismatch() -> None:
    timeline, lease = with_queue("t2")
    timeline.do(complete(lease), after=SECOND)
    before = timeline.state
    decision = timeline.do(stop("t1", QueueAction.CLEAR), after=SECOND)
    assert decision.reply == Mismatch("t1", "t2", TurnPhase.RUNNING, TurnOutcome.COMPLETED)
    assert_unchanged(decision, before)


# --- Q7 guarded interrupt ------------------------------------------------------------------


def test_q7_interrupt_with_wrong_expected_active_turn_is_refused() -> None:
    timeline, _ = with_queue("t2")
    refusal = assert_refused(
        timeline.do(interrupt("tx", "t0"), after=SECOND), timeline.state, ErrorReason.ACTIVE_TURN_MISMATCH
    )
    assert refusal.active_turn_id == "t1"


def test_q7_interrupt_with_expected_turn_on_idle_session_is_refused() -> None:
    timeline = Timeline()
    assert_refused(timeline.do(interrupt("tx", "t1")), timeline.state, ErrorReason.ACTIVE_TURN_MISMATCH)


def test_q7_interrupt_stops_the_active_turn_and_waits_at_the_head() -> None:
    timeline, _ = running("t1", pending=["i1"])
    decision = timeline.do(interrupt("tx", "t1"), after=SECOND)
    assert isinstance(decision.reply, Queued)
    assert decision.reply.position == 1
    assert kinds(decision) == ["stop_requested", "interaction", "turn_queued"]
    stop_body = bodies(decision)[0]
    assert isinstance(stop_body, StopRequested)
    assert stop_body.reason == "interrupted by turn tx"
    assert stop_body.deadline == timeline.now + STOP_GRACE
    assert timeline.active.phase is TurnPhase.STOPPING


def test_q7_interrupt_on_idle_session_with_empty_queue_admits() -> None:
    timeline = Timeline()
    decision = timeline.do(interrupt("tx"))
    assert isinstance(decision.reply, Admitted)
    assert timeline.active.turn_id == "tx"


def test_q7_interrupted_turn_that_outlives_its_grace_is_cancelled_and_the_interrupter_runs() -> None:
    timeline, _ = running("t1")
    timeline.do(interrupt("tx"), after=SECOND)
    timeline.do(heartbeat(lease_of(timeline)), after=10 * SECOND)
    timeline.do(heartbeat(lease_of(timeline)), after=10 * SECOND)
    decision = timeline.do(Expire(), after=STOP_GRACE - 20 * SECOND)
    assert kinds(decision) == ["turn_settled", "turn_admitted"]
    settled = bodies(decision)[0]
    assert isinstance(settled, TurnSettled)
    assert settled.turn.outcome is TurnOutcome.CANCELLED
    assert timeline.active.turn_id == "tx"


# --- the codec -----------------------------------------------------------------------------


def test_queue_round_trips_through_the_codec_and_old_documents_load_with_an_empty_queue() -> None:
    timeline, lease = with_queue("t2", "t3")
    timeline.do(complete(lease, TurnOutcome.FAILED), after=SECOND)
    assert load_session(dump_session(timeline.state)) == timeline.state
    old = load_session(b'{"next_seq": 4, "generation": 7}')
    assert old.queue == ()
    assert old.queue_paused_by is None
    assert not old.queue_paused


def test_q3_resume_while_a_turn_runs_unpauses_and_the_head_follows_it() -> None:
    timeline, lease = with_queue("t2")
    timeline.do(complete(lease, TurnOutcome.FAILED), after=SECOND)
    reply = timeline.do(interrupt("tx"), after=SECOND).reply
    assert isinstance(reply, Admitted)  # idle: the interrupting turn runs now, ahead of the paused queue
    tx = Lease("tx", reply.generation)
    assert timeline.state.queue_paused

    decision = timeline.do(ResumeQueue(), after=SECOND)

    assert decision.reply == Resumed("", timeline.state.queue)
    assert kinds(decision) == ["queue_resumed"]
    timeline.do(complete(tx), after=SECOND)
    assert timeline.active.turn_id == "t2"


def test_q4_queue_full_on_an_idle_session_names_the_head() -> None:
    timeline, lease = with_queue("t2")
    timeline.do(complete(lease, TurnOutcome.FAILED), after=SECOND)
    refusal = assert_refused(
        timeline.do(enqueue("t3", depth=1), after=SECOND), timeline.state, ErrorReason.SESSION_QUEUE_FULL
    )
    assert refusal.active_turn_id == "t2"
    assert refusal.active_phase is TurnPhase.QUEUED


def test_q7_interrupt_of_a_stopping_turn_sends_no_second_stop_and_its_end_does_not_pause() -> None:
    timeline, lease = with_queue("t2")
    timeline.do(stop("t1"), after=SECOND)
    decision = timeline.do(interrupt("tx", "t1"), after=SECOND)
    assert kinds(decision) == ["turn_queued"]
    settled = timeline.do(complete(lease, TurnOutcome.CANCELLED), after=SECOND)
    assert kinds(settled) == ["turn_settled", "turn_admitted"]
    assert timeline.active.turn_id == "tx"
    assert queued_ids(timeline) == ["t2"]
