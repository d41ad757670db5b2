"""Fresh stores for a fuzzed server, removed afterwards: some hostile input only fails on one
backend (PostgreSQL text cannot hold NUL). PostgreSQL is TURNGATE_TEST_POSTGRES (default: user
postgres on 127.0.0.1:5432, trust auth) and Redis TURNGATE_TEST_REDIS, as for the contract tests."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from redis.asyncio import Redis
from sqlalchemy import URL, make_url, text
from sqlalchemy.ext.asyncio import create_async_engine

POSTGRES_SERVER = os.environ.get("TURNGATE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_SERVER = os.environ.get("TURNGATE_TEST_REDIS", "redis://127.0.0.1:6379/0")
BACKENDS = ("sqlite", "postgresql", "redis")


def _url(database: str) -> URL:
    return make_url(POSTGRES_SERVER).set(drivername="postgresql+asyncpg", database=database)


async def _admin(statement: str) -> None:
    """CREATE/DROP DATABASE, which PostgreSQL refuses inside a transaction."""
    engine = create_async_engine(_url("postgres"), isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as connection:
            await connection.execute(text(statement))
    finally:
        await engine.dispose()


@asynccontextmanager
async def fresh_database() -> AsyncIterator[str]:
    """The store URL of an empty database (the server migrates it when it starts)."""
    name = f"turngate_fuzz_{uuid.uuid4().hex[:12]}"
    await _admin(f'CREATE DATABASE "{name}"')
    try:
        yield _url(name).render_as_string(hide_password=False)
    finally:
        await _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


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
                async for name in client.scan_iter(match=f"{prefix}:*", count=1_000):
                    await client.unlink(name)
            finally:
                await client.aclose()
