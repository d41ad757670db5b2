"""The health probe (`Store.ping`) proves the store can be written, changing nothing: it fails
where reads still work but writes would not (a read-only SQLite file, a PostgreSQL database that
only allows read-only transactions, as a standby does) and on a database not migrated yet, whose
reads are unavailable too, never an internal error. Redis refusing writes: tests/faults."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from sqlalchemy import func, make_url, select

from tests.support.postgres import postgres_admin
from tests.support.stores import redis_contents
from turngate.service.core import SessionKey
from turngate.service.ports.store import StoreUnavailable
from turngate.service.sql.engine import make_engine
from turngate.service.sql.tables import sessions
from turngate.service.store.redis.keys import Keyspace
from turngate.service.store.redis.store import RedisStore
from turngate.service.store.sql import open_store


async def read_only(url: str) -> str:
    """A URL that opens the database at `url` for reads only: SQLite's read-only mode, or
    PostgreSQL's read-only transactions by default (what a hot standby allows)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return f"sqlite+aiosqlite:///file:{parsed.database}?mode=ro&uri=true"
    await postgres_admin(f'ALTER DATABASE "{parsed.database}" SET default_transaction_read_only = on')
    return url


async def session_rows(url: str) -> int:
    engine = make_engine(url)
    try:
        async with engine.connect() as conn:
            return (await conn.execute(select(func.count()).select_from(sessions))).scalar_one()
    finally:
        await engine.dispose()


async def test_the_probe_of_a_sql_store_changes_nothing(database_url: str) -> None:
    store = open_store(database_url)
    try:
        await store.ping()
    finally:
        await store.close()
    assert await session_rows(database_url) == 0


@pytest.mark.redis
async def test_the_probe_of_a_redis_store_writes_nothing(
    redis_store: RedisStore, redis_keyspace: Keyspace
) -> None:
    await redis_store.ping()
    assert await redis_contents(redis_store.client, redis_keyspace) == {}
    assert await redis_store.client.exists(*redis_keyspace.probe()) == 0


async def test_the_probe_fails_where_the_database_answers_reads_but_takes_no_write(database_url: str) -> None:
    store = open_store(await read_only(database_url))
    try:
        await store.now()
        assert await store.load(SessionKey("p", "s")) is not None
        with pytest.raises(StoreUnavailable):
            await store.ping()
    finally:
        await store.close()


async def test_the_probe_and_the_reads_of_a_database_not_migrated_yet_are_unavailable(
    blank_database_url: str,
) -> None:
    store = open_store(blank_database_url)
    key = SessionKey("p", "s")
    try:
        await store.now()
        calls: list[Callable[[], Awaitable[object]]] = [
            store.ping,
            lambda: store.load(key),
            lambda: store.ledger.list_turns(key, None, 10),
        ]
        for call in calls:
            # PostgreSQL's undefined table is named so; SQLite's is an OperationalError already.
            with pytest.raises(StoreUnavailable, match=r"not migrated yet|no such table"):
                await call()
    finally:
        await store.close()
