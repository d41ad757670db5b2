"""One clock, tightly (I8, I10), on a replica in redis mode whose event loop is busy: many callers
at once on the same replica. A heartbeat sent just after its lease expired is never answered
CONTINUE, and the turn settles LOST; no turn is admitted at a time before its AdmitTurn was sent.

Redis and the tests run on one machine, so Redis TIME and the tests' clock are one clock: they are
compared without tolerance.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from tests.support.calls import admit, get_turn, heartbeat
from tests.support.logs import micros
from tests.support.postgres import postgres_database, postgres_url
from tests.support.processes import connect, free_port
from tests.support.replicas import PROJECT, Deployment, assert_no_tracebacks, new_session
from tests.support.servers import Client, client_for
from tests.support.shared_redis import REDIS_TIMEOUT_S, delete_prefix, unique_prefix
from tests.support.waiting import eventually
from turngate.service.sql.migrate import migrate
from turngate.service.store.redis.connection import connect as connect_redis
from turngate.v1 import turngate_pb2 as pb

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

# Callers keeping the replica busy, each on a session of its own, and turns probed meanwhile.
LOAD_CALLERS = 64
PROBED_TURNS = 12
# The shortest lease the contract allows.
SHORT_LEASE_S = 1.0


def host_now() -> int:
    """The tests' clock (µs), which is Redis TIME here."""
    return time.time_ns() // 1_000


@pytest.fixture
async def deployment(redis_url: str) -> AsyncIterator[Deployment]:
    """On each Redis topology (the module's `redis_url`)."""
    async with postgres_database("turngate_clock") as database:
        deployment = Deployment(redis_url, unique_prefix(), postgres_url(database))
        await migrate(deployment.ledger_url)  # before the replica starts, so it reads the ledger at once
        try:
            yield deployment
        finally:
            client = connect_redis(redis_url, REDIS_TIMEOUT_S)
            try:
                await delete_prefix(client, deployment.prefix)
            finally:
                await client.aclose()


async def keep_busy(client: Client, busy: set[int], caller: int) -> None:
    """A runner that admits a turn and heartbeats it as fast as it is answered, until cancelled;
    `busy` holds the callers answered at least once."""
    session = pb.SessionRef(project_id=PROJECT, session_id=f"load-{caller}-{uuid.uuid4().hex[:8]}")
    lease = (await admit(client, session, "busy", lease_ttl=60.0)).lease
    while True:
        await heartbeat(client, lease)
        busy.add(caller)


@contextlib.asynccontextmanager
async def under_load(port: int) -> AsyncIterator[None]:
    """LOAD_CALLERS runners on the replica at `port`, over a connection of their own, while the
    block runs; once every one of them has been answered at least once."""
    async with connect(port) as channel:
        client = client_for(channel)
        busy: set[int] = set()
        callers = [asyncio.create_task(keep_busy(client, busy, i)) for i in range(LOAD_CALLERS)]
        try:
            await eventually(lambda: len(busy) == LOAD_CALLERS)
            yield
        finally:
            for caller in callers:
                caller.cancel()
            results = await asyncio.gather(*callers, return_exceptions=True)
            failed = [r for r in results if not isinstance(r, asyncio.CancelledError | grpc.aio.AioRpcError)]
            assert not failed, failed


async def probe(client: Client) -> None:
    """One turn: admitted no earlier than its AdmitTurn was sent (I10); heartbeated just after its
    lease expired, and told ABANDON, the turn settled LOST by the clock (I8)."""
    session = new_session()
    sent = host_now()
    admitted = await admit(client, session, "t1", lease_ttl=SHORT_LEASE_S)
    record = await get_turn(client, session, "t1")
    assert micros(record.admitted_at) >= sent, "admitted before the request was sent"

    expiry = micros(admitted.lease_expires_at)
    await eventually(lambda: host_now() > expiry, timeout_s=SHORT_LEASE_S + 5)
    beat = await heartbeat(client, admitted.lease)

    assert beat.directive == pb.DIRECTIVE_ABANDON, "a lease extended after it expired"
    settled = await get_turn(client, session, "t1")
    assert (settled.outcome, settled.settled_by) == (pb.TURN_OUTCOME_LOST, pb.SETTLED_BY_WATCHDOG)


async def test_i8_i10_under_load_a_heartbeat_after_expiry_is_abandoned_and_no_admission_predates_its_request(
    tmp_path: Path, deployment: Deployment
) -> None:
    port = free_port()
    async with deployment.replica(tmp_path, port=port) as replica, under_load(port):
        await asyncio.gather(*(probe(replica.client) for _ in range(PROBED_TURNS)))
    assert_no_tracebacks(tmp_path)
