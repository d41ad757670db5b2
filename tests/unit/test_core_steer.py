"""Steering a running turn, and editing the queue (docs/design.md §9): rules S1-S7 and Q8, one or
more tests each, in the pure core."""

from __future__ import annotations

from dataclasses import replace

from turngate.service.codec import dump_session, load_session
from turngate.service.core import (
    AcknowledgeSteer,
    Admitted,
    ClearQueue,
    ErrorReason,
    Expire,
    MoveQueuedTurn,
    Queued,
    QueueMoved,
    QueueReordered,
    Refusal,
    SteerAcknowledged,
    Steered,
    SteerEnded,
    SteerFallback,
    SteerInput,
    SteerMismatch,
    SteerQueued,
    SteerStatus,
    SteerTurn,
    TurnAdmitted,
    TurnOutcome,
    TurnPhase,
    TurnQueued,
    TurnSettled,
    TurnSteered,
    clock_window,
    limits,
)

from .helpers import (
    LEASE_TTL,
    SECOND,
    Lease,
    Timeline,
    admit,
    assert_refused,
    assert_unchanged,
    bodies,
    complete,
    enqueue,
    heartbeat,
    kinds,
    running,
    stale,
    stopping,
)

STEER_WAIT = limits.DEFAULT_STEER_WAIT


def steer(
    expected: str = "t1",
    steer_id: str = "s1",
    content: str = "use the staging database",
    *,
    fallback: SteerFallback = SteerFallback.REJECT,
    requeue: bool = False,
    request_id: str = "",
    max_steers: int = limits.DEFAULT_MAX_STEERS_PER_TURN,
) -> SteerTurn:
    return SteerTurn(
        expected,
        steer_id,
        content,
        fallback=fallback,
        requeue=requeue,
        request_id=request_id,
        max_steers=max_steers,
        lease_ttl=LEASE_TTL,
    )


def ack(lease: Lease, steer_id: str = "s1", status: SteerStatus = SteerStatus.CONSUMED) -> AcknowledgeSteer:
    return AcknowledgeSteer(lease.turn_id, lease.generation, steer_id, status)


def steered(timeline: Timeline, *steer_ids: str) -> None:
    for steer_id in steer_ids:
        reply = timeline.do(steer(steer_id=steer_id), after=1).reply
        assert isinstance(reply, Steered), reply


# --- S1 guarded ------------------------------------------------------------------------------


def test_s1_a_steer_reaches_the_running_turn_it_names_as_one_event() -> None:
    timeline, lease = running("t1")
    decision = timeline.do(steer(), after=SECOND)
    assert isinstance(decision.reply, Steered)
    assert decision.reply == Steered("t1", "s1", decision.events[0].seq)
    assert bodies(decision) == [
        TurnSteered(
            "t1", lease.generation, "s1", "use the staging database", "text/plain", timeline.now + STEER_WAIT
        )
    ]
    assert timeline.active.pending_steers().keys() == {"s1"}
    assert timeline.active.phase is TurnPhase.RUNNING  # a steer never stops nor settles a turn


def test_s1_a_steer_naming_another_turn_is_a_mismatch_and_changes_nothing() -> None:
    timeline, _ = running("t2")
    before = timeline.state
    decision = timeline.do(steer("t1"), after=1)
    assert_unchanged(decision, before)
    assert decision.reply == SteerMismatch(
        "t1", ErrorReason.ACTIVE_TURN_MISMATCH, "t2", TurnPhase.RUNNING, None, None
    )


def test_s1_a_steer_of_a_turn_that_ended_says_how_it_ended() -> None:
    timeline, lease = running("t1")
    timeline.do(complete(lease), after=1)
    before = timeline.state
    decision = timeline.do(steer("t1"), after=1)
    assert_unchanged(decision, before)
    assert decision.reply == SteerMismatch(
        "t1",
        ErrorReason.TURN_NOT_ACTIVE,
        expected_phase=TurnPhase.SETTLED,
        expected_outcome=TurnOutcome.COMPLETED,
    )


