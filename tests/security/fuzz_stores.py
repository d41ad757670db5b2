"""Fresh stores for a fuzzed server, removed afterwards: some hostile input only fails on one
backend (PostgreSQL text cannot hold NUL). PostgreSQL is TURNGATE_TEST_POSTGRES (default: user
postgres on 127.0.0.1:5432, trust auth) and Redis TURNGATE_TEST_REDIS, as for the contract tests."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from redis.asyncio import Redis

from tests.support.postgres import postgres_database, postgres_url
from tests.support.shared_redis import delete_prefix

REDIS_SERVER = os.environ.get("TURNGATE_TEST_REDIS", "redis://127.0.0.1:6379/0")
BACKENDS = ("sqlite", "postgresql", "redis")


@asynccontextmanager
async def fresh_database() -> AsyncIterator[str]:
    """The store URL of an empty database (the server migrates it when it starts)."""
    async with postgres_database("turngate_fuzz") as name:
        yield postgres_url(name)


@asynccontextmanager
async def backend(kind: str) -> AsyncIterator[dict[str, object]]:
    """Settings overrides for a server on a fresh store of `kind` (one of BACKENDS; sqlite: the
    default file in the server's temporary directory)."""
    if kind == "sqlite":
        yield {}
        return
    async with fresh_database() as url:
        if kind == "postgresql":
            yield {"store": url}
            return
        assert kind == "redis", f"no backend {kind!r}; one of {BACKENDS}"
        prefix = f"fz{uuid.uuid4().hex[:12]}"
        try:
            yield {"store": REDIS_SERVER, "ledger": url, "redis_prefix": prefix}
        finally:
            client = Redis.from_url(REDIS_SERVER)
            try:
                await delete_prefix(client, prefix)
            finally:
                await client.aclose()
