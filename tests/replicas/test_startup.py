"""A replica started while what it depends on is down: its Redis (health NOT_SERVING and RPCs
UNAVAILABLE until Redis answers, then it serves) or its ledger's PostgreSQL (coordination works
at once; the ledger is migrated and projected once it answers)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import create_async_engine

from tests.replicas.late_servers import PrivateRedis
from tests.support.calls import admit, get_turn, refused
from tests.support.logs import ledger_logs, logged, wait_for_ledger
from tests.support.postgres import postgres_address, postgres_url
from tests.support.processes import SERVICES, connect, free_port, health_of, health_reaches
from tests.support.relay import TcpForwarder
from tests.support.replicas import Deployment, assert_no_tracebacks, key_of, new_session
from tests.support.servers import Client, client_for
from tests.support.shared_redis import REDIS_SERVER, delete_prefix, unique_prefix
from tests.support.waiting import cancelled
from tests.support.watching import act_out_turn, collect_until, settles, watch_from_start
from turngate.v1 import turngate_pb2 as pb

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
# A lease the watchdog lets expire (the shortest the contract allows).
SHORT_LEASE_S = 1.0


async def play_and_watch(client: Client, session: pb.SessionRef) -> list[pb.SessionEvent]:
    """A turn the runner settles after a Stop, and one whose runner goes silent so the watchdog
    settles it; returns every event of the session, as a watcher saw them."""
    watcher = await watch_from_start(client, session)
    try:
        await act_out_turn(client, session, "turn-1")
        await admit(client, session, "turn-2", lease_ttl=SHORT_LEASE_S)
        seen = await collect_until(watcher, settles("turn-2"))
    finally:
        watcher.cancel()
    outcomes = [
        (e.turn_settled.turn.turn_id, e.turn_settled.turn.outcome, e.turn_settled.turn.settled_by)
        for e in seen
        if e.HasField("turn_settled")
    ]
    assert outcomes == [
        ("turn-1", pb.TURN_OUTCOME_CANCELLED, pb.SETTLED_BY_RUNNER),
        ("turn-2", pb.TURN_OUTCOME_LOST, pb.SETTLED_BY_WATCHDOG),
    ]
    return seen


async def assert_projected(client: Client, session: pb.SessionRef) -> None:
    """GetTurn shows what only the ledger keeps: the resolution of turn-1's approval."""
    turn = await get_turn(client, session, "turn-1")
    assert {(i.interaction_id, i.resolution) for i in turn.interactions} == {("i1", "approved"), ("i2", "")}


async def test_replica_started_before_its_redis_is_not_serving_until_redis_answers_then_serves(
    tmp_path: Path, ledger_database: str
) -> None:
    private = PrivateRedis(tmp_path)
    deployment = Deployment(private.url, unique_prefix(), postgres_url(ledger_database))
    port = free_port()
    session = new_session()

    async def start_redis_once_not_serving() -> None:
        await health_reaches(port, NOT_SERVING)
        async with connect(port) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            for service in ("", *SERVICES):
                assert await health_of(health, service) == NOT_SERVING, service
            refusal = await refused(admit(client_for(channel), session))
            assert refusal.code == grpc.StatusCode.UNAVAILABLE, refusal.status
        await private.start()

    redis_starting = asyncio.create_task(start_redis_once_not_serving())
    try:
        async with deployment.replica(tmp_path, port=port) as replica:  # returns once SERVING
            await redis_starting
            seen = await play_and_watch(replica.client, session)
            async with Redis.from_url(private.url) as redis:
                engine = create_async_engine(postgres_url(ledger_database))
                try:
                    ledger = await wait_for_ledger(engine, redis, deployment.keys, [key_of(session)])
                finally:
                    await engine.dispose()
            assert [stored.logged for stored in ledger[key_of(session)]] == logged(seen)
            await assert_projected(replica.client, session)
        assert_no_tracebacks(tmp_path)
    finally:
        await cancelled(redis_starting)
        await private.stop()


async def test_replica_without_its_ledger_at_start_admits_and_settles_then_projects_once_it_answers(
    tmp_path: Path, ledger_database: str
) -> None:
    forwarder = TcpForwarder(postgres_address())
    deployment = Deployment(REDIS_SERVER, unique_prefix(), postgres_url(ledger_database, port=forwarder.port))
    session = new_session()
    engine = create_async_engine(postgres_url(ledger_database))
    redis = Redis.from_url(REDIS_SERVER)
    try:
        async with deployment.replica(tmp_path) as replica:  # SERVING: health follows Redis only
            seen = await play_and_watch(replica.client, session)
            lost = await get_turn(replica.client, session, "turn-2")
            assert (lost.outcome, lost.settled_by) == (pb.TURN_OUTCOME_LOST, pb.SETTLED_BY_WATCHDOG)
            assert await ledger_logs(engine) == {}, "nothing reached the ledger while it was unreachable"

            await forwarder.start()
            ledger = await wait_for_ledger(engine, redis, deployment.keys, [key_of(session)])
            assert [stored.logged for stored in ledger[key_of(session)]] == logged(seen)
            await assert_projected(replica.client, session)
        assert_no_tracebacks(tmp_path)
    finally:
        await forwarder.close()
        await engine.dispose()
        await delete_prefix(redis, deployment.prefix)
        await redis.aclose()