def test_s1_a_stopping_turn_takes_no_more_input() -> None:
    timeline, _ = stopping("t1")
    before = timeline.state
    decision = timeline.do(steer("t1"), after=1)
    assert_unchanged(decision, before)
    assert isinstance(decision.reply, SteerMismatch)
    assert decision.reply.reason is ErrorReason.TURN_NOT_ACTIVE
    assert decision.reply.expected_phase is TurnPhase.STOPPING


def test_s1_a_steer_of_a_queued_or_unknown_turn_is_not_active() -> None:
    timeline, _ = running("t1")
    timeline.do(enqueue("t2"), after=1)
    queued = timeline.do(steer("t2"), after=1).reply
    unknown = timeline.do(steer("never"), after=1).reply
    assert isinstance(queued, SteerMismatch)
    assert isinstance(unknown, SteerMismatch)
    assert (queued.reason, queued.expected_phase) == (ErrorReason.ACTIVE_TURN_MISMATCH, TurnPhase.QUEUED)
    assert (unknown.reason, unknown.expected_phase) == (ErrorReason.ACTIVE_TURN_MISMATCH, None)
    idle = Timeline().do(steer("never")).reply
    assert idle == SteerMismatch("never", ErrorReason.TURN_NOT_ACTIVE)


# --- S2 one end per steer --------------------------------------------------------------------


def test_s2_the_runner_consumes_a_steer_once_and_a_repeat_answers_that_end() -> None:
    timeline, lease = running("t1")
    steered(timeline, "s1")
    first = timeline.do(ack(lease), after=1)
    assert first.reply == SteerAcknowledged("s1", SteerStatus.CONSUMED, recorded=True)
    assert bodies(first) == [SteerEnded("t1", lease.generation, "s1", SteerStatus.CONSUMED)]
    assert timeline.active.steers["s1"].input is None, "its content leaves the document"
    before = timeline.state
    again = timeline.do(ack(lease, status=SteerStatus.DECLINED), after=1)
    assert_unchanged(again, before)
    assert again.reply == SteerAcknowledged("s1", SteerStatus.CONSUMED, recorded=False)


def test_s2_a_declined_steer_ends_declined() -> None:
    timeline, lease = running("t1")
    steered(timeline, "s1")
    decision = timeline.do(ack(lease, status=SteerStatus.DECLINED), after=1)
    assert decision.reply == SteerAcknowledged("s1", SteerStatus.DECLINED, recorded=True)


def test_s2_an_acknowledgement_with_a_stale_lease_is_refused_i2() -> None:
    timeline, lease = running("t1")
    steered(timeline, "s1")
    before = timeline.state
    assert_refused(timeline.do(ack(stale(lease)), after=1), before, ErrorReason.TURN_NOT_ACTIVE)


def test_s2_an_acknowledgement_of_no_steer_of_the_turn_is_refused_steer_not_found() -> None:
    timeline, lease = running("t1")
    before = timeline.state
    assert_refused(timeline.do(ack(lease, "nope"), after=1), before, ErrorReason.STEER_NOT_FOUND)


def test_s2_steers_pending_when_the_turn_settles_end_unconsumed_in_the_same_write() -> None:
    timeline, lease = running("t1")
    steered(timeline, "s1", "s2")
    timeline.do(ack(lease, "s1"), after=1)
    decision = timeline.do(complete(lease), after=1)
    assert kinds(decision) == ["steer_ended", "turn_settled"]
    ended, settled = bodies(decision)
    assert ended == SteerEnded("t1", lease.generation, "s2", SteerStatus.UNCONSUMED)
    assert isinstance(settled, TurnSettled)
    assert settled.unconsumed_steer_ids == ("s2",)


