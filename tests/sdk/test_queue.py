"""The runner and gateway SDK with the session's queue (issue 13, Q1-Q7), against a real server:
a queued runner is told its place by push, enters its body once promoted (also when the promotion
came before its watch started), and its wait ends with a typed error when a Stop cancels or
clears it or it expires; INTERRUPT, the new refusals, Stop's queue actions and resume_queue."""

from __future__ import annotations

import asyncio
from typing import TypeVar

import pytest

from tests.sdk.wire import Wire
from tests.support.calls import admit, complete, events_after
from tests.support.servers import Client as Raw
from tests.support.waiters import Waiter
from tests.support.waiting import WAIT_TIMEOUT_S, eventually
from turngate.client import (
    ActiveTurnMismatch,
    AdmissionMode,
    Cancelled,
    Client,
    QueueAction,
    QueuedTurnCancelled,
    QueuedTurnCleared,
    QueuedTurnExpired,
    ResumedQueue,
    SessionQueueFull,
    SessionQueuePaused,
    TurnAlreadySettled,
    TurnCancelled,
    TurnOutcome,
    TurnPhase,
)
from turngate.client.sync import Client as SyncClient
from turngate.v1 import turngate_pb2 as pb

ENQUEUE = AdmissionMode.ENQUEUE
INTERRUPT = AdmissionMode.INTERRUPT
E = TypeVar("E", bound=BaseException)
# The service's default bound on a session's queue (max_queue_depth).
MAX_QUEUE_DEPTH = 16


async def enqueue(
    raw: Raw, ref: pb.SessionRef, turn_id: str, runner_id: str = "r-other"
) -> pb.AdmitTurnResponse:
    """Another runner's turn, queued with plain stubs."""
    request = pb.AdmitTurnRequest(
        session=ref, turn_id=turn_id, runner_id=runner_id, mode=pb.ADMISSION_MODE_ENQUEUE
    )
    return await raw.admission.AdmitTurn(request)


async def queued(client: Client, session_id: str, *turn_ids: str) -> list[Waiter]:
    """Runners whose turns wait in the queue in this order."""
    waiters = []
    for position, turn_id in enumerate(turn_ids, 1):
        waiter = Waiter(client, session_id, turn_id, mode=ENQUEUE)
        await waiter.placed(position)
        waiters.append(waiter)
    return waiters


async def ends_with(waiter: Waiter, kind: type[E]) -> E:
    """The error the waiter's turn ends with, before its body ever ran."""
    with pytest.raises(kind) as raised:
        async with asyncio.timeout(WAIT_TIMEOUT_S):
            await waiter.task
    assert not waiter.entered.is_set()
    return raised.value


async def test_q1_enqueue_on_an_idle_session_is_admitted_at_once(client: Client, session_id: str) -> None:
    waiter = Waiter(client, session_id, "t1", mode=ENQUEUE)
    turn = await waiter.admitted()
    assert (turn.waited, turn.replayed, waiter.positions) == (None, False, [])
    assert (await waiter.ended()).outcome == TurnOutcome.COMPLETED


async def test_q2_queued_runner_enters_its_body_once_promoted(
    client: Client, raw: Raw, ref: pb.SessionRef, wire: Wire
) -> None:
    first = await admit(raw, ref, "t1")
    waiter = Waiter(client, ref.session_id, "t2", runner_id="r2", mode=ENQUEUE)
    await waiter.placed(1)
    await eventually(lambda: wire.sent["WatchSession"] == 1)  # it waits on its watch, no polling
    assert not waiter.entered.is_set()

    await complete(raw, first.lease)
    turn = await waiter.admitted()
    assert (turn.turn_id, turn.runner_id, turn.replayed) == ("t2", "r2", True)
    assert turn.waited is not None
    assert turn.generation > first.lease.generation
    async with turn.tool_call("c1", "search"):
        pass
    assert (await waiter.ended()).outcome == TurnOutcome.COMPLETED
    assert wire.sent["AdmitTurn"] == 2  # queued, then the same request again for the lease
    [promoted] = [e.turn_admitted for e in await events_after(raw, ref, 1) if e.HasField("turn_admitted")]
    assert (promoted.turn.turn_id, promoted.from_queue) == ("t2", True)


