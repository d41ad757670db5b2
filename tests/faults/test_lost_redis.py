"""Redis loses its data (every data node of a private deployment without persistence, of each
topology, killed and started again) under sessions that go on: the session starts a new epoch at
seq 1, the ledger keeps what it had and records the new log as a new run, the loss is logged and
counted, and watchers get a resync snapshot instead of the new log's events as if they followed
the old ones."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.faults.deployments import PrivateRedis
from tests.support.projection import ledger_rows, log_of, marks, play_turn
from tests.support.shared_redis import REDIS_TIMEOUT_S
from tests.support.stores import open_redis_store
from tests.support.waiting import eventually
from turngate.service.core import Event, SessionKey, TurnOutcome
from turngate.service.ledger.projector import LedgerProjector
from turngate.service.ledger.reads import Ledger
from turngate.service.ports.outbox import Position
from turngate.service.ports.store import StoreUnavailable
from turngate.service.redis_url import RedisUrl
from turngate.service.sql.engine import make_engine
from turngate.service.sql.tables import ledger_cursors
from turngate.service.store.redis.feed import ClusterLogFeed, RedisLogFeed, open_feed
from turngate.service.store.redis.keys import Keyspace
from turngate.service.store.redis.outbox import RedisOutbox
from turngate.service.store.redis.store import RedisStore
from turngate.service.watch import Snapshot, WatchHub

pytestmark = pytest.mark.redis  # redis-server: a Redis of its own

PROJECT = "p"
KEY = SessionKey(PROJECT, "s")
# Written only before the loss, and only after it.
UNTOUCHED = SessionKey(PROJECT, "untouched")
NEW = SessionKey(PROJECT, "new")
# How long a watcher may wait for what was written: reached only when a test fails.
PULL_TIMEOUT_S = 10.0
FEED_LOGGER = "turngate.service.store.redis.feed"


@pytest.fixture
async def ledger(ledger_url: str) -> AsyncIterator[AsyncEngine]:
    engine = make_engine(ledger_url)
    yield engine
    await engine.dispose()


@pytest.fixture
async def store(volatile_redis: PrivateRedis, keys: Keyspace) -> AsyncIterator[RedisStore]:
    store = open_redis_store(volatile_redis.url, keys)
    yield store
    await store.close()


@pytest.fixture
async def projector(
    volatile_redis: PrivateRedis, keys: Keyspace, ledger: AsyncEngine
) -> AsyncIterator[LedgerProjector]:
    projector = LedgerProjector(
        RedisOutbox(volatile_redis.client(), keys, consumer="projector"),
        ledger,
        reclaim_idle=1.0,
        max_deliveries=3,
    )
    yield projector
    await projector.close()


async def project_everything(projector: LedgerProjector) -> None:
    """Makes the consumer groups (a Redis that lost its data lost them too) and projects every entry."""
    await projector.create_groups()
    while await projector.poll():
        pass


async def cursors(ledger: AsyncEngine) -> dict[SessionKey, Position]:
    async with ledger.connect() as conn:
        rows = await conn.execute(select(ledger_cursors))
    return {SessionKey(row.project_id, row.session_id): Position(row.epoch, row.seq) for row in rows}


def answers(call: Callable[[], Awaitable[object]]) -> Callable[[], Awaitable[bool]]:
    """A check that `call` gets an answer from Redis."""

    async def check() -> bool:
        try:
            await call()
        except StoreUnavailable:
            return False
        return True

    return check


async def lose_everything(server: PrivateRedis, *calls: Callable[[], Awaitable[object]]) -> None:
    """Restarts Redis empty; returns once each of `calls` answers (the first call on a connection
    the restart cut fails, as it would in a replica, and the next one reconnects)."""
    await server.kill()
    await server.start()
    for call in calls:
        await eventually(answers(call))


async def test_the_ledger_keeps_the_lost_epochs_turns_and_records_the_new_log_as_a_new_run(
    volatile_redis: PrivateRedis,
    store: RedisStore,
    projector: LedgerProjector,
    ledger: AsyncEngine,
    caplog: pytest.LogCaptureFixture,
) -> None:
    for turn_id in ("t1", "t2"):
        await play_turn(store, KEY, turn_id)
    await play_turn(store, UNTOUCHED, "t1")
    await project_everything(projector)
    first_epoch = (await store.load(KEY)).epoch
    before = await ledger_rows(ledger, PROJECT)
    assert (projector.lost_histories, await cursors(ledger)) == (
        0,
        {KEY: Position(first_epoch, 8), UNTOUCHED: Position((await store.load(UNTOUCHED)).epoch, 4)},
    )

    await lose_everything(volatile_redis, store.ping, projector.lag)
    await play_turn(store, KEY, "t3")
    await play_turn(store, NEW, "t1")
    second_epoch = (await store.load(KEY)).epoch
    assert second_epoch > first_epoch
    assert (await store.load(KEY)).head == 4, "the session started again at seq 1"
    with caplog.at_level(logging.ERROR, logger="turngate.projector"):
        await project_everything(projector)

    assert projector.lost_histories == 1, "the session Redis lost, not the new one"
    lost = [record.getMessage() for record in caplog.records if "history" in record.getMessage()]
    assert lost == [
        f"p/s: Redis lost this session's history (the ledger holds its epoch {first_epoch} up to seq 8); "
        f"its new log, epoch {second_epoch}, is recorded as a new run"
    ]
    assert projector.dead_letters == 0
    after = await ledger_rows(ledger, PROJECT)
    events = [(row[0], row[-1], row[1]) for row in after["session_events"]]
    assert [(epoch, seq) for session, epoch, seq in events if session == "s"] == [
        *((first_epoch, seq) for seq in range(1, 9)),
        *((second_epoch, seq) for seq in range(1, 5)),
    ]
    for table, rows in before.items():
        if table != "session_activity":  # each session's latest: it moves on with the new run
            assert set(rows) <= set(after[table]), f"{table}: what the ledger had is kept as it was"
    activity = {
        when: {str(row[0]): (int(str(row[1])), int(str(row[2]))) for row in rows["session_activity"]}
        for when, rows in (("before", before), ("after", after))
    }
    assert activity["after"][UNTOUCHED.session_id] == activity["before"][UNTOUCHED.session_id]
    (moved_at, moved_turn), (was_at, was_turn) = (
        activity[when][KEY.session_id] for when in ("after", "before")
    )
    assert moved_at > was_at, "the new run's events are the session's newest"
    assert moved_turn > was_turn, "t3, settled in the new run, is its last settled turn"
    history = Ledger(ledger)
    assert [turn.turn_id for turn in await history.list_turns(KEY, None, 10)] == ["t3", "t2", "t1"]
    first_run = await history.get_turn(KEY, "t1")
    assert first_run is not None
    assert first_run.outcome is TurnOutcome.COMPLETED
    assert [call.call_id for call in first_run.tool_calls] == ["c1"]
    assert (await cursors(ledger))[KEY] == Position(second_epoch, 4)
    assert (await cursors(ledger))[NEW] == Position((await store.load(NEW)).epoch, 4)


async def test_an_acknowledgement_of_the_lost_epoch_leaves_the_new_logs_mark_alone(
    volatile_redis: PrivateRedis, keys: Keyspace, ledger: AsyncEngine
) -> None:
    """The ledger commits epoch 1 up to seq 4; before the projector acknowledges, Redis loses
    everything and the session writes epoch 2's seqs 1 to 4. Raising the mark to 4 then would let
    the store trim epoch 2's events before the ledger has them."""
    store = open_redis_store(volatile_redis.url, keys, retention=2)
    redis = volatile_redis.client()
    await play_turn(store, KEY, "t1")

    async def lose_then_write_again(_key: SessionKey, _cursor: int) -> None:
        await redis.flushall()
        await play_turn(store, KEY, "t2")

    doomed = LedgerProjector(
        RedisOutbox(volatile_redis.client(), keys, consumer="doomed"),
        ledger,
        reclaim_idle=1.0,
        max_deliveries=3,
        after_commit=lose_then_write_again,
    )
    try:
        await doomed.create_groups()
        assert await doomed.poll() == 4
        assert await marks(redis, keys, [KEY]) == {KEY: 0}
        await play_turn(store, KEY, "t3")

        assert [event.seq for event in await log_of(redis, keys, KEY)] == list(range(1, 9)), "nothing trimmed"
        doomed.after_commit = None
        await project_everything(doomed)
        epoch = (await store.load(KEY)).epoch
        assert (await cursors(ledger))[KEY] == Position(epoch, 8)
        assert await marks(redis, keys, [KEY]) == {KEY: 8}
        assert doomed.lost_histories == 1
    finally:
        await doomed.close()
        await store.close()
        await redis.aclose()


