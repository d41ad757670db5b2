"""The ledger projector when its PostgreSQL stops under load, and when a projector process is
SIGKILLed between its commit and its acknowledgement: with a private PostgreSQL and a private Redis
of each topology, the ledger still ends with every event exactly once, in order."""

from __future__ import annotations

import asyncio
import itertools
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.faults.deployments import PrivateRedis
from tests.faults.servers import PrivatePostgres
from tests.support.projection import (
    WAIT_TIMEOUT_S,
    commits_log,
    cursor_of,
    each_event_committed_once,
    expected_rows,
    heads,
    lag_is_zero,
    ledger_rows,
    marks,
    pending_count,
    play_turn,
    stopped,
)
from tests.support.waiting import eventually
from turngate.service.core import SessionKey
from turngate.service.ledger.projector import AfterCommit, LedgerProjector
from turngate.service.ports.store import StoreUnavailable
from turngate.service.sql.engine import make_engine
from turngate.service.store.redis.connection import Client
from turngate.service.store.redis.keys import LEDGER_GROUP, Keyspace
from turngate.service.store.redis.outbox import RedisOutbox
from turngate.service.store.redis.store import RedisStore

pytestmark = [pytest.mark.redis, pytest.mark.postgres]  # servers of their own

RECLAIM_IDLE_S = 1.0
MAX_DELIVERIES = 2
HARNESS = Path(__file__).with_name("projector_harness.py")
# How long the harness may take to start, project and die: reached only when the test fails.
HARNESS_TIMEOUT_S = 30.0
SESSIONS = [SessionKey("p", f"s{i}") for i in range(6)]


@pytest.fixture
async def redis(redis_server: PrivateRedis) -> AsyncIterator[Client]:
    client = redis_server.client()
    yield client
    await client.aclose()


@pytest.fixture
async def ledger(ledger_url: str) -> AsyncIterator[AsyncEngine]:
    engine = make_engine(ledger_url)
    yield engine
    await engine.dispose()


def replica(
    server: PrivateRedis, keys: Keyspace, ledger: AsyncEngine, consumer: str, after_commit: AfterCommit
) -> LedgerProjector:
    return LedgerProjector(
        RedisOutbox(server.client(), keys, consumer=consumer),
        ledger,
        reclaim_idle=RECLAIM_IDLE_S,
        max_deliveries=MAX_DELIVERIES,
        after_commit=after_commit,
    )


async def loop_lag() -> float:
    """Runs until cancelled: the longest this event loop was late waking a 50 ms sleep (s)."""
    longest = 0.0
    loop = asyncio.get_running_loop()
    try:
        while True:
            before = loop.time()
            await asyncio.sleep(0.05)
            longest = max(longest, loop.time() - before - 0.05)
    except asyncio.CancelledError:
        return longest


async def slowness(redis: Client, lag: asyncio.Task[float]) -> str:
    """The event loop's longest lag, and Redis's own account of its slow events and commands."""
    lag.cancel()
    longest = await lag
    latency = await redis.execute_command("LATENCY", "LATEST")
    slowlog = await redis.execute_command("SLOWLOG", "GET", "5")
    return f"event loop late by up to {longest:.2f}s; Redis LATENCY LATEST {latency!r}; SLOWLOG {slowlog!r}"


async def most_deliveries(redis: Client, keys: Keyspace) -> int:
    """How often the most delivered pending outbox entry has been delivered."""
    pending = [
        entry
        for bucket in keys.all_buckets()
        for entry in await redis.xpending_range(keys.outbox(bucket), LEDGER_GROUP, "-", "+", 1_000)
    ]
    return max((int(entry["times_delivered"]) for entry in pending), default=0)


