"""Admission modes and the turn queue end to end (issue 13, rules Q1-Q7; docs/decisions.md,
"Admission modes and the queue"): ENQUEUE and INTERRUPT admissions, promotion in the settling
write, pauses and ResumeQueue, the bound and the expiry, replays, guarded Stops and interrupts,
each with the refusal it names (SESSION_QUEUE_FULL, SESSION_QUEUE_PAUSED, ACTIVE_TURN_MISMATCH)
and what watchers see. A caller that sets no mode sees the refusals it always saw.
"""

from __future__ import annotations

import pytest

from tests.support.calls import (
    Gate,
    admission_refused,
    admissions,
    admit,
    advance_store_clock,
    assert_reason,
    complete,
    enqueue,
    events_after,
    gated,
    get_turn,
    head_of,
    heartbeat,
    interrupt,
    kinds,
    picked_up,
    record_interaction,
    refused,
    resume_queue,
    runner_of,
    seconds,
    snapshot,
    state_of,
    stop,
    with_queue,
)
from tests.support.servers import Client
from tests.support.watching import admits, collect, collect_until, dequeues, watch
from turngate.service.core import Expire
from turngate.service.server import TurngateServer
from turngate.v1 import turngate_pb2 as pb

# The shortest lease and queue wait the contract allows: what the watchdog lets run out.
SHORT_S = 1.0
# A queued turn's wait that a test moves the store clock past.
CLOCK_WAIT_S = 60
# A lease a test asks for, to see that a promoted turn's lease is the one its admission asked for.
ASKED_LEASE_S = 45.0


def queue_of(current: pb.SessionSnapshot) -> list[tuple[str, int]]:
    return [(queued.turn_id, queued.position) for queued in current.queue]


# --- Q1 FIFO -------------------------------------------------------------------------------


async def test_q1_enqueue_on_an_idle_session_with_an_empty_queue_is_admitted_at_once_as_reject_would(
    client: Client, session: pb.SessionRef
) -> None:
    watcher = watch(client, session)
    try:
        await collect(watcher, 1)  # the snapshot
        admitted = await enqueue(client, session, "t1")
        [event] = await collect(watcher, 1)
    finally:
        watcher.cancel()

    assert admitted.HasField("lease")
    assert not admitted.HasField("queued")
    assert (admitted.lease.turn_id, admitted.replayed, admitted.queue_depth) == ("t1", False, 0)
    assert event.turn_admitted.turn.generation == admitted.lease.generation
    assert not event.turn_admitted.from_queue
    assert (await heartbeat(client, admitted.lease)).directive == pb.DIRECTIVE_CONTINUE


async def test_q1_enqueued_turns_are_admitted_in_the_order_they_were_queued(
    client: Client, session: pb.SessionRef
) -> None:
    later = ["t2", "t3", "t4", "t5"]
    lease = (await enqueue(client, session, "t1")).lease
    head = await head_of(client, session)
    for depth, turn_id in enumerate(later, start=1):
        queued = await enqueue(client, session, turn_id)
        assert not queued.HasField("lease")
        assert (queued.queued.turn_id, queued.queued.runner_id) == (turn_id, runner_of(turn_id))
        assert (queued.queued.position, queued.queue_depth, queued.replayed) == (depth, depth, False)
    current = await snapshot(client, session)
    assert current.active.turn_id == "t1"
    assert queue_of(current) == [(turn_id, position) for position, turn_id in enumerate(later, start=1)]

    for turn_id in later:
        await complete(client, lease)
        lease = (await picked_up(client, session, turn_id)).lease
    await complete(client, lease)

    log = await events_after(client, session, head)
    assert [e.turn_queued.turn.turn_id for e in log if e.HasField("turn_queued")] == later
    admitted = admissions(log)
    assert [(a.turn.turn_id, a.from_queue) for a in admitted] == [(turn_id, True) for turn_id in later]
    assert "queue_paused" not in kinds(log)


# --- Q2 promotion in the same write --------------------------------------------------------


