"""A Redis Cluster and a Sentinel setup shared by every suite of a test run (session fixtures):
suites keep apart by key prefix. Failover tests start topologies of their own."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.topologies.servers import RedisCluster, RedisSentinel

# No test fails the shared deployments over, and neither may a process stalled for a second by a
# busy machine: their nodes are called failing only after this long.
SHARED_FAILURE_TIMEOUT_MS = 10_000


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