async def test_q1_queued_runner_is_told_its_place_as_turns_ahead_leave_and_interrupt(
    client: Client, raw: Raw, ref: pb.SessionRef
) -> None:
    first = await admit(raw, ref, "t1")
    await enqueue(raw, ref, "t2")
    waiter = Waiter(client, ref.session_id, "t3", mode=ENQUEUE)
    await waiter.placed(2)

    await client.gateway().stop(ref.session_id, expected_turn_id="t2")  # leaves the queue
    await waiter.placed(2, 1)
    interrupting = Waiter(client, ref.session_id, "t4", runner_id="r4", mode=INTERRUPT)
    await interrupting.placed(1)  # an INTERRUPT's turn goes to the head
    await waiter.placed(2, 1, 2)

    await complete(raw, first.lease, pb.TURN_OUTCOME_CANCELLED)  # t1 honours the interruption
    await interrupting.admitted()
    await waiter.placed(2, 1, 2, 1)
    assert not waiter.entered.is_set()
    await interrupting.ended()
    await waiter.admitted()
    await waiter.ended()


async def test_q2_a_promotion_before_the_runners_watch_starts_is_replayed_from_its_cursor(
    client: Client, raw: Raw, ref: pb.SessionRef, wire: Wire
) -> None:
    first = await admit(raw, ref, "t1")
    watch_sent = wire.hold("WatchSession")
    waiter = Waiter(client, ref.session_id, "t2", mode=ENQUEUE)
    await eventually(lambda: wire.sent["WatchSession"] == 1)  # queued; its watch not sent yet
    await complete(raw, first.lease)  # promoted now, before the watch
    watch_sent.set()
    turn = await waiter.admitted()
    assert (turn.turn_id, turn.replayed) == ("t2", True)
    assert turn.waited is not None  # from the replayed turn_admitted
    await waiter.ended()


async def test_q2_a_promotion_a_resync_skipped_is_seen_in_the_snapshot(
    client: Client, raw: Raw, ref: pb.SessionRef, wire: Wire
) -> None:
    first = await admit(raw, ref, "t1")
    watch_sent = wire.hold("WatchSession")
    wire.rewrite_next("WatchSession", lambda request: setattr(request, "epoch", 1))  # not this log's
    waiter = Waiter(client, ref.session_id, "t2", mode=ENQUEUE)
    await eventually(lambda: wire.sent["WatchSession"] == 1)
    await complete(raw, first.lease)
    watch_sent.set()
    turn = await waiter.admitted()
    assert (turn.turn_id, turn.replayed) == ("t2", True)
    await waiter.ended()


async def test_q6_a_stop_naming_the_queued_turn_ends_its_wait_with_queued_turn_cancelled(
    client: Client, raw: Raw, ref: pb.SessionRef
) -> None:
    await admit(raw, ref, "t1")
    waiter = Waiter(client, ref.session_id, "t2", mode=ENQUEUE)
    await waiter.placed(1)
    answer = await client.gateway().stop(ref.session_id, expected_turn_id="t2", reason="never mind")
    assert answer == Cancelled(("t2",), "", False, False, (), None, queued=True, active_turn_id="t1")

    cancelled = await ends_with(waiter, QueuedTurnCancelled)
    assert isinstance(cancelled, TurnCancelled)
    assert (cancelled.turn_id, cancelled.outcome, cancelled.stop_reason) == (
        "t2",
        TurnOutcome.CANCELLED,
        "never mind",
    )
    assert cancelled.waited is not None
    active = (await client.get_session(ref.session_id)).active
    assert active is not None
    assert (active.turn_id, active.phase, active.stop_requested) == ("t1", TurnPhase.RUNNING, False)


async def test_q6_a_stop_before_the_runners_watch_starts_is_replayed_from_its_cursor(
    client: Client, raw: Raw, ref: pb.SessionRef, wire: Wire
) -> None:
    await admit(raw, ref, "t1")
    watch_sent = wire.hold("WatchSession")
    waiter = Waiter(client, ref.session_id, "t2", mode=ENQUEUE)
    await eventually(lambda: wire.sent["WatchSession"] == 1)
    await client.gateway().stop(ref.session_id, expected_turn_id="t1", queue=QueueAction.CLEAR)
    watch_sent.set()
    cleared = await ends_with(waiter, QueuedTurnCleared)  # not only cancelled: its event says so
    assert cleared.waited is not None


