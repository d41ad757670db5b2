"""Three replicas on one Redis and one PostgreSQL ledger with a retention of a second (docs/design.md
§8): sessions leave Redis between their turns while other sessions run, their admissions race
the retirements on every replica, and still every invariant holds; once all are idle long enough,
Redis holds nothing of them, and the ledger holds every turn of every run."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from tests.support.calls import admit, complete, record_call, snapshot, stop
from tests.support.replicas import Deployment, key_of, new_session, through
from tests.support.servers import Client
from tests.support.stores import redis_contents
from tests.support.waiting import WAIT_TIMEOUT_S, eventually
from turngate.service.store.redis.connection import Client as RedisClient
from turngate.service.store.redis.keys import member
from turngate.v1 import turngate_pb2 as pb

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

# Read by the replicas' deployment (conftest.py): seconds an idle session stays in Redis.
IDLE_RETENTION = 1.0
SESSIONS = 8
ROUNDS = 3
CONTENDERS = 6


async def left_redis(client: Client, session: pb.SessionRef) -> bool:
    return (await snapshot(client, session)).epoch == 0


async def storm(clients: list[Client], session: pb.SessionRef, turn_id: str) -> pb.AdmitTurnResponse:
    """CONTENDERS runners ask for `turn_id`'s session at once, through every replica: one wins (I1)."""

    async def contend(i: int) -> pb.AdmitTurnResponse | None:
        try:
            return await admit(through(clients, i), session, f"{turn_id}-{i}", runner_id=f"r{i}")
        except grpc.aio.AioRpcError as refused:
            if refused.code() is not grpc.StatusCode.ABORTED:  # not "another turn holds it"
                raise
            return None

    won = [reply for reply in await asyncio.gather(*map(contend, range(CONTENDERS))) if reply is not None]
    assert len(won) == 1, f"{session.session_id}: {len(won)} admitted at once"
    return won[0]


async def live_through_rounds(clients: list[Client], n: int, session: pb.SessionRef) -> list[tuple[int, int]]:
    """ROUNDS turns, the session leaving Redis between them; each round's (epoch, generation)."""
    runs: list[tuple[int, int]] = []
    for round_ in range(ROUNDS):
        won = await storm(clients, session, f"t{round_}")
        lease = won.lease
        await record_call(through(clients, n + 1), lease, "c1")
        epoch = (await snapshot(through(clients, n + 2), session)).epoch
        if round_ % 2:
            await stop(through(clients, n + 2), session, lease.turn_id)
        await complete(through(clients, n + 1), lease)
        runs.append((epoch, lease.generation))
        await eventually(lambda: left_redis(through(clients, n), session), timeout_s=WAIT_TIMEOUT_S)
    return runs


async def test_r1_i1_i2_sessions_leaving_redis_under_load_keep_every_invariant_and_then_cost_nothing(
    clients: list[Client], deployment: Deployment, redis: RedisClient
) -> None:
    sessions = [new_session() for _ in range(SESSIONS)]

    runs = await asyncio.gather(*(live_through_rounds(clients, n, s) for n, s in enumerate(sessions)))

    for session, rounds in zip(sessions, runs, strict=True):
        epochs, generations = zip(*rounds, strict=True)
        assert len(set(epochs)) == ROUNDS, f"{session.session_id}: a new epoch each time it came back"
        assert list(generations) == sorted(set(generations)), "I2 across every removal"
        listings = [
            await client.sessions.ListTurns(pb.ListTurnsRequest(session=session)) for client in clients
        ]
        assert all(listing == listings[0] for listing in listings)
        assert [t.generation for t in listings[0].turns] == sorted(generations, reverse=True), (
            "the ledger holds every run's turn, once"
        )
    names = [member(key_of(session)).encode() for session in sessions]

    async def nothing_left() -> bool:
        """No key, and nothing in a key (indexes, the outbox once projected), names them."""
        contents = await redis_contents(redis, deployment.keys)
        return not any(
            name in key or name in repr(value).encode() for key, value in contents.items() for name in names
        )

    await eventually(nothing_left, timeout_s=WAIT_TIMEOUT_S)
