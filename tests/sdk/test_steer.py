"""The SDK with steers and queue edits (design §9, S1-S7, Q8), against a real server: the gateway's
typed answers, the runner hearing a steer on its turn by push and acknowledging it, a turn a steer
became running with its input, MoveQueuedTurn guarded by the queue's version, the sync twins."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.calls import admit, complete, with_queue
from tests.support.servers import Client as Raw
from tests.support.waiters import Waiter
from tests.support.waiting import WAIT_TIMEOUT_S
from turngate.client import (
    AdmissionMode,
    Client,
    ErrorReason,
    QueuedTurnCleared,
    QueueReordered,
    QueueVersionMismatch,
    SteerAcknowledgement,
    Steered,
    SteerEnded,
    SteerFallback,
    SteerInput,
    SteerMismatch,
    SteerNotFound,
    SteerQueued,
    SteerStatus,
    TurnAdmitted,
    TurnNotQueued,
    TurnOutcome,
    TurnPhase,
    TurnQueued,
    TurnSettled,
    TurnSteered,
)
from turngate.client.sync import Client as SyncClient
from turngate.v1 import turngate_pb2 as pb


async def test_s5_the_runner_hears_a_steer_on_its_turn_and_acknowledges_it_consumed(
    client: Client, session_id: str
) -> None:
    async with client.runner("r1").turn(session_id, "t1") as turn:
        sent = await client.gateway().steer(session_id, "t1", "use the staging database", steer_id="s1")
        assert isinstance(sent, Steered)
        assert (sent.turn_id, sent.steer_id, sent.replayed) == ("t1", "s1", False)
        async with asyncio.timeout(WAIT_TIMEOUT_S):
            steer = await anext(turn.steers)
        assert (steer.steer_id, steer.content, steer.content_type) == (
            "s1",
            "use the staging database",
            "text/plain",
        )
        assert steer.expires_at is not None
        answer = await turn.acknowledge("s1")
        assert answer == SteerAcknowledgement("s1", SteerStatus.CONSUMED, recorded=True)
        again = await turn.acknowledge("s1", consumed=False)  # it has ended: that end answers
        assert again == SteerAcknowledgement("s1", SteerStatus.CONSUMED, recorded=False)
        record = await client.get_turn(session_id, "t1")
    assert [(steer.steer_id, steer.status) for steer in record.steers] == [("s1", SteerStatus.CONSUMED)]


async def test_s5_the_steers_iteration_ends_when_the_turn_is_asked_to_stop(
    client: Client, session_id: str
) -> None:
    async with client.runner("r1").turn(session_id, "t1") as turn:
        await client.gateway().steer(session_id, "t1", "first", steer_id="s1")
        await client.gateway().stop(session_id, expected_turn_id="t1")
        async with asyncio.timeout(WAIT_TIMEOUT_S):
            await turn.stop_requested.wait()
            received = [steer.steer_id async for steer in turn.steers]
        assert received == ["s1"]  # pushed before the Stop: still taken


async def test_s5_a_steer_sent_before_the_turns_watch_started_is_read_from_the_turn(
    client: Client, raw: Raw, ref: pb.SessionRef, session_id: str
) -> None:
    lease = (await admit(raw, ref, "t1", "r1")).lease
    await client.gateway().steer(session_id, "t1", "before the watch", steer_id="s1")
    async with client.runner("r1").turn(session_id, "t1") as turn:  # the same lease, replayed
        assert turn.generation == lease.generation
        assert [steer.content for steer in turn.steers.received()] == ["before the watch"]
        await turn.acknowledge("s1", consumed=False)
        record = await client.get_turn(session_id, "t1")
    assert [steer.status for steer in record.steers] == [SteerStatus.DECLINED]


async def test_s1_a_steer_naming_a_turn_that_is_not_running_is_a_mismatch_and_changes_nothing(
    client: Client, raw: Raw, ref: pb.SessionRef, session_id: str
) -> None:
    gateway = client.gateway()
    idle = await gateway.steer(session_id, "t0", "late")
    assert isinstance(idle, SteerMismatch)
    assert (idle.reason, idle.current_turn_id) == (ErrorReason.TURN_NOT_ACTIVE, "")
    await admit(raw, ref, "t1", "r1")
    other = await gateway.steer(session_id, "t0", "late")
    assert other == SteerMismatch(
        expected_turn_id="t0",
        reason=ErrorReason.ACTIVE_TURN_MISMATCH,
        current_turn_id="t1",
        current_phase=TurnPhase.RUNNING,
        expected_phase=TurnPhase.UNSPECIFIED,
        expected_outcome=TurnOutcome.UNSPECIFIED,
    )
    active = (await client.get_session(session_id)).active
    assert active is not None
    assert active.pending_steer_ids == ()


async def test_s3_a_retry_with_the_same_steer_id_answers_the_first_seq(
    client: Client, raw: Raw, ref: pb.SessionRef, session_id: str
) -> None:
    await admit(raw, ref, "t1", "r1")
    first = await client.gateway().steer(session_id, "t1", "once", steer_id="s1")
    again = await client.gateway().steer(session_id, "t1", "once", steer_id="s1")
    assert isinstance(first, Steered)
    assert isinstance(again, Steered)
    assert (again.seq, again.replayed) == (first.seq, True)


async def test_s2_an_acknowledgement_naming_no_steer_of_the_turn_is_refused_steer_not_found(
    client: Client, session_id: str
) -> None:
    async with client.runner("r1").turn(session_id, "t1") as turn:
        with pytest.raises(SteerNotFound):
            await turn.acknowledge("nobody-sent-this")


async def test_s7_with_enqueue_a_steer_becomes_a_turn_its_runner_runs_with_the_steers_input(
    client: Client, raw: Raw, ref: pb.SessionRef, session_id: str
) -> None:
    await complete(raw, (await admit(raw, ref, "t0", "r1")).lease)
    running = (await admit(raw, ref, "t1", "r2")).lease
    queued = await client.gateway().steer(
        session_id, "t0", "and then the summary", steer_id="s1", fallback=SteerFallback.ENQUEUE
    )
    assert isinstance(queued, SteerQueued)
    assert (queued.turn.turn_id, queued.turn.runner_id, queued.position, queued.admitted) == (
        "s1",
        "r1",
        1,
        False,
    )
    assert queued.turn.steer is not None
    assert queued.turn.steer.content == "and then the summary"
    placed = asyncio.Event()

    async def run_it() -> SteerInput | None:
        turns = client.runner("r1").turn(
            session_id, "s1", mode=AdmissionMode.ENQUEUE, on_queued=lambda _: placed.set()
        )
        async with turns as turn:
            return turn.steer

    running_it = asyncio.create_task(run_it())
    async with asyncio.timeout(WAIT_TIMEOUT_S):
        await placed.wait()
        await complete(raw, running)
        steer = await running_it
    assert steer is not None
    assert (steer.steer_id, steer.content) == ("s1", "and then the summary")


async def test_q8_a_queued_turn_moves_to_the_head_guarded_by_the_queue_version(
    client: Client, raw: Raw, ref: pb.SessionRef, session_id: str
) -> None:
    await with_queue(raw, ref, "t2", "t3")
    version = (await client.get_session(session_id)).queue_version
    gateway = client.gateway()
    moved = await gateway.move_queued_turn(session_id, "t3", expected_queue_version=version)
    assert [turn.turn_id for turn in moved.queue] == ["t3", "t2"]
    assert moved.queue_version > version
    with pytest.raises(QueueVersionMismatch):
        await gateway.move_queued_turn(session_id, "t2", expected_queue_version=version)
    back = await gateway.move_queued_turn(session_id, "t3", after="t2")
    assert [(turn.turn_id, turn.position) for turn in back.queue] == [("t2", 1), ("t3", 2)]
    with pytest.raises(TurnNotQueued):
        await gateway.move_queued_turn(session_id, "t1")


async def test_s5_watchers_see_the_steer_its_end_and_the_queues_new_order(
    client: Client, raw: Raw, ref: pb.SessionRef, session_id: str
) -> None:
    await with_queue(raw, ref, "t2", "t3")
    async with client.watch(session_id) as events:
        await anext(events)  # the snapshot
        async with client.runner("r-t1").turn(session_id, "t1") as turn:  # t1's lease, replayed
            await client.gateway().steer(session_id, "t1", "hurry", steer_id="s1")
            async with asyncio.timeout(WAIT_TIMEOUT_S):
                await turn.acknowledge((await anext(turn.steers)).steer_id)
            await client.gateway().move_queued_turn(session_id, "t3")
            async with asyncio.timeout(WAIT_TIMEOUT_S):
                bodies = [(await anext(events)).body for _ in range(3)]
    assert isinstance(bodies[0], TurnSteered)
    assert (bodies[0].turn_id, bodies[0].steer.content) == ("t1", "hurry")
    assert isinstance(bodies[1], SteerEnded)
    assert (bodies[1].steer_id, bodies[1].status) == ("s1", SteerStatus.CONSUMED)
    assert bodies[2] == QueueReordered(("t3", "t2"), "t3")


def steered_in_a_thread(target: str, project: str, session_id: str) -> tuple[str, SteerStatus, list[str]]:
    with SyncClient(target, project) as client, client.runner("r-t1").turn(session_id, "t1") as turn:
        client.gateway().steer(session_id, "t1", "from a thread", steer_id="s1")
        steer = next(turn.steers)
        answer = turn.acknowledge(steer.steer_id)
        assert answer is not None
        moved = client.gateway().move_queued_turn(session_id, "t3")
        return steer.content, answer.status, [turn.turn_id for turn in moved.queue]


async def test_s5_the_sync_runner_hears_a_steer_and_acknowledges_it(
    client: Client, raw: Raw, ref: pb.SessionRef, target: str, session_id: str
) -> None:
    await with_queue(raw, ref, "t2", "t3")
    async with asyncio.timeout(WAIT_TIMEOUT_S):
        done = await asyncio.to_thread(steered_in_a_thread, target, client.project_id, session_id)
    assert done == ("from a thread", SteerStatus.CONSUMED, ["t3", "t2"])


async def test_s6_a_steer_its_turn_did_not_take_is_requeued_and_promoted_with_its_input(
    client: Client, session_id: str
) -> None:
    async with client.watch(session_id) as events:
        await anext(events)  # the snapshot
        async with client.runner("r1").turn(session_id, "t1"):
            await client.gateway().steer(session_id, "t1", "not now", steer_id="s1", requeue_unconsumed=True)
        async with asyncio.timeout(WAIT_TIMEOUT_S):
            bodies = [(await anext(events)).body for _ in range(6)]
    _, _, ended, settled, queued, promoted = bodies
    assert isinstance(ended, SteerEnded)
    assert (ended.steer_id, ended.status, ended.requeued) == ("s1", SteerStatus.UNCONSUMED, True)
    assert isinstance(settled, TurnSettled)
    assert settled.unconsumed_steer_ids == ("s1",)
    assert isinstance(queued, TurnQueued)
    assert (queued.turn.turn_id, queued.turn.runner_id, queued.turn.steer) == (
        "s1",
        "r1",
        SteerInput("s1", "not now", "text/plain"),
    )
    assert isinstance(promoted, TurnAdmitted)
    assert (promoted.turn.turn_id, promoted.from_queue, promoted.steer) == (
        "s1",
        True,
        SteerInput("s1", "not now", "text/plain"),
    )
    async with client.runner("r1").turn(session_id, "s1") as requeued:
        assert requeued.steer == SteerInput("s1", "not now", "text/plain"), "AdmitTurn answers its input"


async def test_q8_a_waiting_runner_is_told_its_new_place_when_the_queue_is_reordered(
    client: Client, raw: Raw, ref: pb.SessionRef, session_id: str
) -> None:
    await admit(raw, ref, "t1", "r1")
    second = Waiter(client, session_id, "t2", runner_id="r2", mode=AdmissionMode.ENQUEUE)
    await second.placed(1)
    third = Waiter(client, session_id, "t3", runner_id="r3", mode=AdmissionMode.ENQUEUE)
    await third.placed(2)
    await client.gateway().move_queued_turn(session_id, "t3")
    await third.placed(2, 1)
    await second.placed(1, 2)
    await client.gateway().clear_queue(session_id)
    for waiter in (second, third):
        with pytest.raises(QueuedTurnCleared):
            async with asyncio.timeout(WAIT_TIMEOUT_S):
                await waiter.task