async def pulled(stream: AsyncGenerator[Snapshot | Event, None], n: int = 1) -> list[Snapshot | Event]:
    async with asyncio.timeout(PULL_TIMEOUT_S):
        return [await anext(stream) for _ in range(n)]


async def test_a_watcher_resuming_with_a_cursor_of_the_lost_epoch_gets_a_resync_snapshot(
    volatile_redis: PrivateRedis, store: RedisStore
) -> None:
    """The new log has passed the old cursor: only the epoch tells it is not the log it came from."""
    hub = WatchHub(store, buffer=64, retention=1_000)
    for turn_id in ("t1", "t2"):
        await play_turn(store, KEY, turn_id)
    lost = await store.load(KEY)
    await lose_everything(volatile_redis, store.ping)
    for turn_id in ("t3", "t4", "t5"):
        await play_turn(store, KEY, turn_id)
    now = await store.load(KEY)
    assert (now.epoch != lost.epoch, now.head > lost.head) == (True, True)

    async with contextlib.aclosing(hub.follow(KEY, lost.head, lost.epoch)) as old_cursor:
        [resync] = await pulled(old_cursor)
        assert isinstance(resync, Snapshot)
        assert (resync.resync, resync.state) == (True, now)
    async with contextlib.aclosing(hub.follow(KEY, lost.head, now.epoch)) as new_cursor:
        replayed = await pulled(new_cursor, now.head - lost.head)
        assert [(e.epoch, e.seq) for e in replayed if isinstance(e, Event)] == [
            (now.epoch, seq) for seq in range(lost.head + 1, now.head + 1)
        ]