async def test_q6_a_stop_a_resync_skipped_still_ends_the_wait_typed(
    client: Client, raw: Raw, ref: pb.SessionRef, wire: Wire
) -> None:
    await admit(raw, ref, "t1")
    watch_sent = wire.hold("WatchSession")
    wire.rewrite_next("WatchSession", lambda request: setattr(request, "epoch", 1))
    waiter = Waiter(client, ref.session_id, "t2", mode=ENQUEUE)
    await eventually(lambda: wire.sent["WatchSession"] == 1)
    await client.gateway().stop(ref.session_id, expected_turn_id="t2")
    watch_sent.set()
    cancelled = await ends_with(waiter, QueuedTurnCancelled)
    assert (cancelled.turn_id, cancelled.waited) == ("t2", None)  # learned by admitting it again


async def test_q3_a_stop_with_clear_ends_every_wait_with_queued_turn_cleared(
    client: Client, raw: Raw, ref: pb.SessionRef
) -> None:
    await admit(raw, ref, "t1")
    waiters = await queued(client, ref.session_id, "t2", "t3")
    answer = await client.gateway().stop(ref.session_id, expected_turn_id="t1", queue=QueueAction.CLEAR)
    assert isinstance(answer, Cancelled)
    assert (answer.stopping_turn_id, answer.cleared_turn_ids) == ("t1", ("t2", "t3"))
    for waiter in waiters:
        cleared = await ends_with(waiter, QueuedTurnCleared)
        assert isinstance(cleared, QueuedTurnCancelled)
    snapshot = await client.get_session(ref.session_id)
    assert (snapshot.queue, snapshot.phase.name) == ((), "STOPPING")


async def test_q6_clear_queue_cancels_the_waiting_turns_and_leaves_the_active_one_running(
    client: Client, ref: pb.SessionRef
) -> None:
    gateway = client.gateway()
    running = Waiter(client, ref.session_id, "t1")
    await running.admitted()
    waiters = await queued(client, ref.session_id, "t2", "t3", "t4")

    answer = await gateway.clear_queue(ref.session_id, reason="start over")
    assert answer is not None
    assert (answer.cancelled_turn_ids, answer.queued, answer.cleared_turn_ids) == (
        ("t4",),
        True,
        ("t2", "t3"),
    )
    assert answer.stopping_turn_id == ""
    for waiter in waiters:
        await ends_with(waiter, QueuedTurnCancelled)
    snapshot = await client.get_session(ref.session_id)
    assert snapshot.active is not None
    assert (snapshot.queue, snapshot.active.turn_id, snapshot.active.stop_requested) == ((), "t1", False)
    assert await gateway.clear_queue(ref.session_id) is None  # nothing waits
    assert (await running.ended()).outcome == TurnOutcome.COMPLETED


async def test_q4_a_turn_waiting_past_its_max_queue_wait_raises_queued_turn_expired(
    client: Client, raw: Raw, ref: pb.SessionRef
) -> None:
    await admit(raw, ref, "t1")
    waiter = Waiter(client, ref.session_id, "t2", mode=ENQUEUE, max_queue_wait=1.0)
    expired = await ends_with(waiter, QueuedTurnExpired)  # the watchdog's expiry, pushed
    assert isinstance(expired, TurnAlreadySettled)
    assert (expired.turn_id, expired.outcome, expired.settled_outcome) == (
        "t2",
        TurnOutcome.EXPIRED,
        TurnOutcome.EXPIRED,
    )
    assert expired.waited is not None
    assert expired.waited >= 1.0


async def test_q4_a_full_queue_refuses_with_session_queue_full_and_queues_nothing(
    client: Client, raw: Raw, ref: pb.SessionRef
) -> None:
    await admit(raw, ref, "t1")
    for n in range(MAX_QUEUE_DEPTH):
        await enqueue(raw, ref, f"q{n}")
    waiter = Waiter(client, ref.session_id, "t2", mode=ENQUEUE)
    full = await ends_with(waiter, SessionQueueFull)
    assert (full.limit, full.active_turn_id, waiter.positions) == ("max_queue_depth", "t1", [])
    assert len((await client.get_session(ref.session_id)).queue) == MAX_QUEUE_DEPTH


async def test_q7_interrupt_with_a_guard_mismatch_raises_active_turn_mismatch_and_changes_nothing(
    client: Client, raw: Raw, ref: pb.SessionRef
) -> None:
    idle = Waiter(client, ref.session_id, "t2", mode=INTERRUPT, expected_active_turn_id="t0")
    assert (await ends_with(idle, ActiveTurnMismatch)).active_turn_id == ""
    await admit(raw, ref, "t1")
    before = await client.get_session(ref.session_id)
    waiter = Waiter(client, ref.session_id, "t3", mode=INTERRUPT, expected_active_turn_id="t0")
    mismatch = await ends_with(waiter, ActiveTurnMismatch)
    assert (mismatch.active_turn_id, mismatch.active_phase) == ("t1", TurnPhase.RUNNING)
    assert await client.get_session(ref.session_id) == before


