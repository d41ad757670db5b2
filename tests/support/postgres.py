"""The test PostgreSQL (TURNGATE_TEST_POSTGRES; default: user postgres on 127.0.0.1:5432, trust
auth): URLs of its databases, and databases made for a test and dropped after it."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import make_url, text
from sqlalchemy.ext.asyncio import create_async_engine

POSTGRES_SERVER = os.environ.get("TURNGATE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")


def postgres_url(database: str, *, port: int | None = None) -> str:
    """The asyncpg URL of `database` on the test PostgreSQL (reached through `port` if given)."""
    url = make_url(POSTGRES_SERVER).set(drivername="postgresql+asyncpg", database=database)
    if port is not None:
        url = url.set(port=port)
    return url.render_as_string(hide_password=False)


def postgres_address() -> tuple[str, int]:
    url = make_url(POSTGRES_SERVER)
    return url.host or "127.0.0.1", url.port or 5432


def unique_database(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


async def postgres_admin(statement: str) -> None:
    """Runs CREATE/DROP DATABASE, which PostgreSQL refuses inside a transaction."""
    engine = create_async_engine(postgres_url("postgres"), isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            await conn.execute(text(statement))
    finally:
        await engine.dispose()


@asynccontextmanager
async def postgres_database(prefix: str = "turngate_test") -> AsyncIterator[str]:
    """A new, empty (unmigrated) database; its name. Dropped on exit, whoever is connected."""
    name = unique_database(prefix)
    await postgres_admin(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        await postgres_admin(f'DROP DATABASE "{name}" WITH (FORCE)')