async def test_q2_the_settling_write_admits_the_head_and_its_runner_learns_it_by_watch_and_by_asking_again(
    client: Client, session: pb.SessionRef
) -> None:
    first = (await enqueue(client, session, "t1")).lease
    queued = (await enqueue(client, session, "t2", lease_ttl=ASKED_LEASE_S)).queued
    runner_watch = watch(client, session, turn_id="t2")  # the queued runner's own watch
    try:
        [opening] = await collect(runner_watch, 1)
        assert queue_of(opening.snapshot) == [("t2", 1)]

        await complete(client, first)
        [learned] = await collect(runner_watch, 1)
    finally:
        runner_watch.cancel()

    settled, admitted = await events_after(client, session, opening.seq)
    assert settled.turn_settled.turn.turn_id == "t1"
    assert learned == admitted
    assert admitted.seq == settled.seq + 1
    assert admitted.time == settled.time  # one write: one store-clock instant
    promoted = admitted.turn_admitted
    assert (promoted.turn.turn_id, promoted.turn.runner_id, promoted.from_queue) == ("t2", "r-t2", True)
    assert promoted.turn.generation > first.generation  # a fresh generation (I2)
    assert promoted.turn.admitted_at == admitted.time
    # Its lease starts at its promotion, as long as its admission asked.
    lease_us = promoted.turn.lease_expires_at.ToMicroseconds() - promoted.turn.admitted_at.ToMicroseconds()
    assert lease_us == round(ASKED_LEASE_S * 1e6)
    assert promoted.turn.queued_at == queued.queued_at
    assert promoted.waited == promoted.turn.waited
    assert (
        promoted.waited.ToMicroseconds() == admitted.time.ToMicroseconds() - queued.queued_at.ToMicroseconds()
    )

    again = await picked_up(client, session, "t2")
    assert again.lease.generation == promoted.turn.generation
    assert again.lease_expires_at == promoted.turn.lease_expires_at
    assert again.heartbeat_interval.ToMicroseconds() == round(ASKED_LEASE_S * 1e6) // 3
    assert await events_after(client, session, admitted.seq) == []  # the pickup writes no event
    assert (await heartbeat(client, again.lease)).directive == pb.DIRECTIVE_CONTINUE
    current = await snapshot(client, session)
    assert (current.phase, current.active.turn_id, list(current.queue)) == (
        pb.SESSION_PHASE_RUNNING,
        "t2",
        [],
    )
    recorded = await get_turn(client, session, "t2")
    assert (recorded.queued_at, recorded.waited) == (queued.queued_at, promoted.waited)


async def test_q2_promoted_turn_whose_runner_never_comes_is_lost_after_its_lease_and_the_next_follows(
    client: Client, session: pb.SessionRef
) -> None:
    first = (await enqueue(client, session, "t1")).lease
    await enqueue(client, session, "t2", lease_ttl=SHORT_S)  # its runner never shows up again
    await enqueue(client, session, "t3")
    watcher = watch(client, session)
    try:
        [opening] = await collect(watcher, 1)
        await complete(client, first)
        seen = await collect_until(watcher, admits("t3"))
    finally:
        watcher.cancel()

    assert kinds(seen) == ["turn_settled", "turn_admitted", "turn_settled", "turn_admitted"]
    assert [e.seq for e in seen] == list(range(opening.seq + 1, opening.seq + 5))
    lost = seen[2].turn_settled.turn
    assert (lost.turn_id, lost.outcome, lost.settled_by) == (
        "t2",
        pb.TURN_OUTCOME_LOST,
        pb.SETTLED_BY_WATCHDOG,
    )
    assert seen[3].time == seen[2].time  # the next follows in the same write, unpaused
    assert seen[3].turn_admitted.from_queue
    await picked_up(client, session, "t3")
    current = await snapshot(client, session)
    assert (current.active.turn_id, current.queue_paused, list(current.queue)) == ("t3", False, [])
    late = await admission_refused(
        client, session, "t2", "r-t2", "TURN_ALREADY_SETTLED", mode=pb.ADMISSION_MODE_ENQUEUE
    )
    assert late.settled_outcome == pb.TURN_OUTCOME_LOST


# --- Q3 pause, never surprise --------------------------------------------------------------


