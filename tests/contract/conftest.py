"""Real databases for the store contract: store tests run on the unit tests' in-memory store,
SQLite, PostgreSQL and Redis; ledger and migration tests on the two SQL backends.

Each SQL backend is migrated once per run into a template, and every test gets a fresh copy: a
copied SQLite file, or a PostgreSQL database created from the template and dropped afterwards.
PostgreSQL is the server at TURNGATE_TEST_POSTGRES (default: user postgres on 127.0.0.1:5432,
trust auth); without one, deselect its part with `-m "not postgres"`. Redis: see
tests/support/shared_redis.py.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import pytest
from redis.asyncio import Redis

from tests.support.memory_store import HostClock, MemoryData, MemoryStore
from tests.support.postgres import postgres_admin, postgres_url, unique_database
from tests.support.processes import free_port
from tests.support.shared_redis import REDIS_SERVER, delete_keyspace, unique_keyspace
from tests.support.shared_topologies import TOPOLOGIES, shared_topology_url
from tests.support.stores import (
    MAX_ATTEMPTS,
    ContractStore,
    OpenStore,
    open_redis_store,
    open_sql_store,
    wait_past,
)
from tests.support.topologies import DATA_NODE_SETTINGS, RedisProcess
from turngate.service.sql.migrate import migrate
from turngate.service.store.redis.keys import Keyspace
from turngate.service.store.redis.store import RedisStore
from turngate.service.store.sql import SqlStore, open_store


def _postgres_admin(statement: str) -> None:
    asyncio.run(postgres_admin(statement))


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "turngate.db"
    asyncio.run(migrate(f"sqlite+aiosqlite:///{path}"))
    return path


@pytest.fixture(scope="session")
def postgres_template() -> Iterator[str]:
    name = unique_database("turngate_template")
    _postgres_admin(f'CREATE DATABASE "{name}"')
    try:
        asyncio.run(migrate(postgres_url(name)))
        yield name
    finally:
        _postgres_admin(f'DROP DATABASE "{name}" WITH (FORCE)')


@contextmanager
def _postgres_database(template: str = "template1") -> Iterator[str]:
    name = unique_database("turngate_test")
    _postgres_admin(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    try:
        yield postgres_url(name)
    finally:
        _postgres_admin(f'DROP DATABASE "{name}" WITH (FORCE)')


@contextmanager
def _migrated_database(request: pytest.FixtureRequest, tmp_path: Path, backend: str) -> Iterator[str]:
    if backend == "sqlite":
        path = tmp_path / "turngate.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        yield f"sqlite+aiosqlite:///{path}"
        return
    with _postgres_database(request.getfixturevalue("postgres_template")) as url:
        yield url


BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
STORE_BACKENDS = [
    "memory",
    *BACKENDS,
    *(pytest.param(store, marks=pytest.mark.redis) for store in ("redis", "redis-cluster", "redis-sentinel")),
]


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A migrated, empty database of each backend, for this test alone."""
    with _migrated_database(request, tmp_path, request.param) as url:
        yield url


@pytest.fixture(params=BACKENDS)
def blank_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database of each backend that has never been migrated."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'turngate.db'}"
        return
    with _postgres_database() as url:
        yield url


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[SqlStore]:
    store = open_store(database_url)
    yield store
    await store.close()


@pytest.fixture
def pass_store_time(store: SqlStore) -> Callable[[int], Awaitable[None]]:
    """Waits until the store's clock has passed `instant` (µs), so deadlines up to it are due."""
    return partial(wait_past, store)


@pytest.fixture
def redis_keyspace() -> Iterator[Keyspace]:
    """A keyspace of this test's own on the shared Redis, deleted afterwards."""
    keys = unique_keyspace()
    yield keys
    delete_keyspace(REDIS_SERVER, keys)


@pytest.fixture
async def redis_client() -> AsyncIterator[Redis]:
    """A plain client on the shared Redis, to look at what the store wrote."""
    client = Redis.from_url(REDIS_SERVER)
    yield client
    await client.aclose()


@pytest.fixture
async def redis_store(redis_keyspace: Keyspace) -> AsyncIterator[RedisStore]:
    store = open_redis_store(REDIS_SERVER, redis_keyspace)
    yield store
    await store.close()


@pytest.fixture
async def private_redis(tmp_path: Path) -> AsyncIterator[RedisProcess]:
    """A Redis of the test's own: what the test does to the whole server (its command counts, a
    SCRIPT FLUSH) is the test's alone, and no other test's work shows in it."""
    node = RedisProcess.configured(tmp_path, "redis", free_port(), DATA_NODE_SETTINGS)
    await node.start()
    yield node
    await node.stop()


@pytest.fixture(params=STORE_BACKENDS)
def store_opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OpenStore]:
    """Opens stores on one empty data set of each backend (the unit tests' in-memory store on the
    host's clock, SQLite, PostgreSQL, Redis on one server, on a Redis Cluster and behind
    Sentinel)."""
    if request.param == "memory":
        data = MemoryData(HostClock())

        def open_in_memory(*, max_attempts: int = MAX_ATTEMPTS) -> ContractStore:
            return MemoryStore(data, max_attempts=max_attempts)

        yield open_in_memory
        return
    if request.param in TOPOLOGIES:
        url = shared_topology_url(request, request.param)
        keyspace = unique_keyspace()  # the topology is this run's own: its keys need no deleting

        def open_on_topology(*, max_attempts: int = MAX_ATTEMPTS) -> ContractStore:
            return open_redis_store(url, keyspace, max_attempts=max_attempts)

        yield open_on_topology
        return
    if request.param == "redis":
        keys = request.getfixturevalue("redis_keyspace")

        def open_on_redis(*, max_attempts: int = MAX_ATTEMPTS) -> ContractStore:
            return open_redis_store(REDIS_SERVER, keys, max_attempts=max_attempts)

        yield open_on_redis
        return
    with _migrated_database(request, tmp_path, request.param) as url:
        yield partial(open_sql_store, url)


@pytest.fixture
async def open_any_store(store_opener: OpenStore) -> AsyncIterator[OpenStore]:
    """Like `store_opener`, and closes every store it opened when the test ends."""
    opened: list[ContractStore] = []

    def open_tracked(*, max_attempts: int = MAX_ATTEMPTS) -> ContractStore:
        opened.append(store_opener(max_attempts=max_attempts))
        return opened[-1]

    yield open_tracked
    for store in opened:
        await store.close()


@pytest.fixture
def any_store(open_any_store: OpenStore) -> ContractStore:
    """A store of each backend on an empty data set; `open_any_store()` opens more replicas of it."""
    return open_any_store()
