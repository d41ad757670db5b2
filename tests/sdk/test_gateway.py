"""The gateway SDK against a real server: typed Stop answers, and stop_and_wait, which makes a
Stop terminate: it waits for the turn to settle, resends with the same request id across network
errors, and forces the turn when its runner never ends it."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.sdk.wire import Wire
from tests.support.calls import admit, complete, events_after, kinds, settlements, wait_for_phase
from tests.support.servers import Client as Raw
from turngate.client import (
    Cancelled,
    Client,
    ControlRefused,
    Idle,
    InteractionNotPending,
    InteractionStatus,
    Mismatch,
    SettledBy,
    TurnOutcome,
    TurnPhase,
)
from turngate.v1 import turngate_pb2 as pb


async def test_stop_answers_cancelled_then_mismatch_for_a_late_stop_then_idle(
    client: Client, raw: Raw, ref: pb.SessionRef
) -> None:
    gateway = client.gateway()
    first = await admit(raw, ref, "t1")
    cancelled = await gateway.stop(ref.session_id, expected_turn_id="t1", reason="user")
    assert isinstance(cancelled, Cancelled)
    assert (cancelled.cancelled_turn_ids, cancelled.stopping_turn_id, cancelled.settled) == (
        ("t1",),
        "t1",
        False,
    )
    assert cancelled.stop_deadline is not None

    await complete(raw, first.lease, pb.TURN_OUTCOME_CANCELLED)
    second = await admit(raw, ref, "t2")
    late = await gateway.stop(ref.session_id, expected_turn_id="t1")
    assert late == Mismatch("t1", "t2", TurnPhase.RUNNING, TurnOutcome.CANCELLED)

    await complete(raw, second.lease)
    idle = await gateway.stop(ref.session_id, expected_turn_id="t2")
    assert idle == Idle("t2", TurnOutcome.COMPLETED, "t2", TurnOutcome.COMPLETED)

    early = await gateway.stop(ref.session_id, expected_turn_id="t3")
    assert isinstance(early, Cancelled)
    assert early.before_start


async def test_a_second_answer_to_an_interaction_is_refused_interaction_not_pending(
    client: Client, raw: Raw, ref: pb.SessionRef
) -> None:
    lease = (await admit(raw, ref, "t1")).lease
    await raw.admission.RecordInteraction(
        pb.RecordInteractionRequest(lease=lease, interaction_id="i1", kind="ok?")
    )
    resolved = await client.gateway().resolve_interaction(ref.session_id, "i1", "yes")
    assert (resolved.status, resolved.resolution) == (InteractionStatus.RESOLVED, "yes")
    with pytest.raises(InteractionNotPending) as refused:
        await client.gateway().resolve_interaction(ref.session_id, "i1", "no")
    assert isinstance(refused.value, ControlRefused)


async def test_stop_and_wait_returns_the_record_the_runner_settled_resending_the_same_request_id(
    client: Client, raw: Raw, ref: pb.SessionRef, wire: Wire
) -> None:
    async def runner() -> None:
        async with client.runner("r1").turn(ref.session_id, "t1") as turn:
            await turn.stop_requested.wait()
            await asyncio.sleep(0.1)  # winding down

    running = asyncio.create_task(runner())
    await wait_for_phase(raw, ref, pb.SESSION_PHASE_RUNNING)
    wire.lose("CancelTurn", after_sending=True)  # accepted, but the answer is lost: resent

    record = await client.gateway().stop_and_wait(ref.session_id, "t1", force_after=5.0, reason="user")
    await running

    assert record is not None
    assert (record.turn_id, record.outcome, record.settled_by) == (
        "t1",
        TurnOutcome.CANCELLED,
        SettledBy.RUNNER,
    )
    sent = wire.requests["CancelTurn"]
    assert len(sent) == 2
    assert len({r.request_id for r in sent if isinstance(r, pb.CancelTurnRequest)}) == 1
    assert kinds(await events_after(raw, ref, 1)) == ["stop_requested", "turn_settled"]


async def test_stop_and_wait_forces_a_turn_whose_runner_never_completes(
    client: Client, raw: Raw, ref: pb.SessionRef
) -> None:
    await admit(raw, ref, "t1", lease_ttl=60)  # a runner that heartbeats on and ignores Stop
    started = time.perf_counter()

    record = await client.gateway().stop_and_wait(ref.session_id, "t1", force_after=0.3)

    assert time.perf_counter() - started >= 0.3
    assert record is not None
    assert (record.outcome, record.settled_by) == (TurnOutcome.CANCELLED, SettledBy.GATEWAY)
    events = await events_after(raw, ref, 1)
    assert kinds(events) == ["stop_requested", "stop_requested", "turn_settled"]
    assert [e.stop_requested.force for e in events[:2]] == [False, True]
    assert len(settlements(events)) == 1


async def test_stop_and_wait_of_an_ended_or_unstarted_turn_answers_at_once(
    client: Client, raw: Raw, ref: pb.SessionRef
) -> None:
    await complete(raw, (await admit(raw, ref, "t1")).lease)
    ended = await client.gateway().stop_and_wait(ref.session_id, "t1", force_after=5.0)
    assert ended is not None
    assert ended.outcome == TurnOutcome.COMPLETED
    assert await client.gateway().stop_and_wait(ref.session_id, "t2", force_after=5.0) is None


async def test_i4_a_stop_of_a_turn_not_yet_started_did_not_stop_the_running_one(
    client: Client, raw: Raw, ref: pb.SessionRef
) -> None:
    gateway = client.gateway()
    await admit(raw, ref, "t1")
    early = await gateway.stop(ref.session_id, expected_turn_id="t0")
    assert isinstance(early, Cancelled)
    assert (early.before_start, early.stopped_running_turn, early.active_turn_id) == (True, False, "t1")
    stopped = await gateway.stop(ref.session_id, expected_turn_id="t1")
    assert isinstance(stopped, Cancelled)
    assert (stopped.stopped_running_turn, stopped.active_turn_id) == (True, "")