async def test_q3_failed_turn_pauses_the_queue_which_takes_enqueues_until_resume_queue_admits_its_head(
    client: Client, session: pb.SessionRef
) -> None:
    lease = await with_queue(client, session, "t2", "t3")
    head = await head_of(client, session)

    await complete(client, lease, pb.TURN_OUTCOME_FAILED, "model error")

    settled, paused = await events_after(client, session, head)
    assert settled.turn_settled.turn.outcome == pb.TURN_OUTCOME_FAILED
    assert (paused.queue_paused.turn_id, paused.queue_paused.outcome) == ("t1", pb.TURN_OUTCOME_FAILED)
    assert paused.time == settled.time
    current = await snapshot(client, session)
    assert (current.phase, current.queue_paused, current.queue_paused_by) == (
        pb.SESSION_PHASE_IDLE,
        True,
        "t1",
    )
    assert queue_of(current) == [("t2", 1), ("t3", 2)]

    later = await enqueue(client, session, "t4")  # a paused queue still takes turns
    assert (later.queued.position, later.queue_depth) == (3, 3)
    head = await head_of(client, session)

    resumed = await resume_queue(client, session)

    assert resumed.admitted_turn_id == "t2"
    assert [(q.turn_id, q.position) for q in resumed.queue] == [("t3", 1), ("t4", 2)]
    log = await events_after(client, session, head)
    assert kinds(log) == ["queue_resumed", "turn_admitted"]
    assert log[0].queue_resumed.turn_id == "t1"
    assert (log[1].turn_admitted.turn.turn_id, log[1].turn_admitted.from_queue) == ("t2", True)
    await picked_up(client, session, "t2")
    current = await snapshot(client, session)
    assert (current.queue_paused, current.queue_paused_by, current.active.turn_id) == (False, "", "t2")
    # Resuming a queue that runs changes nothing.
    again = await resume_queue(client, session)
    assert (again.admitted_turn_id, list(again.queue)) == ("", list(resumed.queue))
    assert await head_of(client, session) == log[-1].seq


async def test_q3_reject_on_an_idle_session_with_a_paused_queue_is_refused_session_queue_paused_without_retry(
    client: Client, session: pb.SessionRef
) -> None:
    lease = await with_queue(client, session, "t2")
    await complete(client, lease, pb.TURN_OUTCOME_FAILED)
    before = await state_of(client, session, "t1")

    refusal = await refused(admit(client, session, "t9", "r-t9"))

    assert_reason(refusal, "SESSION_QUEUE_PAUSED", admission=True)  # ABORTED, and no RetryInfo
    assert refusal.admission is not None
    assert refusal.info is not None
    assert (refusal.admission.active_turn_id, refusal.admission.active_phase) == ("t2", pb.TURN_PHASE_QUEUED)
    assert not refusal.admission.HasField("retry_after")
    assert dict(refusal.info.metadata) == {"activeTurnId": "t2", "activePhase": "QUEUED"}
    assert await state_of(client, session, "t1") == before


async def test_q3_reject_while_a_turn_runs_and_others_queue_is_the_old_session_turn_in_use_with_retry(
    client: Client, session: pb.SessionRef
) -> None:
    await with_queue(client, session, "t2")
    before = await state_of(client, session, "t1")

    refusal = await refused(admit(client, session, "t9", "r-t9"))  # a caller that sets no mode

    assert_reason(refusal, "SESSION_TURN_IN_USE", admission=True)  # with RetryInfo, as always
    assert refusal.admission is not None
    assert refusal.retry is not None
    assert (refusal.admission.active_turn_id, refusal.admission.active_phase) == ("t1", pb.TURN_PHASE_RUNNING)
    assert refusal.retry.retry_delay == refusal.admission.retry_after
    assert await state_of(client, session, "t1") == before
    await stop(client, session, "t1")
    stopping = await admission_refused(client, session, "t9", "r-t9", "SESSION_STOPPING")
    assert stopping.active_turn_id == "t1"
    assert queue_of(await snapshot(client, session)) == [("t2", 1)]


@pytest.mark.parametrize("force", [False, True], ids=["runner_cancels", "forced"])
async def test_q3_turn_cancelled_by_a_stop_pauses_the_queue(
    client: Client, session: pb.SessionRef, force: bool
) -> None:
    lease = await with_queue(client, session, "t2")
    head = await head_of(client, session)

    stopped = await stop(client, session, "t1", force=force)
    if not force:
        assert (await heartbeat(client, lease)).directive == pb.DIRECTIVE_STOP
        await complete(client, lease, pb.TURN_OUTCOME_CANCELLED)

    log = await events_after(client, session, head)
    assert kinds(log) == ["stop_requested", "turn_settled", "queue_paused"]
    assert stopped.cancelled.settled == force
    assert (log[2].queue_paused.turn_id, log[2].queue_paused.outcome) == ("t1", pb.TURN_OUTCOME_CANCELLED)
    current = await snapshot(client, session)
    assert (current.phase, current.queue_paused_by) == (pb.SESSION_PHASE_IDLE, "t1")
    assert queue_of(current) == [("t2", 1)]


