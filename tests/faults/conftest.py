"""Servers of the fault tests' own, which a test may stop, kill and start again: a PostgreSQL for
the whole run (every test works in a database of its own on it), and Redis with an append-only
file (or, for a test of lost data, without any persistence) on each topology (deployments.py): a
standalone server per test, and a Redis Cluster and a Sentinel deployment shared by the run (the
durable ones) or by the module (the volatile ones), each test in a keyspace of its own."""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from tests.faults.deployments import (
    DURABLE_SETTINGS,
    FAILURE_TIMEOUT_MS,
    TOPOLOGIES,
    VOLATILE_SETTINGS,
    ClusterDeployment,
    PrivateRedis,
    SentinelDeployment,
    Standalone,
    Topology,
)
from tests.faults.servers import DurableRedis, PrivatePostgres, VolatileRedis
from tests.support.shared_redis import unique_keyspace
from tests.support.stores import open_redis_store
from tests.support.topologies import RedisCluster, RedisSentinel
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


@pytest.fixture(params=TOPOLOGIES)
def topology(request: pytest.FixtureRequest) -> Topology:
    """Each topology a fault test runs on (a test may parametrize it itself, to skip one)."""
    topology: Topology = request.param
    return topology


@pytest.fixture(scope="session")
async def durable_cluster(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ClusterDeployment]:
    """The run's Redis Cluster with AOF, fsync always, for every test of a durable Redis."""
    async with RedisCluster.started(
        tmp_path_factory.mktemp("durable-cluster"),
        node_timeout_ms=FAILURE_TIMEOUT_MS,
        settings=DURABLE_SETTINGS,
    ) as cluster:
        yield ClusterDeployment(cluster)


@pytest.fixture(scope="session")
async def durable_sentinel(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SentinelDeployment]:
    """The run's Sentinel deployment with AOF, fsync always, for every test of a durable Redis."""
    async with RedisSentinel.started(
        tmp_path_factory.mktemp("durable-sentinel"),
        down_after_ms=FAILURE_TIMEOUT_MS,
        settings=DURABLE_SETTINGS,
    ) as sentinel:
        yield SentinelDeployment(sentinel)


# Module-scoped: one module (test_lost_redis.py) uses them, and they need not run beside the durable ones.
@pytest.fixture(scope="module")
async def volatile_cluster(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ClusterDeployment]:
    """The module's Redis Cluster without persistence."""
    async with RedisCluster.started(
        tmp_path_factory.mktemp("volatile-cluster"),
        node_timeout_ms=FAILURE_TIMEOUT_MS,
        settings=VOLATILE_SETTINGS,
    ) as cluster:
        yield ClusterDeployment(cluster)


@pytest.fixture(scope="module")
async def volatile_sentinel(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SentinelDeployment]:
    """The module's Sentinel deployment without persistence."""
    async with RedisSentinel.started(
        tmp_path_factory.mktemp("volatile-sentinel"),
        down_after_ms=FAILURE_TIMEOUT_MS,
        settings=VOLATILE_SETTINGS,
    ) as sentinel:
        yield SentinelDeployment(sentinel)


# Sync, so that it may ask for the shared deployments' async fixtures by name (from a running event
# loop it could not set them up).
@pytest.fixture
def durable_deployment(topology: Topology, request: pytest.FixtureRequest, tmp_path: Path) -> PrivateRedis:
    """A standalone server of this test's own (not started yet), or the run's shared deployment."""
    if topology == "standalone":
        return Standalone(DurableRedis(tmp_path))
    deployment: PrivateRedis = request.getfixturevalue(f"durable_{topology}")
    return deployment


@pytest.fixture
def volatile_deployment(topology: Topology, request: pytest.FixtureRequest, tmp_path: Path) -> PrivateRedis:
    """A standalone server of this test's own (not started yet), or the module's shared deployment."""
    if topology == "standalone":
        return Standalone(VolatileRedis(tmp_path))
    deployment: PrivateRedis = request.getfixturevalue(f"volatile_{topology}")
    return deployment


@pytest.fixture
async def redis_server(durable_deployment: PrivateRedis) -> AsyncIterator[PrivateRedis]:
    """A Redis of each topology whose every acknowledged write survives a SIGKILL of its nodes,
    serving and taking writes again after the test, however it ended."""
    async with durable_deployment.for_one_test() as redis:
        yield redis


@pytest.fixture
async def volatile_redis(volatile_deployment: PrivateRedis) -> AsyncIterator[PrivateRedis]:
    """A Redis of each topology without persistence (killed and started again, it has lost
    everything), serving and taking writes again after the test, however it ended."""
    async with volatile_deployment.for_one_test() as redis:
        yield redis


@pytest.fixture
def keys() -> Keyspace:
    return unique_keyspace()


@pytest.fixture
async def store(redis_server: PrivateRedis, keys: Keyspace) -> AsyncIterator[RedisStore]:
    store = open_redis_store(redis_server.url, keys)
    yield store
    await store.close()
