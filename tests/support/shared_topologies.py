"""A Redis Cluster and a Sentinel setup shared by every suite of a test run (session fixtures):
suites keep apart by key prefix. Failover tests start topologies of their own."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.topologies import RedisCluster, RedisSentinel

# No test fails the shared deployments over, and neither may a process stalled for a second by a
# busy machine: their nodes are called failing only after this long.
SHARED_FAILURE_TIMEOUT_MS = 10_000
# The topologies by the test ids that name them, and the fixture that holds each.
TOPOLOGIES = {"redis-cluster": "redis_cluster", "redis-sentinel": "redis_sentinel"}


@pytest.fixture(scope="session")
async def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RedisCluster]:
    async with RedisCluster.started(
        tmp_path_factory.mktemp("redis-cluster"), node_timeout_ms=SHARED_FAILURE_TIMEOUT_MS
    ) as cluster:
        yield cluster


@pytest.fixture(scope="session")
async def redis_sentinel(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RedisSentinel]:
    async with RedisSentinel.started(
        tmp_path_factory.mktemp("redis-sentinel"), down_after_ms=SHARED_FAILURE_TIMEOUT_MS
    ) as sentinel:
        yield sentinel


def shared_topology_url(request: pytest.FixtureRequest, topology: str) -> str:
    """The store URL of this run's shared deployment of `topology` (a key of TOPOLOGIES)."""
    deployment: RedisCluster | RedisSentinel = request.getfixturevalue(TOPOLOGIES[topology])
    return deployment.url