@dataclass
class Replicas:
    """Replica A, whose watch hub follows through its feed what replica B writes."""

    here: RedisStore
    elsewhere: RedisStore
    feed: RedisLogFeed | ClusterLogFeed
    hub: WatchHub
    # The seqs A's feed has read, in order.
    fed: list[int] = field(default_factory=list)
    reading: asyncio.Task[None] | None = None

    def read(self) -> None:
        """Starts A's feed reading."""
        self.reading = asyncio.create_task(self.feed.run())


@contextlib.asynccontextmanager
async def two_replicas(redis: PrivateRedis, keys: Keyspace) -> AsyncIterator[Replicas]:
    """Replicas A and B on `redis`; A's feed reads only once `read()` is called."""
    here, elsewhere = open_redis_store(redis.url, keys), open_redis_store(redis.url, keys)
    feed = open_feed(RedisUrl.parse(redis.url), keys, REDIS_TIMEOUT_S)
    replicas = Replicas(here, elsewhere, feed, WatchHub(here, buffer=64, retention=1_000, feed=feed))

    def deliver(key: SessionKey, events: Sequence[Event]) -> None:
        replicas.fed.extend(event.seq for event in events)
        replicas.hub.deliver(key, events)

    feed.deliver_to(deliver)
    try:
        yield replicas
    finally:
        if replicas.reading is not None:
            replicas.reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await replicas.reading
        await feed.close()
        await here.close()
        await elsewhere.close()


