"""A server's readiness follows whether its Redis takes writes, not whether it answers: on each
topology, a Redis whose masters become read-only replicas (as after a failover), run out of
memory or lose their replicas turns health NOT_SERVING while PING still answers, and SERVING
again once it takes writes."""

from __future__ import annotations

from pathlib import Path

import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.faults.deployments import REFUSING_WRITES, PrivateRedis, Refusal, refusing_writes
from tests.support.processes import SERVICES, SERVING, wait_for_health
from tests.support.servers import running, settings_for

pytestmark = pytest.mark.redis

NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@pytest.mark.parametrize(("topology", "refusal"), REFUSING_WRITES)
async def test_readiness_is_not_serving_while_redis_answers_but_refuses_writes(
    redis_server: PrivateRedis, tmp_path: Path, refusal: Refusal
) -> None:
    settings = settings_for(
        str(tmp_path), store=redis_server.url, ledger=f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}"
    )
    async for _, client in running(settings):
        health = health_pb2_grpc.HealthStub(client.channel)
        await wait_for_health(health, SERVING)
        async with redis_server.client() as redis, refusing_writes(redis_server, refusal):
            for service in ("", *SERVICES):
                await wait_for_health(health, NOT_SERVING, service)
            assert await redis.ping()
        for service in ("", *SERVICES):
            await wait_for_health(health, SERVING, service)
