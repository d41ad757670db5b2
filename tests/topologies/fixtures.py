"""A Redis Cluster and a Sentinel setup shared by every suite of a test run (session fixtures):
suites keep apart by key prefix. Failover tests start topologies of their own."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.topologies.servers import RedisCluster, RedisSentinel


@pytest.fixture(scope="session")
async def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RedisCluster]:
    async with RedisCluster.started(tmp_path_factory.mktemp("redis-cluster")) as cluster:
        yield cluster


@pytest.fixture(scope="session")
async def redis_sentinel(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RedisSentinel]:
    async with RedisSentinel.started(tmp_path_factory.mktemp("redis-sentinel")) as sentinel:
        yield sentinel
