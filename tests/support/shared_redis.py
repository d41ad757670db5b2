"""The shared Redis (TURNGATE_TEST_REDIS, default 127.0.0.1:6379, database 0), used by whoever
else runs tests: every test or module works under a key prefix of its own and deletes only that
(never FLUSHDB); without one, deselect its part with `-m "not redis"`."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from redis import Redis as SyncRedis

from turngate.service.store.redis.connection import Client as RedisClient
from turngate.service.store.redis.connection import connect as connect_redis
from turngate.service.store.redis.keys import Keyspace

REDIS_SERVER = os.environ.get("TURNGATE_TEST_REDIS", "redis://127.0.0.1:6379/0")
# Each Redis call's bound, as the service's default (Settings.redis_timeout).
REDIS_TIMEOUT_S = 2.0
# Enough buckets that a handful of sessions spread over several of them.
REDIS_BUCKETS = 8


def unique_prefix() -> str:
    return f"tgrep_{uuid.uuid4().hex[:12]}"


async def delete_prefix(client: RedisClient, prefix: str) -> None:
    """Deletes every key under `prefix`, and nothing else (the Redis may be shared)."""
    async for name in client.scan_iter(match=f"{prefix}:*", count=1_000):
        await client.unlink(name)


@asynccontextmanager
async def prefix_on_shared_redis() -> AsyncIterator[str]:
    """A key prefix of the caller's own on the shared Redis server (REDIS_SERVER), whose keys are
    deleted at the end of the block."""
    prefix = unique_prefix()
    try:
        yield prefix
    finally:
        redis = connect_redis(REDIS_SERVER, REDIS_TIMEOUT_S)
        await delete_prefix(redis, prefix)
        await redis.aclose()


def unique_keyspace() -> Keyspace:
    return Keyspace(prefix=f"tgtest_{uuid.uuid4().hex[:12]}", buckets=REDIS_BUCKETS)


def delete_keyspace(url: str, keys: Keyspace) -> None:
    """Deletes every key under the keyspace's prefix, and nothing else (from sync code)."""
    with SyncRedis.from_url(url) as client:
        for name in client.scan_iter(match=f"{keys.prefix}:*", count=1_000):
            client.unlink(name)