def test_s2_a_steer_not_acknowledged_in_time_expires_and_the_session_deadline_says_when() -> None:
    timeline, lease = running("t1")
    timeline.do(heartbeat(lease, lease_ttl=limits.MAX_LEASE_TTL), after=1)  # the lease outlives it
    steered(timeline, "s1")
    expires_at = timeline.active.steers["s1"].expires_at
    assert timeline.state.deadline() == expires_at
    assert clock_window(timeline.state, expires_at - 1).end == expires_at
    decision = timeline.do(Expire(), after=expires_at - timeline.now)
    assert bodies(decision) == [SteerEnded("t1", lease.generation, "s1", SteerStatus.EXPIRED)]
    assert timeline.active.pending_steers() == {}
    late = timeline.do(ack(lease), after=1)
    assert late.reply == SteerAcknowledged("s1", SteerStatus.EXPIRED, recorded=False)


def test_s2_a_turn_whose_lease_passed_first_finds_its_steer_unconsumed_not_expired() -> None:
    timeline, lease = running("t1")
    steered(timeline, "s1")  # expires after the lease: LEASE_TTL < STEER_WAIT
    decision = timeline.do(Expire(), after=STEER_WAIT + SECOND)
    ends = [b for b in bodies(decision) if isinstance(b, SteerEnded)]
    assert ends == [SteerEnded("t1", lease.generation, "s1", SteerStatus.UNCONSUMED)]


# --- S3 idempotent ---------------------------------------------------------------------------


def test_s3_the_same_steer_again_answers_its_seq_and_writes_nothing() -> None:
    timeline, _ = running("t1")
    first = timeline.do(steer(), after=1).reply
    assert isinstance(first, Steered)
    before = timeline.state
    again = timeline.do(steer(content="something else"), after=1)
    assert_unchanged(again, before)
    assert again.reply == replace(first, replayed=True)


def test_s3_a_retry_with_the_request_id_answers_the_first_call_after_the_turn_ended() -> None:
    timeline, lease = running("t1")
    first = timeline.do(steer(request_id="req-1"), after=1).reply
    assert isinstance(first, Steered)
    timeline.do(complete(lease), after=1)
    again = timeline.do(steer(request_id="req-1"), after=1).reply
    assert again == replace(first, replayed=True)


def test_s3_a_mismatch_is_not_remembered() -> None:
    timeline = Timeline()
    assert isinstance(timeline.do(steer("t1")).reply, SteerMismatch)
    timeline.admit("t1")
    assert isinstance(timeline.do(steer("t1"), after=1).reply, Steered)


# --- S4 bounded ------------------------------------------------------------------------------


def test_s4_at_most_max_steers_per_turn() -> None:
    timeline, _ = running("t1")
    for n in range(3):
        assert isinstance(timeline.do(steer(steer_id=f"s{n}", max_steers=3), after=1).reply, Steered)
    before = timeline.state
    refusal = assert_refused(
        timeline.do(steer(steer_id="s9", max_steers=3), after=1), before, ErrorReason.LIMIT_EXCEEDED
    )
    assert refusal.limit == "steers_per_turn"


def test_s4_content_stays_in_the_document_only_while_pending() -> None:
    timeline, lease = running("t1")
    steered(timeline, "s1")
    assert load_session(dump_session(timeline.state)) == timeline.state
    assert b"use the staging database" in dump_session(timeline.state)
    timeline.do(ack(lease), after=1)
    assert b"use the staging database" not in dump_session(timeline.state)


# --- S6 requeued if unconsumed ---------------------------------------------------------------


def test_s6_an_unconsumed_steer_that_asked_is_requeued_and_promoted_with_its_content() -> None:
    timeline, lease = running("t1")
    assert isinstance(timeline.do(steer(requeue=True), after=1).reply, Steered)
    decision = timeline.do(complete(lease), after=1)
    assert kinds(decision) == ["steer_ended", "turn_settled", "turn_queued", "turn_admitted"]
    ended, _, queued, admitted = bodies(decision)
    assert isinstance(ended, SteerEnded)
    assert ended.requeued
    content = SteerInput("s1", "use the staging database", "text/plain")
    assert isinstance(queued, TurnQueued)
    assert (queued.turn_id, queued.position, queued.steer) == (
        "s1",
        1,
        content,
    )
    assert isinstance(admitted, TurnAdmitted)
    assert admitted.from_queue
    assert admitted.steer == content
    assert (timeline.active.turn_id, timeline.active.runner_id) == ("s1", "r1")
    assert timeline.active.claimed is False, "its runner learns it from its watch"
    claim = timeline.do(replace(admit("s1", "r1"), traceparent=""), after=1).reply
    assert isinstance(claim, Admitted)
    assert (claim.replayed, claim.steer) == (True, content), "its runner's AdmitTurn answers the input"