async def test_q3_turn_that_ran_and_lost_its_lease_pauses_the_queue(
    client: Client, session: pb.SessionRef
) -> None:
    lease = (await enqueue(client, session, "t1")).lease
    await enqueue(client, session, "t2")
    # t1's runner asks for the shortest lease once t2 waits, then falls silent.
    await client.admission.Heartbeat(pb.HeartbeatRequest(lease=lease, lease_ttl=seconds(SHORT_S)))
    watcher = watch(client, session)
    try:
        [opening] = await collect(watcher, 1)
        seen = await collect_until(watcher, lambda event: event.HasField("queue_paused"))
    finally:
        watcher.cancel()

    assert kinds(seen) == ["turn_settled", "queue_paused"]
    lost = seen[0].turn_settled.turn
    assert (lost.turn_id, lost.outcome, lost.settled_by) == (
        "t1",
        pb.TURN_OUTCOME_LOST,
        pb.SETTLED_BY_WATCHDOG,
    )
    assert (seen[1].queue_paused.turn_id, seen[1].queue_paused.outcome) == ("t1", pb.TURN_OUTCOME_LOST)
    current = await snapshot(client, session)
    assert (current.seq, current.phase, current.queue_paused_by) == (
        opening.seq + 2,
        pb.SESSION_PHASE_IDLE,
        "t1",
    )
    assert queue_of(current) == [("t2", 1)]


async def test_q3_stop_with_continue_lets_the_head_follow_the_stopped_turn(
    client: Client, session: pb.SessionRef
) -> None:
    lease = await with_queue(client, session, "t2")
    head = await head_of(client, session)

    await stop(client, session, "t1", queue=pb.QUEUE_ACTION_CONTINUE)
    await complete(client, lease, pb.TURN_OUTCOME_CANCELLED)

    log = await events_after(client, session, head)
    assert kinds(log) == ["stop_requested", "turn_settled", "turn_admitted"]
    assert (log[2].turn_admitted.turn.turn_id, log[2].turn_admitted.from_queue) == ("t2", True)
    await picked_up(client, session, "t2")
    assert not (await snapshot(client, session)).queue_paused


async def test_q3_stop_with_clear_cancels_every_queued_turn_in_its_own_write(
    client: Client, session: pb.SessionRef
) -> None:
    lease = await with_queue(client, session, "t2", "t3")
    head = await head_of(client, session)

    stopped = await stop(client, session, "t1", queue=pb.QUEUE_ACTION_CLEAR, reason="start over")

    assert stopped.cancelled.stopping_turn_id == "t1"
    assert list(stopped.cancelled.cleared_turn_ids) == ["t2", "t3"]
    log = await events_after(client, session, head)
    assert kinds(log) == ["stop_requested", "turn_dequeued", "turn_dequeued"]
    assert len({e.time.ToMicroseconds() for e in log}) == 1  # one write
    assert [
        (d.turn_id, d.runner_id, d.outcome, d.cleared, d.reason) for d in (e.turn_dequeued for e in log[1:])
    ] == [(t, runner_of(t), pb.TURN_OUTCOME_CANCELLED, True, "start over") for t in ("t2", "t3")]
    current = await snapshot(client, session)
    assert (current.phase, list(current.queue), current.queue_paused) == (
        pb.SESSION_PHASE_STOPPING,
        [],
        False,
    )
    await admission_refused(client, session, "t2", "r-t2", "TURN_CANCELLED", mode=pb.ADMISSION_MODE_ENQUEUE)
    cleared = await get_turn(client, session, "t3")
    assert (cleared.phase, cleared.outcome, cleared.settled_by) == (
        pb.TURN_PHASE_SETTLED,
        pb.TURN_OUTCOME_CANCELLED,
        pb.SETTLED_BY_GATEWAY,
    )

    head = await head_of(client, session)
    await complete(client, lease, pb.TURN_OUTCOME_CANCELLED)
    assert kinds(await events_after(client, session, head)) == ["turn_settled"]  # nothing left to pause
    assert (await admit(client, session, "t4", "r-t4")).HasField("lease")


# --- Q4 bounded ----------------------------------------------------------------------------


