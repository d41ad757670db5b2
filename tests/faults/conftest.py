"""Servers of the fault tests' own, which a test may stop, kill and start again: a PostgreSQL for
the whole run (every test works in a database of its own on it), and a Redis per test, with an
append-only file (or, for a test of lost data, without any persistence)."""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from tests.contract.backends import open_redis_store, unique_keyspace
from tests.faults.servers import DurableRedis, PrivatePostgres, VolatileRedis
from turngate.service.sql.migrate import migrate
from turngate.service.store.redis.keys import Keyspace
from turngate.service.store.redis.store import RedisStore


@pytest.fixture(scope="session")
def private_postgres() -> Iterator[PrivatePostgres]:
    # Not under pytest's tmp_path: its parents are private to the user running the tests, and the
    # server may run as another user.
    with tempfile.TemporaryDirectory(prefix="turngate-pg-") as root:
        postgres = PrivatePostgres(Path(root))
        postgres.start()
        yield postgres
        postgres.stop()


@pytest.fixture
def ledger_url(private_postgres: PrivatePostgres) -> str:
    """A migrated ledger database of this test's own on the private PostgreSQL."""
    name = f"ledger_{uuid.uuid4().hex[:12]}"

    async def create() -> None:
        engine = create_async_engine(private_postgres.url(), isolation_level="AUTOCOMMIT")
        try:
            async with engine.connect() as conn:
                await conn.execute(text(f'CREATE DATABASE "{name}"'))
        finally:
            await engine.dispose()
        await migrate(private_postgres.url(name))

    asyncio.run(create())
    return private_postgres.url(name)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[DurableRedis]:
    server = DurableRedis(tmp_path)
    server.start()
    yield server
    server.kill()


@pytest.fixture
def volatile_redis(tmp_path: Path) -> Iterator[VolatileRedis]:
    server = VolatileRedis(tmp_path)
    server.start()
    yield server
    server.kill()


@pytest.fixture
def keys() -> Keyspace:
    return unique_keyspace()


@pytest.fixture
async def store(redis_server: DurableRedis, keys: Keyspace) -> AsyncIterator[RedisStore]:
    store = open_redis_store(redis_server.url, keys)
    yield store
    await store.close()