def test_s6_requeued_steers_go_ahead_of_the_queue_and_a_failed_turn_pauses_it() -> None:
    timeline, lease = running("t1")
    timeline.do(enqueue("t2"), after=1)
    for steer_id in ("s1", "s2"):
        timeline.do(steer(steer_id=steer_id, requeue=True), after=1)
    timeline.do(complete(lease, TurnOutcome.FAILED), after=1)
    assert [q.turn_id for q in timeline.state.queue] == ["s1", "s2", "t2"]
    assert timeline.state.queue_paused, "Q3 applies to a requeued steer as to any queued turn"


def test_s6_a_steer_not_asking_is_not_requeued() -> None:
    timeline, lease = running("t1")
    steered(timeline, "s1")
    timeline.do(complete(lease), after=1)
    assert timeline.state.active is None
    assert timeline.state.queue == ()


# --- S7 the ENQUEUE fallback -----------------------------------------------------------------


def test_s7_a_steer_of_an_ended_turn_becomes_a_turn_for_its_runner_admitted_on_an_idle_session() -> None:
    timeline, lease = running("t1")
    timeline.do(complete(lease), after=1)
    decision = timeline.do(steer("t1", fallback=SteerFallback.ENQUEUE), after=1)
    assert isinstance(decision.reply, SteerQueued)
    assert decision.reply.admitted
    assert decision.reply.position == 0
    assert kinds(decision) == ["turn_queued", "turn_admitted"]
    assert (timeline.active.turn_id, timeline.active.runner_id) == ("s1", "r1")
    admitted = bodies(decision)[1]
    assert isinstance(admitted, TurnAdmitted)
    assert admitted.steer is not None


def test_s7_a_steer_of_a_stopping_turn_waits_behind_it() -> None:
    timeline, _ = stopping("t1")
    decision = timeline.do(steer("t1", fallback=SteerFallback.ENQUEUE), after=1)
    assert isinstance(decision.reply, SteerQueued)
    assert (decision.reply.position, decision.reply.depth, decision.reply.admitted) == (1, 1, False)
    assert timeline.state.queue[0].steer == SteerInput("s1", "use the staging database", "text/plain")
    retry = timeline.do(steer("t1", fallback=SteerFallback.ENQUEUE), after=1).reply
    assert retry == replace(decision.reply, replayed=True)


def test_s7_a_steer_of_a_turn_never_seen_is_a_mismatch_even_with_enqueue() -> None:
    timeline = Timeline()
    before = timeline.state
    decision = timeline.do(steer("never", fallback=SteerFallback.ENQUEUE))
    assert_unchanged(decision, before)
    assert isinstance(decision.reply, SteerMismatch)


def test_s7_the_fallback_keeps_the_queue_bound_q4() -> None:
    timeline, _ = stopping("t1")
    timeline.do(enqueue("t2", depth=1), after=1)
    before = timeline.state
    decision = timeline.do(replace(steer("t1", fallback=SteerFallback.ENQUEUE), max_queue_depth=1), after=1)
    assert_refused(decision, before, ErrorReason.SESSION_QUEUE_FULL)


def test_s7_a_steer_id_naming_a_known_turn_is_refused_as_an_admission_would_be() -> None:
    timeline, lease = running("t1")
    timeline.do(complete(lease), after=1)
    before = timeline.state
    decision = timeline.do(steer("t1", steer_id="t1", fallback=SteerFallback.ENQUEUE), after=1)
    assert_refused(decision, before, ErrorReason.TURN_ALREADY_SETTLED)