async def test_q4_enqueue_or_interrupt_past_max_queue_depth_is_refused_session_queue_full_changing_nothing(
    server: TurngateServer, client: Client, session: pb.SessionRef
) -> None:
    depth = server.settings.max_queue_depth
    lease = await with_queue(client, session, *(f"q{i}" for i in range(depth)))
    before = await state_of(client, session, "t1")

    for mode in (pb.ADMISSION_MODE_ENQUEUE, pb.ADMISSION_MODE_INTERRUPT):
        refusal = await refused(admit(client, session, "t-over", "r-over", mode=mode))
        assert_reason(refusal, "SESSION_QUEUE_FULL", admission=True)  # no RetryInfo
        assert refusal.admission is not None
        assert (refusal.admission.active_turn_id, refusal.admission.active_phase) == (
            "t1",
            pb.TURN_PHASE_RUNNING,
        )

    assert await state_of(client, session, "t1") == before  # and the INTERRUPT stopped nothing
    assert len((await snapshot(client, session)).queue) == depth
    assert (await heartbeat(client, lease)).directive == pb.DIRECTIVE_CONTINUE


async def test_q4_queued_turn_leaves_the_queue_expired_at_its_expires_at(
    client: Client, session: pb.SessionRef
) -> None:
    await with_queue(client, session, "t3")  # t3 waits the default 10 min
    watcher = watch(client, session)
    try:
        [opening] = await collect(watcher, 1)
        queued = (await enqueue(client, session, "t2", max_queue_wait=SHORT_S)).queued
        seen = await collect_until(watcher, dequeues("t2"))
    finally:
        watcher.cancel()

    assert queued.expires_at.ToMicroseconds() - queued.queued_at.ToMicroseconds() == round(SHORT_S * 1e6)
    assert kinds(seen) == ["turn_queued", "turn_dequeued"]
    assert [e.seq for e in seen] == [opening.seq + 1, opening.seq + 2]
    event = seen[-1]
    left = event.turn_dequeued
    assert (left.runner_id, left.outcome, left.cleared) == ("r-t2", pb.TURN_OUTCOME_EXPIRED, False)
    assert event.time.ToMicroseconds() >= queued.expires_at.ToMicroseconds()  # not before its time
    assert left.waited.ToMicroseconds() == event.time.ToMicroseconds() - queued.queued_at.ToMicroseconds()
    current = await snapshot(client, session)
    assert (current.active.turn_id, queue_of(current)) == ("t1", [("t3", 1)])
    recorded = await get_turn(client, session, "t2")
    assert (recorded.phase, recorded.outcome, recorded.settled_by) == (
        pb.TURN_PHASE_SETTLED,
        pb.TURN_OUTCOME_EXPIRED,
        pb.SETTLED_BY_WATCHDOG,
    )
    assert not recorded.HasField("admitted_at")
    assert (recorded.queued_at, recorded.settled_at, recorded.waited) == (
        queued.queued_at,
        event.time,
        left.waited,
    )
    again = await admission_refused(
        client, session, "t2", "r-t2", "TURN_ALREADY_SETTLED", mode=pb.ADMISSION_MODE_ENQUEUE
    )
    assert again.settled_outcome == pb.TURN_OUTCOME_EXPIRED


@pytest.mark.parametrize("by", ["resume_queue", "admission"])
async def test_q4_queued_turn_past_its_expiry_leaves_in_the_write_of_the_command_that_admits_the_next(
    embedded_server: TurngateServer,
    embedded_client: Client,
    session: pb.SessionRef,
    monkeypatch: pytest.MonkeyPatch,
    by: str,
) -> None:
    """Not only the watchdog: every command first lets the queued turns past their expires_at
    leave, so a ResumeQueue or an admission that finds the paused queue's head expired admits the
    next turn in the same write."""
    client = embedded_client
    lease = (await enqueue(client, session, "t1")).lease
    await enqueue(client, session, "t2", max_queue_wait=CLOCK_WAIT_S)
    if by == "resume_queue":
        await enqueue(client, session, "t3")  # waits the default 10 min
    await complete(client, lease, pb.TURN_OUTCOME_FAILED)  # pauses the queue
    head = await head_of(client, session)

    # No wall time passes and the watchdog is held, yet t2's wait has ended.
    advance_store_clock(monkeypatch, CLOCK_WAIT_S + 1)
    with gated(embedded_server, Gate(session, {Expire: 1})):
        if by == "resume_queue":
            admitted = (await resume_queue(client, session)).admitted_turn_id
        else:  # a REJECT admission: the emptied queue pauses nothing
            admitted = (await admit(client, session, "t3", "r-t3")).lease.turn_id

    assert admitted == "t3"
    log = await events_after(client, session, head)
    assert kinds(log) == [
        "turn_dequeued",
        *(["queue_resumed"] if by == "resume_queue" else []),
        "turn_admitted",
    ]
    assert len({e.time.ToMicroseconds() for e in log}) == 1  # one write
    assert (log[0].turn_dequeued.turn_id, log[0].turn_dequeued.outcome) == ("t2", pb.TURN_OUTCOME_EXPIRED)
    assert (await get_turn(client, session, "t2")).outcome == pb.TURN_OUTCOME_EXPIRED
    assert (await get_turn(client, session, "t3")).phase == pb.TURN_PHASE_RUNNING


