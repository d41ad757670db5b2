"""Reads never go back in time: once a write is acknowledged, GetTurn, ListTurns, GetSession and
WatchSession on every replica show it, whether the ledger has recorded it, lags behind it (the
projector held back) or is down; and they answer the same before and after the ledger records it.

Two replicas on one Redis and one PostgreSQL: the runner writes through A, the gateway through B,
and both are read.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import create_async_engine

from tests.support.calls import admit, complete, get_turn, record_call, record_interaction, resolve, snapshot
from tests.support.logs import ledger_logs, wait_for_ledger
from tests.support.postgres import postgres_address, postgres_url
from tests.support.relay import TcpForwarder
from tests.support.replicas import (
    Deployment,
    acting_through,
    assert_no_tracebacks,
    key_of,
    new_session,
    replicas,
)
from tests.support.servers import Client
from tests.support.shared_redis import delete_prefix, unique_prefix
from tests.support.watching import collect, watch
from turngate.service.sql.migrate import migrate
from turngate.service.store.redis.connection import Client as RedisClient
from turngate.v1 import turngate_pb2 as pb

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

TURN = "t1"


async def begin_turn(client: Client, session: pb.SessionRef) -> pb.TurnLease:
    """t1 admitted, with tool call c1 opened."""
    lease = (await admit(client, session, TURN)).lease
    await record_call(client, lease, "c1")
    return lease


async def end_turn(client: Client, session: pb.SessionRef, lease: pb.TurnLease) -> None:
    """The rest of t1: c1 succeeds, c2 fails with an error, c3 is left open; i1 is resolved by the
    gateway with a resolution, i2 left pending; the runner reports FAILED with an error, which
    interrupts c3 and cancels i2 (I7)."""
    await record_call(client, lease, "c1", pb.TOOL_CALL_STATUS_SUCCEEDED)
    await record_call(client, lease, "c2", pb.TOOL_CALL_STATUS_FAILED, error="disk full")
    await record_call(client, lease, "c3")
    await record_interaction(client, lease, "i1")
    await resolve(client, session, "i1", "approved, with a note")
    await record_interaction(client, lease, "i2")
    await complete(client, lease, pb.TURN_OUTCOME_FAILED, error="model crashed")


def assert_whole(turn: pb.TurnRecord) -> None:
    """t1 as written, all of it: outcome and error, every end state, error text and resolution."""
    assert (turn.phase, turn.outcome, turn.settled_by, turn.error) == (
        pb.TURN_PHASE_SETTLED,
        pb.TURN_OUTCOME_FAILED,
        pb.SETTLED_BY_RUNNER,
        "model crashed",
    )
    assert [(c.call_id, c.status, c.error) for c in turn.tool_calls] == [
        ("c1", pb.TOOL_CALL_STATUS_SUCCEEDED, ""),
        ("c2", pb.TOOL_CALL_STATUS_FAILED, "disk full"),
        ("c3", pb.TOOL_CALL_STATUS_INTERRUPTED, ""),
    ]
    assert [(i.interaction_id, i.status, i.resolution) for i in turn.interactions] == [
        ("i1", pb.INTERACTION_STATUS_RESOLVED, "approved, with a note"),
        ("i2", pb.INTERACTION_STATUS_CANCELLED, ""),
    ]


async def read_back(client: Client, session: pb.SessionRef) -> tuple[pb.TurnRecord, pb.TurnRecord]:
    """t1 through GetTurn and through ListTurns, checked whole and against GetSession and a new
    watch's snapshot."""
    turn = await get_turn(client, session, TURN)
    assert_whole(turn)
    listed = await client.sessions.ListTurns(pb.ListTurnsRequest(session=session))
    [record] = listed.turns
    without_calls = pb.TurnRecord()
    without_calls.CopyFrom(turn)
    del without_calls.tool_calls[:], without_calls.interactions[:]
    assert record == without_calls
    assert (await snapshot(client, session)).last_settled == record
    stream = watch(client, session)
    try:
        [first] = await collect(stream, 1)
    finally:
        stream.cancel()
    assert first.snapshot.last_settled == record
    return turn, record


async def test_reads_with_the_projector_held_back_show_every_acknowledged_write_and_the_same_once_projected(
    tmp_path: Path, ledger_database: str, redis_url: str, redis: RedisClient
) -> None:
    deployment = Deployment(redis_url, unique_prefix(), postgres_url(ledger_database), replicas_project=False)
    session = new_session()
    await migrate(deployment.ledger_url)  # as `turngate migrate` does before replicas that do not project
    engine = create_async_engine(postgres_url(ledger_database))
    try:
        async with replicas(deployment, tmp_path, 2) as (a, b):
            runner = acting_through(a.client, b.client)
            await end_turn(runner, session, await begin_turn(runner, session))
            before = [await read_back(replica.client, session) for replica in (a, b)]
            assert key_of(session) not in await ledger_logs(engine), "nothing projected yet"

            async with deployment.projector(tmp_path):
                await wait_for_ledger(engine, redis, deployment.keys, [key_of(session)])
                after = [await read_back(replica.client, session) for replica in (a, b)]

        assert before == after == [before[0], before[0]]
        assert_no_tracebacks(tmp_path)
    finally:
        await engine.dispose()
        await delete_prefix(redis, deployment.prefix)


async def test_reads_with_the_ledger_down_mid_turn_show_every_acknowledged_write_and_the_same_once_it_is_back(
    tmp_path: Path, ledger_database: str, redis_url: str, redis: RedisClient
) -> None:
    forwarder = TcpForwarder(postgres_address())
    deployment = Deployment(redis_url, unique_prefix(), postgres_url(ledger_database, port=forwarder.port))
    session = new_session()
    engine = create_async_engine(postgres_url(ledger_database))
    await forwarder.start()
    try:
        async with replicas(deployment, tmp_path, 2) as (a, b):
            runner = acting_through(a.client, b.client)
            lease = await begin_turn(runner, session)
            await wait_for_ledger(engine, redis, deployment.keys, [key_of(session)])
            await forwarder.close()  # the ledger goes down with the start of t1 recorded

            await end_turn(runner, session, lease)
            before = [await read_back(replica.client, session) for replica in (a, b)]
            assert len((await ledger_logs(engine))[key_of(session)]) == 2, "the ledger was down"

            await forwarder.start()
            await wait_for_ledger(engine, redis, deployment.keys, [key_of(session)])
            after = [await read_back(replica.client, session) for replica in (a, b)]

        assert before == after == [before[0], before[0]]
        assert_no_tracebacks(tmp_path)
    finally:
        await forwarder.close()
        await engine.dispose()
        await delete_prefix(redis, deployment.prefix)