# --- Q8 guarded queue edits ------------------------------------------------------------------


def queue_of(timeline: Timeline) -> list[str]:
    return [q.turn_id for q in timeline.state.queue]


def test_q8_a_queued_turn_moves_to_the_head_or_after_another() -> None:
    timeline, _ = running("t1")
    for turn_id in ("t2", "t3", "t4"):
        assert isinstance(timeline.do(enqueue(turn_id), after=1).reply, Queued)
    version = timeline.state.queue_version
    decision = timeline.do(MoveQueuedTurn("t4", expected_queue_version=version), after=1)
    assert queue_of(timeline) == ["t4", "t2", "t3"]
    assert bodies(decision) == [QueueReordered(("t4", "t2", "t3"), "t4")]
    assert decision.reply == QueueMoved(timeline.state.queue, version + 1)
    assert timeline.state.queue_version == version + 1
    timeline.do(MoveQueuedTurn("t4", after_turn_id="t3"), after=1)
    assert queue_of(timeline) == ["t2", "t3", "t4"]


def test_q8_an_edit_on_a_queue_that_changed_since_it_was_read_is_refused() -> None:
    timeline, _ = running("t1")
    timeline.do(enqueue("t2"), after=1)
    seen = timeline.state.queue_version
    timeline.do(enqueue("t3"), after=1)
    before = timeline.state
    decision = timeline.do(MoveQueuedTurn("t3", expected_queue_version=seen), after=1)
    assert_refused(decision, before, ErrorReason.QUEUE_VERSION_MISMATCH)


def test_q8_every_change_of_the_queue_moves_its_version_and_nothing_else_does() -> None:
    timeline, lease = running("t1")
    versions = [timeline.state.queue_version]
    timeline.do(enqueue("t2"), after=1)
    versions.append(timeline.state.queue_version)
    timeline.do(heartbeat(lease), after=1)
    versions.append(timeline.state.queue_version)
    timeline.do(ClearQueue(), after=1)
    versions.append(timeline.state.queue_version)
    assert versions == [0, 1, 1, 2]


def test_q8_a_turn_not_in_the_queue_is_refused_and_a_move_that_changes_nothing_writes_nothing() -> None:
    timeline, _ = running("t1")
    timeline.do(enqueue("t2"), after=1)
    before = timeline.state
    assert_refused(timeline.do(MoveQueuedTurn("t1"), after=1), before, ErrorReason.TURN_NOT_QUEUED)
    assert_refused(
        timeline.do(MoveQueuedTurn("t2", after_turn_id="zz"), after=1), before, ErrorReason.TURN_NOT_QUEUED
    )
    still = timeline.do(MoveQueuedTurn("t2"), after=1)
    assert_unchanged(still, before)
    assert still.reply == QueueMoved(before.queue, before.queue_version)


def test_q8_a_retry_with_the_request_id_answers_the_first_move() -> None:
    timeline, _ = running("t1")
    for turn_id in ("t2", "t3"):
        timeline.do(enqueue(turn_id), after=1)
    seen = timeline.state.queue_version
    first = timeline.do(MoveQueuedTurn("t3", expected_queue_version=seen, request_id="m1"), after=1).reply
    again = timeline.do(MoveQueuedTurn("t3", expected_queue_version=seen, request_id="m1"), after=1).reply
    assert isinstance(first, QueueMoved)
    assert again == first, "the version it was sent with has passed, and the retry is not refused"
    assert not isinstance(again, Refusal)


def test_i1_a_steer_never_admits_while_a_turn_runs() -> None:
    timeline, _ = running("t1")
    reply = timeline.do(steer("t1", steer_id="s1", fallback=SteerFallback.ENQUEUE), after=1).reply
    assert isinstance(reply, Steered), "a running turn is steered, not queued behind"
    assert timeline.active.turn_id == "t1"
    assert not isinstance(reply, Admitted)