# --- Q5 idempotent -------------------------------------------------------------------------


async def test_q5_the_same_enqueue_again_answers_its_place_then_its_lease_then_its_outcome(
    client: Client, session: pb.SessionRef
) -> None:
    first = await with_queue(client, session, "t2", "t3")
    queued = (await snapshot(client, session)).queue[1]
    head = await head_of(client, session)

    waiting = await enqueue(client, session, "t3")

    assert (waiting.replayed, waiting.queued, waiting.queue_depth) == (True, queued, 2)
    assert not waiting.HasField("lease")
    other = await admission_refused(
        client, session, "t3", "r-other", "TURN_OWNED_BY_OTHER_RUNNER", mode=pb.ADMISSION_MODE_ENQUEUE
    )
    assert (other.active_turn_id, other.active_phase) == ("t3", pb.TURN_PHASE_QUEUED)
    assert await head_of(client, session) == head  # replays and refusals write nothing

    await complete(client, first)
    await complete(client, (await picked_up(client, session, "t2")).lease)
    promoted = await picked_up(client, session, "t3")
    assert await enqueue(client, session, "t3") == promoted  # the same lease, as often as asked
    await complete(client, promoted.lease)

    settled = await admission_refused(
        client, session, "t3", "r-t3", "TURN_ALREADY_SETTLED", mode=pb.ADMISSION_MODE_ENQUEUE
    )
    assert settled.settled_outcome == pb.TURN_OUTCOME_COMPLETED
    log = await events_after(client, session, head)
    assert [a.turn.turn_id for a in admissions(log)] == ["t2", "t3"]


# --- Q6 Stop stays guarded -----------------------------------------------------------------


async def test_q6_stop_naming_a_queued_turn_removes_that_turn_only(
    client: Client, session: pb.SessionRef
) -> None:
    lease = await with_queue(client, session, "t2", "t3")
    head = await head_of(client, session)

    stopped = await stop(client, session, "t2", reason="not this one")

    assert stopped.WhichOneof("outcome") == "cancelled"
    assert (list(stopped.cancelled.cancelled_turn_ids), stopped.cancelled.queued) == (["t2"], True)
    assert (stopped.cancelled.stopping_turn_id, stopped.cancelled.before_start) == ("", False)
    [event] = await events_after(client, session, head)
    left = event.turn_dequeued
    assert (left.turn_id, left.outcome, left.reason, left.cleared) == (
        "t2",
        pb.TURN_OUTCOME_CANCELLED,
        "not this one",
        False,
    )
    current = await snapshot(client, session)
    assert (current.phase, current.active.turn_id, queue_of(current)) == (
        pb.SESSION_PHASE_RUNNING,
        "t1",
        [("t3", 1)],
    )
    assert (await heartbeat(client, lease)).directive == pb.DIRECTIVE_CONTINUE
    await admission_refused(client, session, "t2", "r-t2", "TURN_CANCELLED", mode=pb.ADMISSION_MODE_ENQUEUE)
    recorded = await get_turn(client, session, "t2")
    assert (recorded.outcome, recorded.stop_requested, recorded.stop_reason) == (
        pb.TURN_OUTCOME_CANCELLED,
        True,
        "not this one",
    )
    await complete(client, lease)
    await picked_up(client, session, "t3")  # the queue goes on


async def test_q6_stop_naming_the_active_turn_leaves_the_queued_turns_alone(
    client: Client, session: pb.SessionRef
) -> None:
    await with_queue(client, session, "t2", "t3")

    stopped = await stop(client, session, "t1")

    assert stopped.cancelled.stopping_turn_id == "t1"
    assert (list(stopped.cancelled.cleared_turn_ids), stopped.cancelled.queued) == ([], False)
    current = await snapshot(client, session)
    assert (current.phase, queue_of(current)) == (pb.SESSION_PHASE_STOPPING, [("t2", 1), ("t3", 2)])