async def test_a_live_watcher_gets_a_resync_snapshot_when_redis_loses_the_session_under_it(
    volatile_redis: PrivateRedis, keys: Keyspace
) -> None:
    """The watcher is on replica A, the writes go through replica B: A's feed reads them back."""
    async with two_replicas(volatile_redis, keys) as replicas:
        here, elsewhere = replicas.here, replicas.elsewhere
        replicas.read()
        await play_turn(elsewhere, KEY, "t1")
        async with contextlib.aclosing(replicas.hub.follow(KEY, 0)) as stream:
            [first] = await pulled(stream)
            assert isinstance(first, Snapshot)
            assert first.state.head == 4
            await play_turn(elsewhere, KEY, "t2")
            assert [item.seq for item in await pulled(stream, 4) if isinstance(item, Event)] == [5, 6, 7, 8]
            # The watcher may have had them from the log (its replay) before the feed read them.
            await eventually(lambda: replicas.fed[-1:] == [8])

            await lose_everything(volatile_redis, here.ping, elsewhere.ping)
            await play_turn(elsewhere, KEY, "t3")  # seqs 1 to 4 again, below where the feed was

            [resync] = await pulled(stream)
            assert isinstance(resync, Snapshot)
            assert resync.resync
            epoch, head = (await here.load(KEY)).epoch, resync.state.head
            assert resync.state.epoch == epoch
            assert 1 <= head <= 4, "as far as t3 had got when the feed read the new log"
            await play_turn(elsewhere, KEY, "t4")
            after = await pulled(stream, 8 - head)
            assert [(e.epoch, e.seq) for e in after if isinstance(e, Event)] == [
                (epoch, seq) for seq in range(head + 1, 9)
            ]


async def test_a_feed_that_first_reads_a_log_redis_lost_and_wrote_again_as_far_gets_the_watcher_a_resync(
    volatile_redis: PrivateRedis, keys: Keyspace
) -> None:
    """A follows from seq 4 (its watcher's snapshot), and its feed has read nothing yet (its first
    connection is slow, say: on a cluster it asks first where the session's bucket lives) when
    Redis loses the session and B writes the new log's seqs 1 to 4: only the epoch tells the feed
    that this log is not the one its watcher follows."""
    async with two_replicas(volatile_redis, keys) as replicas:
        here, elsewhere = replicas.here, replicas.elsewhere
        await play_turn(elsewhere, KEY, "t1")
        async with contextlib.aclosing(replicas.hub.follow(KEY, 0)) as stream:
            [first] = await pulled(stream)
            assert isinstance(first, Snapshot)
            assert first.state.head == 4

            await lose_everything(volatile_redis, here.ping, elsewhere.ping)
            await play_turn(elsewhere, KEY, "t2")
            replicas.read()

            [resync] = await pulled(stream)
            assert isinstance(resync, Snapshot)
            assert (resync.resync, resync.state) == (True, await here.load(KEY))
            assert resync.state.epoch != first.state.epoch
            assert replicas.fed == [1, 2, 3, 4], "the new log, from its start"


async def test_a_feed_that_finds_redis_down_when_it_reconnects_retries_and_gets_the_watcher_a_resync(
    volatile_redis: PrivateRedis, keys: Keyspace, caplog: pytest.LogCaptureFixture
) -> None:
    """A's feed loses its connection and tries again, twice at least, while no data node runs: it
    keeps trying (on a cluster too, where finding no node at all is an error of its own), and
    once Redis is back the watcher learns that the session was lost."""

    def retries() -> int:
        return sum(record.name == FEED_LOGGER for record in caplog.records)

    async with two_replicas(volatile_redis, keys) as replicas:
        here, elsewhere = replicas.here, replicas.elsewhere
        replicas.read()
        await play_turn(elsewhere, KEY, "t1")
        async with contextlib.aclosing(replicas.hub.follow(KEY, 0)) as stream:
            [first] = await pulled(stream)
            assert isinstance(first, Snapshot)

            with caplog.at_level(logging.WARNING, logger=FEED_LOGGER):
                await volatile_redis.kill()
                # The lost read or a first failed connection, then a connection that failed.
                await eventually(lambda: retries() >= 2)
            assert replicas.reading is not None
            assert not replicas.reading.done(), "the feed goes on"
            await volatile_redis.start()
            for call in (here.ping, elsewhere.ping):
                await eventually(answers(call))
            await play_turn(elsewhere, KEY, "t2")

            [resync] = await pulled(stream)
            assert isinstance(resync, Snapshot)
            assert resync.resync
            assert resync.state.epoch == (await here.load(KEY)).epoch != first.state.epoch
