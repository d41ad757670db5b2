"""The Redis store when Redis fails, on each topology: every data node of a private deployment
(AOF, fsync always) killed with SIGKILL mid-run and started again on its directory, or every
master answering but refusing writes."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import logging
from pathlib import Path

import pytest

from tests.faults.deployments import REFUSING, REFUSING_WRITES, PrivateRedis, Refusal, refusing_writes
from tests.support.commands import KEY, LEASE, admit, open_call
from tests.support.processes import free_port
from tests.support.shared_redis import REDIS_TIMEOUT_S
from tests.support.stores import RedisContents, open_redis_store, redis_contents, stream_entries
from tests.support.waiting import eventually
from turngate.service.core import (
    Admit,
    Command,
    Complete,
    Event,
    SessionKey,
    TurnAdmitted,
    TurnOutcome,
    TurnSettled,
)
from turngate.service.ledger.projector import LedgerProjector
from turngate.service.ports.store import StoreUnavailable, WriteOutcomeUnknown
from turngate.service.redis_url import RedisUrl
from turngate.service.sql.engine import make_engine
from turngate.service.store.redis.connection import connect
from turngate.service.store.redis.feed import open_feed
from turngate.service.store.redis.keys import Keyspace, member
from turngate.service.store.redis.outbox import RedisOutbox
from turngate.service.store.redis.store import RedisStore

pytestmark = pytest.mark.redis

# How long a test waits for its workload: reached only when the test fails.
WAIT_TIMEOUT_S = 15.0
# Admissions plus settlements acknowledged before Redis is killed under the workload.
ACKNOWLEDGED_BEFORE_KILL = 60
FEED_LOGGER = "turngate.service.store.redis.feed"


async def contents(server: PrivateRedis, keys: Keyspace) -> RedisContents:
    """Everything the store keeps on `server`, read through a fresh client."""
    async with server.client() as client:
        return await redis_contents(client, keys)


async def outbox_seqs(server: PrivateRedis, keys: Keyspace, key: SessionKey) -> list[int]:
    """The last seq of each outbox entry written for `key`."""
    async with server.client() as client:
        entries = await stream_entries(client, keys.outbox(keys.bucket(key)))
    return [int(fields[b"s"]) for _, fields in entries if fields[b"k"].decode() == member(key)]


def turns_in(events: list[Event]) -> tuple[set[tuple[str, int]], set[tuple[str, int]]]:
    """The (turn_id, generation) pairs the log says were admitted, and those it says settled."""
    admitted = {(e.turn_id, e.body.generation) for e in events if isinstance(e.body, TurnAdmitted)}
    settled = {(e.turn_id, e.body.turn.generation) for e in events if isinstance(e.body, TurnSettled)}
    return admitted, settled


async def test_redis_killed_between_read_and_write_fails_the_apply_and_writes_nothing(
    redis_server: PrivateRedis, store: RedisStore, keys: Keyspace
) -> None:
    generation = (await admit(store, KEY, "t1")).generation
    await store.apply(KEY, open_call("t1", generation, "c1"))
    before = await contents(redis_server, keys)

    async def kill_redis(_key: SessionKey, _command: Command) -> None:
        await redis_server.kill()

    store.before_write = kill_redis
    with pytest.raises(StoreUnavailable):
        await store.apply(KEY, open_call("t1", generation, "c2"))
    store.before_write = None
    for call in (store.load(KEY), store.events_after(KEY, 0, 10), store.now(), store.next_deadline()):
        with pytest.raises(StoreUnavailable):
            await call

    await redis_server.start()
    assert await contents(redis_server, keys) == before, "the document, its log and the outbox as they were"
    retried = await store.apply(KEY, open_call("t1", generation, "c2"))
    assert [e.seq for e in retried.events] == [3], "the same store goes on once Redis is back"


async def test_a_store_closed_after_redis_was_down_and_back_leaves_no_connection_open(
    redis_server: PrivateRedis, keys: Keyspace, caplog: pytest.LogCaptureFixture
) -> None:
    """A failure marks redis-py's cluster client for re-reading the topology, and its `aclose`
    then closes nothing; the store's writes connect its nodes' connections all the same. Closing
    the store disconnects them (connection.close_client): a connection left open is reported
    (`Unclosed ClusterNode`, logged by asyncio) whenever the collector frees its node, in the
    middle of whatever else the process does."""
    store = open_redis_store(redis_server.url, keys)
    generation = (await admit(store, KEY, "t1")).generation
    await redis_server.kill()
    with pytest.raises(StoreUnavailable):
        await store.load(KEY)
    await redis_server.start()
    await store.apply(KEY, open_call("t1", generation, "c1"))

    await store.close()
    del store
    gc.collect()
    unclosed = [record.getMessage() for record in caplog.records if "Unclosed" in record.getMessage()]
    assert not unclosed, "every connection closed with the store"


async def test_no_acknowledged_admission_or_settlement_is_lost_when_redis_is_killed_and_restarted(
    redis_server: PrivateRedis, store: RedisStore, keys: Keyspace
) -> None:
    sessions = [SessionKey("project", f"session-{i}") for i in range(8)]
    admissions: dict[SessionKey, set[tuple[str, int]]] = {key: set() for key in sessions}
    settlements: dict[SessionKey, set[tuple[str, int]]] = {key: set() for key in sessions}
    enough = asyncio.Event()

    async def run_turns(key: SessionKey) -> None:
        """Admits and completes turns one after another, noting what was acknowledged, until
        Redis is gone."""
        for n in itertools.count():
            try:
                lease = await admit(store, key, f"t{n}")
                admissions[key].add((lease.turn_id, lease.generation))
                await store.apply(key, Complete(lease.turn_id, lease.generation, TurnOutcome.COMPLETED))
                settlements[key].add((lease.turn_id, lease.generation))
            except StoreUnavailable:
                return
            if sum(map(len, [*admissions.values(), *settlements.values()])) >= ACKNOWLEDGED_BEFORE_KILL:
                enough.set()

    async with asyncio.timeout(WAIT_TIMEOUT_S):
        workers = asyncio.gather(*(run_turns(key) for key in sessions))
        await enough.wait()
        await redis_server.kill()
        await workers
    await redis_server.start()

    for key in sessions:
        events = await store.events_after(key, 0, 10_000)
        state = await store.load(key)
        assert [e.seq for e in events] == list(range(1, state.head + 1)), "the log matches its document"
        assert await outbox_seqs(redis_server, keys, key) == list(range(1, state.head + 1))
        admitted, settled = turns_in(events)
        assert admissions[key] <= admitted
        assert settlements[key] <= settled
        active = state.active
        if active is not None:  # its Complete, or the answer to its admission, was lost with Redis
            await store.apply(key, Complete(active.turn_id, active.generation, TurnOutcome.FAILED))
        after_restart = await admit(store, key, "after-restart")
        assert after_restart.generation > max((generation for _, generation in admitted), default=0)


def nothing_listening() -> str:
    """The URL of a Redis Cluster none of whose nodes answers: one node, on a port nothing listens on."""
    return f"redis+cluster://127.0.0.1:{free_port()}"


async def test_a_cluster_none_of_whose_nodes_answers_fails_every_call_with_store_unavailable(
    keys: Keyspace,
) -> None:
    """The cluster client finds no node to ask which serves what: it raises RedisClusterException
    (from the last node's connection error), not a connection error."""
    store = open_redis_store(nothing_listening(), keys)
    try:
        for call in (
            store.apply(KEY, Admit("t1", "runner", LEASE)),
            store.load(KEY),
            store.events_after(KEY, 0, 10),
            store.now(),
            store.next_deadline(),
            store.ping(),
        ):
            with pytest.raises(StoreUnavailable):
                await call
    finally:
        await store.close()


async def test_a_watch_feed_on_a_cluster_none_of_whose_nodes_answers_keeps_trying(
    keys: Keyspace, caplog: pytest.LogCaptureFixture
) -> None:
    """Its reader asks the cluster where a watched session's bucket lives, and goes on asking."""
    feed = open_feed(RedisUrl.parse(nothing_listening()), keys, REDIS_TIMEOUT_S)
    feed.track(KEY, 0)
    reading = asyncio.create_task(feed.run())

    def retries() -> list[str]:
        return [record.getMessage() for record in caplog.records if record.name == FEED_LOGGER]

    try:
        with caplog.at_level(logging.WARNING, logger=FEED_LOGGER):
            await eventually(lambda: len(retries()) >= 2, timeout_s=WAIT_TIMEOUT_S)
        assert not reading.done(), "the feed goes on"
        assert all("Redis Cluster cannot be connected" in message for message in retries())
    finally:
        reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reading
        await feed.close()


async def test_a_projector_on_a_cluster_none_of_whose_nodes_answers_is_unavailable(
    keys: Keyspace, tmp_path: Path
) -> None:
    """Its loop is retried quietly, as for any Redis outage, instead of failing with a traceback."""
    ledger = make_engine(f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}")
    redis = connect(nothing_listening(), REDIS_TIMEOUT_S)
    projector = LedgerProjector(
        RedisOutbox(redis, keys, consumer="p"), ledger, reclaim_idle=1.0, max_deliveries=3
    )
    try:
        for call in (projector.create_groups(), projector.poll()):
            with pytest.raises(StoreUnavailable):
                await call
    finally:
        await projector.close()
        await ledger.dispose()


@pytest.mark.parametrize(("topology", "refusal"), REFUSING)
async def test_redis_refusing_writes_fails_the_apply_with_store_unavailable_and_writes_nothing(
    redis_server: PrivateRedis, store: RedisStore, keys: Keyspace, refusal: Refusal
) -> None:
    """A replica after a failover (serving stale data, or not: MASTERDOWN), a Redis out of memory,
    a primary that lost its replicas: it answers, but it will not write. Its refusal says the
    script never ran: not applied, never of unknown outcome."""
    generation = (await admit(store, KEY, "t1")).generation
    before = await contents(redis_server, keys)

    async with refusing_writes(redis_server, refusal):
        with pytest.raises(StoreUnavailable) as failed:
            await store.apply(KEY, open_call("t1", generation, "c1"))
    assert not isinstance(failed.value, WriteOutcomeUnknown), failed.value

    assert await contents(redis_server, keys) == before
    assert [e.seq for e in (await store.apply(KEY, open_call("t1", generation, "c1"))).events] == [2]


@pytest.mark.parametrize(("topology", "refusal"), REFUSING_WRITES)
async def test_redis_refusing_writes_fails_the_health_probe_while_it_answers_ping_and_reads(
    redis_server: PrivateRedis, store: RedisStore, keys: Keyspace, refusal: Refusal
) -> None:
    await store.ping()

    async with refusing_writes(redis_server, refusal):
        assert await store.client.ping()
        await store.load(KEY)
        with pytest.raises(StoreUnavailable):
            await store.ping()

    await store.ping()
    assert await store.client.exists(*keys.probe()) == 0