async def test_ledger_stopped_for_several_reclaim_windows_under_load_ends_with_every_event_once_in_order(
    private_postgres: PrivatePostgres,
    redis_server: PrivateRedis,
    redis: Client,
    keys: Keyspace,
    store: RedisStore,
    ledger: AsyncEngine,
) -> None:
    cursors, note = commits_log()
    replicas = [replica(redis_server, keys, ledger, f"replica-{i}", note) for i in range(2)]
    for projector in replicas:
        store.add_listener(projector.on_commit)
    running = [asyncio.create_task(projector.run()) for projector in replicas]
    settled = 0
    enough = asyncio.Event()

    async def keep_playing(key: SessionKey) -> None:
        nonlocal settled
        for n in itertools.count():
            if enough.is_set():
                return
            await play_turn(store, key, f"t{n}")
            settled += 1

    async def recorded_some() -> bool:
        return bool(cursors)

    async def played_on() -> bool:
        return settled >= settled_before + len(SESSIONS)

    async def down_long_enough() -> bool:
        """Several reclaim windows, and entries retried more often than max_deliveries."""
        return (
            loop.time() - stopped_at > 3 * RECLAIM_IDLE_S
            and await most_deliveries(redis, keys) > MAX_DELIVERIES
        )

    load = asyncio.gather(*(keep_playing(key) for key in SESSIONS))
    lag = asyncio.create_task(loop_lag())
    await eventually(recorded_some, timeout_s=WAIT_TIMEOUT_S)
    # Off the loop: pg_ctl waits for the server, and a loop blocked past the Redis timeout (2.86 s
    # once, starting PostgreSQL on a busy machine) failed the load's writes, not the ledger.
    await asyncio.to_thread(private_postgres.stop)
    loop = asyncio.get_running_loop()
    stopped_at, settled_before = loop.time(), settled
    await eventually(down_long_enough, timeout_s=WAIT_TIMEOUT_S)
    assert settled > settled_before, "coordination went on without the ledger"
    assert await replicas[0].lag() > 0
    await asyncio.to_thread(private_postgres.start)
    settled_before = settled
    await eventually(played_on, timeout_s=WAIT_TIMEOUT_S)
    enough.set()
    try:
        await load
    except StoreUnavailable as failed:
        # If a write times out again, say whether the test's loop or Redis was slow.
        raise AssertionError(f"{failed}; {await slowness(redis, lag)}") from failed
    lag.cancel()

    async def done() -> bool:
        """Nothing left to project, and each session's commit up to its head noted. Not the first
        alone: a replica slow between its commit and its hook (a busy machine) has its entries
        reclaimed by the other, which finds them recorded and acknowledges them; stopped then, the
        slow one would never note its commit."""
        if not await lag_is_zero(replicas[0]):
            return False
        last = await heads(redis, keys, SESSIONS)
        return all(max(cursors.get(key, [0])) == head for key, head in last.items())

    await eventually(done, timeout_s=WAIT_TIMEOUT_S)

    for task in running:
        await stopped(task)
    for projector in replicas:
        await projector.close()
    assert [projector.dead_letters for projector in replicas] == [0, 0]
    assert each_event_committed_once(cursors, await heads(redis, keys, SESSIONS))
    assert await ledger_rows(ledger, "p") == await expected_rows(redis, keys, ledger, SESSIONS)


async def test_a_projector_killed_between_commit_and_ack_is_taken_over_by_another(
    redis_server: PrivateRedis,
    redis: Client,
    keys: Keyspace,
    store: RedisStore,
    ledger_url: str,
    ledger: AsyncEngine,
) -> None:
    for key in SESSIONS:
        await play_turn(store, key, "t1")
    harness = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HARNESS),
        redis_server.url,
        keys.prefix,
        str(keys.buckets),
        ledger_url,
        "doomed",
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(harness.communicate(), HARNESS_TIMEOUT_S)
    assert harness.returncode == -signal.SIGKILL, stderr.decode()
    committed = {key for key in SESSIONS if await cursor_of(ledger, key) == 4}
    assert committed, "it died after recording"
    assert await pending_count(redis, keys) == 4 * len(SESSIONS), "and before acknowledging anything"
    assert await marks(redis, keys, SESSIONS) == dict.fromkeys(SESSIONS, 0)
    cursors, note = commits_log()
    heir = replica(redis_server, keys, ledger, "heir", note)
    running = asyncio.create_task(heir.run())

    await eventually(lambda: lag_is_zero(heir), timeout_s=WAIT_TIMEOUT_S)

    await stopped(running)
    await heir.close()
    assert set(cursors) == set(SESSIONS) - committed, "what the dead one recorded was only acknowledged"
    assert await pending_count(redis, keys) == 0
    assert await marks(redis, keys, SESSIONS) == dict.fromkeys(SESSIONS, 4)
    assert await ledger_rows(ledger, "p") == await expected_rows(redis, keys, ledger, SESSIONS)
