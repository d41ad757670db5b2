"""Per test module and Redis topology (one server, a Redis Cluster, Sentinel): a Redis key prefix
and a PostgreSQL database of its own, and (for the modules that ask for them) three `turngate
serve` replicas on them, started once."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from tests.support.postgres import postgres_database, postgres_url
from tests.support.processes import Spawned
from tests.support.replicas import Deployment, assert_no_tracebacks, new_session, replicas
from tests.support.servers import Client
from tests.support.shared_redis import REDIS_SERVER, REDIS_TIMEOUT_S, delete_prefix, unique_prefix
from tests.support.shared_topologies import TOPOLOGIES, shared_topology_url
from turngate.service.store.redis.connection import Client as RedisClient
from turngate.service.store.redis.connection import connect
from turngate.v1 import turngate_pb2 as pb

REPLICAS = 3


@pytest.fixture(scope="module", params=["redis", *TOPOLOGIES])
def redis_url(request: pytest.FixtureRequest) -> str:
    """The shared Redis server, or this run's Redis Cluster or Sentinel setup."""
    if request.param in TOPOLOGIES:
        return shared_topology_url(request, request.param)
    return REDIS_SERVER


@pytest.fixture(scope="module")
async def redis(redis_url: str) -> AsyncIterator[RedisClient]:
    """A client of the deployment's Redis, for reading what the replicas wrote."""
    client = connect(redis_url, REDIS_TIMEOUT_S)
    yield client
    await client.aclose()


@pytest.fixture(scope="module")
async def deployment(
    request: pytest.FixtureRequest, redis_url: str, redis: RedisClient
) -> AsyncIterator[Deployment]:
    """The Redis under a prefix of the module's own, and a new PostgreSQL database; sessions idle
    for the module's IDLE_RETENTION seconds leave Redis, if it names one."""
    prefix = unique_prefix()
    idle_retention = getattr(request.module, "IDLE_RETENTION", None)
    try:
        async with postgres_database("turngate_replicas") as database:
            yield Deployment(redis_url, prefix, postgres_url(database), idle_retention=idle_retention)
    finally:
        await delete_prefix(redis, prefix)


@pytest.fixture
async def ledger_database() -> AsyncIterator[str]:
    """A new PostgreSQL database of the test's own, never migrated (for a deployment of the test's
    own, whose replicas, or the test, migrate it)."""
    async with postgres_database("turngate_replicas") as name:
        yield name


@pytest.fixture(scope="module")
async def ledger(deployment: Deployment) -> AsyncIterator[AsyncEngine]:
    """The deployment's ledger database, for reading what the projectors wrote."""
    engine = create_async_engine(deployment.ledger_url)
    yield engine
    await engine.dispose()


@pytest.fixture(scope="module")
async def servers(
    deployment: Deployment, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[list[Spawned]]:
    """The replicas, started once; afterwards, none of them may have logged a traceback (a
    background loop that died would otherwise pass unnoticed until its replica is needed)."""
    tmp = tmp_path_factory.mktemp("replicas")
    async with replicas(deployment, tmp, REPLICAS) as spawned:
        yield spawned
    assert_no_tracebacks(tmp)


@pytest.fixture
def clients(servers: list[Spawned]) -> list[Client]:
    """One client per replica: A, B, C."""
    return [server.client for server in servers]


@pytest.fixture
def session() -> pb.SessionRef:
    """A session no other test touches."""
    return new_session()
