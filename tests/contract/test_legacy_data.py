"""Data written by turngate 0.1.0, before epochs, upgraded in place: its documents, events and
cursors are of the legacy epoch, and a session goes on in it (no new epoch, no loss detected)."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.contract.released import (
    RELEASED_SCHEMA,
    migrate_to,
    played,
    write_released_ledger,
    write_released_redis_session,
    write_released_sql_document,
)
from tests.support.projection import log_of, marks, pending_count
from tests.support.shared_redis import REDIS_SERVER
from tests.support.stores import open_redis_store
from turngate.service.core import LEGACY_EPOCH, Complete, SessionKey, TurnAdmitted, TurnOutcome
from turngate.service.ledger.projector import LedgerProjector
from turngate.service.ports.outbox import Position
from turngate.service.sql.engine import make_engine
from turngate.service.sql.migrate import migrate
from turngate.service.sql.tables import ledger_cursors, session_events
from turngate.service.store.redis.keys import Keyspace
from turngate.service.store.redis.outbox import RedisOutbox
from turngate.service.store.sql import SqlStore

KEY = SessionKey("project", "released")


async def cursor_position(engine: AsyncEngine) -> Position:
    async with engine.connect() as conn:
        row = (await conn.execute(select(ledger_cursors.c.epoch, ledger_cursors.c.seq))).one()
    return Position(row.epoch, row.seq)


async def event_positions(engine: AsyncEngine) -> list[tuple[int, int]]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(session_events.c.epoch, session_events.c.seq).order_by(session_events.c.seq)
        )
    return [(row.epoch, row.seq) for row in rows]


def t1_completed() -> Complete:
    """The runner of `played()`'s turn t1 completes it (two events: its call, then the turn, settled)."""
    admitted = played()[0].events[0].body
    assert isinstance(admitted, TurnAdmitted)
    return Complete("t1", admitted.generation, TurnOutcome.COMPLETED)


async def test_a_session_the_sql_store_of_0_1_0_wrote_goes_on_in_the_legacy_epoch(
    blank_database_url: str,
) -> None:
    decisions = played()
    engine = make_engine(blank_database_url)
    await migrate_to(engine, RELEASED_SCHEMA)
    await write_released_sql_document(engine, KEY, decisions[-1].state)
    await write_released_ledger(engine, KEY, [e for d in decisions for e in d.events])
    await engine.dispose()

    await migrate(blank_database_url)

    engine = make_engine(blank_database_url)
    store = SqlStore(engine)
    try:
        assert (await store.load(KEY)).epoch == LEGACY_EPOCH
        decision = await store.apply(KEY, t1_completed())
        assert [(e.epoch, e.seq) for e in decision.events] == [(LEGACY_EPOCH, 3), (LEGACY_EPOCH, 4)]
        assert (await store.load(KEY)).epoch == LEGACY_EPOCH
        logged = await store.events_after(KEY, 0, 10)
        assert [(e.epoch, e.seq) for e in logged] == [(LEGACY_EPOCH, seq) for seq in range(1, 5)]
        released = [(e.seq, e.time, e.body) for d in decisions for e in d.events]
        assert [(e.seq, e.time, e.body) for e in logged[:2]] == released
    finally:
        await store.close()


@pytest.mark.redis
async def test_a_session_the_redis_store_of_0_1_0_wrote_goes_on_in_the_legacy_epoch(
    blank_database_url: str, redis_keyspace: Keyspace
) -> None:
    """0.1.0 had projected event 1 (cursor and mark at 1) and left event 2's outbox entry; after
    the upgrade the session completes t1 (events 3, 4) and the projector records 2 to 4 under the
    migrated cursor: one legacy epoch, no loss detected."""
    decisions = played()
    engine = make_engine(blank_database_url)
    await migrate_to(engine, RELEASED_SCHEMA)
    await write_released_ledger(engine, KEY, decisions[0].events, cursor=1)
    await engine.dispose()
    redis = Redis.from_url(REDIS_SERVER)
    await write_released_redis_session(redis, redis_keyspace, KEY, decisions, projected=1)

    await migrate(blank_database_url)

    store = open_redis_store(REDIS_SERVER, redis_keyspace)
    engine = make_engine(blank_database_url)
    projector = LedgerProjector(
        RedisOutbox(Redis.from_url(REDIS_SERVER), redis_keyspace, consumer="upgraded"),
        engine,
        reclaim_idle=1.0,
        max_deliveries=3,
    )
    try:
        assert (await store.load(KEY)).epoch == LEGACY_EPOCH
        decision = await store.apply(KEY, t1_completed())
        assert [(e.epoch, e.seq) for e in decision.events] == [(LEGACY_EPOCH, 3), (LEGACY_EPOCH, 4)]
        await projector.create_groups()
        assert await projector.poll() == 2

        assert (projector.lost_histories, projector.dead_letters) == (0, 0)
        assert await cursor_position(engine) == Position(LEGACY_EPOCH, 4)
        assert await event_positions(engine) == [(LEGACY_EPOCH, seq) for seq in range(1, 5)]
        assert [e.epoch for e in await log_of(redis, redis_keyspace, KEY)] == [LEGACY_EPOCH] * 4
        assert await marks(redis, redis_keyspace, [KEY]) == {KEY: 4}
        assert await pending_count(redis, redis_keyspace) == 0
    finally:
        await projector.close()
        await store.close()
        await engine.dispose()
        await redis.aclose()