async def test_q7_interrupt_stops_the_active_turn_and_runs_once_it_has_ended(
    client: Client, ref: pb.SessionRef
) -> None:
    running = Waiter(client, ref.session_id, "t1")
    first = await running.admitted()
    waiter = Waiter(
        client, ref.session_id, "t2", runner_id="r2", mode=INTERRUPT, expected_active_turn_id="t1"
    )
    await waiter.placed(1)
    async with asyncio.timeout(WAIT_TIMEOUT_S):
        await first.stop_requested.wait()  # pushed to t1, whose body then ends
    assert first.stop_reason == "interrupted by turn t2"
    assert (await running.ended()).outcome == TurnOutcome.CANCELLED
    await waiter.admitted()  # an interruption does not pause the queue
    await waiter.ended()


async def test_q3_a_stopped_turn_pauses_the_queue_and_resume_queue_admits_its_head(
    client: Client, ref: pb.SessionRef
) -> None:
    gateway = client.gateway()
    running = Waiter(client, ref.session_id, "t1")
    await running.admitted()
    waiter = Waiter(client, ref.session_id, "t2", runner_id="r2", mode=ENQUEUE)
    await waiter.placed(1)
    await gateway.stop(ref.session_id, expected_turn_id="t1")
    await running.ended()
    snapshot = await client.get_session(ref.session_id)
    assert (snapshot.phase.name, snapshot.queue_paused, snapshot.queue_paused_by) == ("IDLE", True, "t1")
    assert [turn.turn_id for turn in snapshot.queue] == ["t2"]

    rejected = Waiter(client, ref.session_id, "t3")  # no mode: REJECT does not jump the queue
    paused = await ends_with(rejected, SessionQueuePaused)
    assert (paused.active_turn_id, paused.active_phase) == ("t2", TurnPhase.QUEUED)
    assert not waiter.entered.is_set()

    resumed = await gateway.resume_queue(ref.session_id)
    assert resumed == ResumedQueue("t2", ())
    await waiter.admitted()
    await waiter.ended()
    assert await gateway.resume_queue(ref.session_id) == ResumedQueue("", ())  # not paused: nothing


async def test_q3_a_stop_with_continue_lets_the_queue_go_on(client: Client, ref: pb.SessionRef) -> None:
    running = Waiter(client, ref.session_id, "t1")
    await running.admitted()
    waiter = Waiter(client, ref.session_id, "t2", mode=ENQUEUE)
    await waiter.placed(1)
    await client.gateway().stop(ref.session_id, expected_turn_id="t1", queue=QueueAction.CONTINUE)
    assert (await running.ended()).outcome == TurnOutcome.CANCELLED
    await waiter.admitted()
    await waiter.ended()


async def test_stop_and_wait_of_a_queued_turn_removes_it_and_returns_none(
    client: Client, raw: Raw, ref: pb.SessionRef
) -> None:
    await admit(raw, ref, "t1")
    waiter = Waiter(client, ref.session_id, "t2", mode=ENQUEUE)
    await waiter.placed(1)
    assert await client.gateway().stop_and_wait(ref.session_id, "t2", force_after=5.0) is None
    await ends_with(waiter, QueuedTurnCancelled)


def waits_in_the_queue(target: str, project: str, session_id: str, places: list[int]) -> TurnOutcome | None:
    with (
        SyncClient(target, project) as client,
        client.runner("r2").turn(
            session_id, "t2", mode=ENQUEUE, on_queued=lambda queued: places.append(queued.position)
        ) as turn,
    ):
        assert turn.waited is not None
    return turn.outcome


async def test_q2_the_sync_runner_waits_in_the_queue_told_its_place(
    client: Client, raw: Raw, ref: pb.SessionRef, target: str
) -> None:
    first = await admit(raw, ref, "t1")
    places: list[int] = []
    waiting = asyncio.create_task(
        asyncio.to_thread(waits_in_the_queue, target, client.project_id, ref.session_id, places)
    )
    await eventually(lambda: places == [1])
    await complete(raw, first.lease)
    async with asyncio.timeout(WAIT_TIMEOUT_S):
        assert await waiting == TurnOutcome.COMPLETED