async def test_q6_stop_naming_a_turn_not_yet_seen_tombstones_it_and_leaves_the_queue_alone(
    client: Client, session: pb.SessionRef
) -> None:
    await with_queue(client, session, "t2")

    stopped = await stop(client, session, "t9")

    assert (list(stopped.cancelled.cancelled_turn_ids), stopped.cancelled.before_start) == (["t9"], True)
    await admission_refused(client, session, "t9", "r-t9", "TURN_CANCELLED", mode=pb.ADMISSION_MODE_ENQUEUE)
    current = await snapshot(client, session)
    assert (current.phase, queue_of(current)) == (pb.SESSION_PHASE_RUNNING, [("t2", 1)])


# --- Q7 guarded interrupt ------------------------------------------------------------------


async def test_q7_interrupt_whose_expected_active_turn_is_not_active_is_refused_active_turn_mismatch(
    client: Client, session: pb.SessionRef
) -> None:
    lease = await with_queue(client, session, "t2")
    before = await state_of(client, session, "t1")

    refusal = await refused(interrupt(client, session, "tx", expected_active_turn_id="t0"))

    assert_reason(refusal, "ACTIVE_TURN_MISMATCH", admission=True)  # FAILED_PRECONDITION, no RetryInfo
    assert refusal.admission is not None
    assert (refusal.admission.active_turn_id, refusal.admission.active_phase) == ("t1", pb.TURN_PHASE_RUNNING)
    assert await state_of(client, session, "t1") == before  # nothing stopped, nothing queued
    assert (await heartbeat(client, lease)).directive == pb.DIRECTIVE_CONTINUE

    idle = pb.SessionRef(project_id=session.project_id, session_id=f"{session.session_id}-idle")
    on_idle = await refused(interrupt(client, idle, "tx", expected_active_turn_id="t1"))
    assert_reason(on_idle, "ACTIVE_TURN_MISMATCH", admission=True)
    assert (await snapshot(client, idle)).seq == 0


async def test_q7_interrupt_stops_the_active_turn_waits_at_the_head_and_runs_next_without_pausing_the_queue(
    client: Client, session: pb.SessionRef
) -> None:
    lease = await with_queue(client, session, "t2")
    await record_interaction(client, lease, "i1")
    head = await head_of(client, session)

    waiting = await interrupt(client, session, "tx", expected_active_turn_id="t1")

    assert (waiting.queued.turn_id, waiting.queued.position, waiting.queue_depth) == (
        "tx",
        1,
        2,
    )  # Q1: the head
    log = await events_after(client, session, head)
    assert kinds(log) == ["stop_requested", "interaction", "turn_queued"]
    asked = log[0].stop_requested
    assert asked.turn_id == "t1"
    assert "tx" in asked.reason
    beat = await heartbeat(client, lease)
    assert (beat.directive, beat.stop_reason) == (pb.DIRECTIVE_STOP, asked.reason)
    assert queue_of(await snapshot(client, session)) == [("tx", 1), ("t2", 2)]

    head = await head_of(client, session)
    await complete(client, lease, pb.TURN_OUTCOME_CANCELLED)

    settled, admitted = await events_after(client, session, head)  # and no queue_paused
    assert (settled.turn_settled.turn.turn_id, settled.turn_settled.turn.outcome) == (
        "t1",
        pb.TURN_OUTCOME_CANCELLED,
    )
    assert (admitted.turn_admitted.turn.turn_id, admitted.turn_admitted.from_queue) == ("tx", True)
    assert admitted.time == settled.time
    await picked_up(client, session, "tx")
    current = await snapshot(client, session)
    assert (current.active.turn_id, current.queue_paused, queue_of(current)) == ("tx", False, [("t2", 1)])


async def test_q7_interrupt_on_an_idle_session_with_an_empty_queue_is_admitted_at_once(
    client: Client, session: pb.SessionRef
) -> None:
    admitted = await interrupt(client, session, "tx")

    assert admitted.HasField("lease")
    assert (admitted.lease.turn_id, admitted.replayed, admitted.HasField("queued")) == ("tx", False, False)
    assert (await snapshot(client, session)).active.turn_id == "tx"
