"""A server's readiness follows whether its Redis takes writes, not whether it answers: a Redis
that becomes a read-only replica (as after a failover) or runs out of memory turns health
NOT_SERVING while PING still answers, and SERVING again once it takes writes."""

from __future__ import annotations

from pathlib import Path

import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from redis.asyncio import Redis

from tests.e2e.processes import SERVICES, SERVING, wait_for_health
from tests.e2e.servers import running, settings_for
from tests.faults.servers import DurableRedis
from tests.faults.test_redis_faults import REFUSING_WRITES, RedisCall

pytestmark = pytest.mark.redis

NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@pytest.mark.parametrize(("refuse", "accept"), REFUSING_WRITES.values(), ids=REFUSING_WRITES.keys())
async def test_readiness_is_not_serving_while_redis_answers_but_refuses_writes(
    redis_server: DurableRedis, tmp_path: Path, refuse: RedisCall, accept: RedisCall
) -> None:
    settings = settings_for(
        str(tmp_path), store=redis_server.url, ledger=f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}"
    )
    async for _, client in running(settings):
        health = health_pb2_grpc.HealthStub(client.channel)
        await wait_for_health(health, SERVING)
        async with Redis.from_url(redis_server.url) as redis:
            await refuse(redis)
            for service in ("", *SERVICES):
                await wait_for_health(health, NOT_SERVING, service)
            assert await redis.ping()
            await accept(redis)
        for service in ("", *SERVICES):
            await wait_for_health(health, SERVING, service)
