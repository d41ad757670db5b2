"""Steers across three replicas on one Redis and one PostgreSQL ledger (docs/design.md §9): a steer
sent through one replica reaches the runner watching on another, its end is seen on a third and
recorded in the ledger; and steers racing their turn's completion through every replica each end
exactly once (S2), every accepted one in its turn's log, every refused one a mismatch."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from tests.support.calls import admit, complete, events_after, get_turn
from tests.support.replicas import new_session, through
from tests.support.servers import Client
from tests.support.waiting import WAIT_TIMEOUT_S, eventually
from tests.support.watching import EventTest, collect_until, watch
from turngate.v1 import turngate_pb2 as pb

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

SESSIONS = 6
STEERS = 4


async def send_steer(
    client: Client, session: pb.SessionRef, turn_id: str, steer_id: str
) -> pb.SteerTurnResponse:
    request = pb.SteerTurnRequest(
        session=session, expected_turn_id=turn_id, steer_id=steer_id, content=f"content of {steer_id}"
    )
    response: pb.SteerTurnResponse = await client.control.SteerTurn(request)
    return response


def kind_is(kind: str) -> EventTest:
    return lambda event: event.WhichOneof("kind") == kind


async def test_s5_a_steer_through_one_replica_reaches_the_runner_on_another_and_its_end_is_seen_on_a_third(
    clients: list[Client],
) -> None:
    session = new_session()
    runner, gateway, watcher = clients
    lease = (await admit(runner, session, "t1")).lease
    runner_watch = watch(runner, session)
    others_watch = watch(watcher, session)
    await collect_until(runner_watch, kind_is("snapshot"))
    await collect_until(others_watch, kind_is("snapshot"))

    sent = await send_steer(gateway, session, "t1", "s1")

    assert sent.WhichOneof("outcome") == "steered"
    heard = (await collect_until(runner_watch, kind_is("turn_steered")))[-1]
    assert heard.seq == sent.steered.seq
    assert heard.turn_steered.steer.content == "content of s1"
    acknowledged = await runner.admission.AcknowledgeSteer(
        pb.AcknowledgeSteerRequest(lease=lease, steer_id="s1", status=pb.STEER_STATUS_CONSUMED)
    )
    assert acknowledged.recorded
    ended = (await collect_until(others_watch, kind_is("steer_ended")))[-1]
    assert (ended.steer_ended.steer_id, ended.steer_ended.status) == ("s1", pb.STEER_STATUS_CONSUMED)
    runner_watch.cancel()
    others_watch.cancel()
    await complete(runner, lease)

    async def recorded() -> bool:
        steers = (await get_turn(watcher, session, "t1")).steers
        return [(s.steer_id, s.status, s.content) for s in steers] == [
            ("s1", pb.STEER_STATUS_CONSUMED, "content of s1")
        ]

    await eventually(recorded, timeout_s=WAIT_TIMEOUT_S)


async def race(clients: list[Client], n: int, session: pb.SessionRef) -> list[pb.SteerTurnResponse]:
    """STEERS steers through every replica, racing the runner's completion through another: the
    steers' answers."""
    lease = (await admit(through(clients, n), session, "t1")).lease
    ids = (f"s{i}" for i in itertools.count())
    steering = [send_steer(through(clients, n + 1 + i), session, "t1", next(ids)) for i in range(STEERS)]
    answers, _ = await asyncio.gather(asyncio.gather(*steering), complete(through(clients, n), lease))
    return list(answers)


async def test_s2_steers_racing_completion_through_every_replica_each_end_exactly_once(
    clients: list[Client],
) -> None:
    sessions = [new_session() for _ in range(SESSIONS)]

    raced = await asyncio.gather(*(race(clients, n, s) for n, s in enumerate(sessions)))

    for session, answers in zip(sessions, raced, strict=True):
        log = await events_after(clients[0], session, 1)  # after its admission
        steered = {e.turn_steered.steer.steer_id for e in log if e.WhichOneof("kind") == "turn_steered"}
        ends = [e.steer_ended for e in log if e.WhichOneof("kind") == "steer_ended"]
        settled = [e.turn_settled for e in log if e.WhichOneof("kind") == "turn_settled"]
        assert len(settled) == 1
        assert sorted(end.steer_id for end in ends) == sorted(steered), "S2: one end per accepted steer"
        assert all(end.status == pb.STEER_STATUS_UNCONSUMED for end in ends), "nobody acknowledged them"
        assert set(settled[0].unconsumed_steer_ids) == steered
        for answer in answers:
            outcome = answer.WhichOneof("outcome")
            if outcome == "steered":
                assert answer.steered.steer_id in steered
            else:
                assert outcome == "mismatch", "S1: a steer after the turn ended changes nothing"
                assert answer.mismatch.reason == pb.ERROR_REASON_TURN_NOT_ACTIVE
                assert answer.mismatch.expected_outcome == pb.TURN_OUTCOME_COMPLETED
