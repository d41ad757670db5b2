"""Redis loses its data (a private redis-server without persistence, killed and started again) under
sessions that go on: the session starts a new epoch at seq 1, the ledger keeps what it had and
records the new log as a new run, and the loss is logged and counted."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from redis.asyncio import Redis
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.contract.backends import open_redis_store
from tests.contract.projection import ledger_rows, log_of, marks, play_turn
from tests.faults.servers import VolatileRedis
from tests.waiting import eventually
from turngate.service.core import SessionKey, TurnOutcome
from turngate.service.ledger.cursors import Position
from turngate.service.ledger.reads import Ledger
from turngate.service.ports.store import StoreUnavailable
from turngate.service.sql.engine import make_engine
from turngate.service.sql.tables import ledger_cursors
from turngate.service.store.redis.keys import Keyspace
from turngate.service.store.redis.projector import LedgerProjector
from turngate.service.store.redis.store import RedisStore

PROJECT = "p"
KEY = SessionKey(PROJECT, "s")
# Written only before the loss, and only after it.
UNTOUCHED = SessionKey(PROJECT, "untouched")
NEW = SessionKey(PROJECT, "new")


@pytest.fixture
async def ledger(ledger_url: str) -> AsyncIterator[AsyncEngine]:
    engine = make_engine(ledger_url)
    yield engine
    await engine.dispose()


@pytest.fixture
async def store(volatile_redis: VolatileRedis, keys: Keyspace) -> AsyncIterator[RedisStore]:
    store = open_redis_store(volatile_redis.url, keys)
    yield store
    await store.close()


@pytest.fixture
async def projector(
    volatile_redis: VolatileRedis, keys: Keyspace, ledger: AsyncEngine
) -> AsyncIterator[LedgerProjector]:
    projector = LedgerProjector(
        Redis.from_url(volatile_redis.url),
        keys,
        ledger,
        consumer="projector",
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


async def lose_everything(server: VolatileRedis, *calls: Callable[[], Awaitable[object]]) -> None:
    """Restarts Redis empty; returns once each of `calls` answers (the first call on a connection
    the restart cut fails, as it would in a replica, and the next one reconnects)."""
    server.kill()
    server.start()
    for call in calls:
        await eventually(answers(call))


async def test_the_ledger_keeps_the_lost_epochs_turns_and_records_the_new_log_as_a_new_run(
    volatile_redis: VolatileRedis,
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
        assert set(rows) <= set(after[table]), f"{table}: what the ledger had is kept as it was"
    history = Ledger(ledger)
    assert [turn.turn_id for turn in await history.list_turns(KEY, None, 10)] == ["t3", "t2", "t1"]
    first_run = await history.get_turn(KEY, "t1")
    assert first_run is not None
    assert first_run.outcome is TurnOutcome.COMPLETED
    assert [call.call_id for call in first_run.tool_calls] == ["c1"]
    assert (await cursors(ledger))[KEY] == Position(second_epoch, 4)
    assert (await cursors(ledger))[NEW] == Position((await store.load(NEW)).epoch, 4)


async def test_an_acknowledgement_of_the_lost_epoch_leaves_the_new_logs_mark_alone(
    volatile_redis: VolatileRedis, keys: Keyspace, ledger: AsyncEngine
) -> None:
    """The ledger commits epoch 1 up to seq 4; before the projector acknowledges, Redis loses
    everything and the session writes epoch 2's seqs 1 to 4. Raising the mark to 4 then would let
    the store trim epoch 2's events before the ledger has them."""
    store = open_redis_store(volatile_redis.url, keys, retention=2)
    redis = Redis.from_url(volatile_redis.url)
    await play_turn(store, KEY, "t1")

    async def lose_then_write_again(_key: SessionKey, _cursor: int) -> None:
        await redis.flushall()
        await play_turn(store, KEY, "t2")

    doomed = LedgerProjector(
        Redis.from_url(volatile_redis.url),
        keys,
        ledger,
        consumer="doomed",
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
