"""Real databases for the store contract: every test runs on SQLite and on PostgreSQL.

Each backend is migrated once per run into a template, and every test gets a fresh copy: a
copied SQLite file, or a PostgreSQL database created from the template and dropped afterwards.
PostgreSQL is the server at TURNGATE_TEST_POSTGRES (default: user postgres on 127.0.0.1:5432,
trust auth); without one, deselect its half with `-m "not postgres"`.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import URL, make_url, text
from sqlalchemy.ext.asyncio import create_async_engine

from turngate.service.ledger import migrate
from turngate.service.store import SqlStore, open_store

POSTGRES_SERVER = os.environ.get("TURNGATE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")


def _postgres_url(database: str) -> URL:
    return make_url(POSTGRES_SERVER).set(drivername="postgresql+asyncpg", database=database)


def _postgres_admin(statement: str) -> None:
    """Runs CREATE/DROP DATABASE, which PostgreSQL refuses inside a transaction."""

    async def run() -> None:
        engine = create_async_engine(_postgres_url("postgres"), isolation_level="AUTOCOMMIT")
        try:
            async with engine.connect() as conn:
                await conn.execute(text(statement))
        finally:
            await engine.dispose()

    asyncio.run(run())


def _unique_name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "turngate.db"
    asyncio.run(migrate(f"sqlite+aiosqlite:///{path}"))
    return path


@pytest.fixture(scope="session")
def postgres_template() -> Iterator[str]:
    name = _unique_name("turngate_template")
    _postgres_admin(f'CREATE DATABASE "{name}"')
    try:
        asyncio.run(migrate(_postgres_url(name).render_as_string(hide_password=False)))
        yield name
    finally:
        _postgres_admin(f'DROP DATABASE "{name}" WITH (FORCE)')


@contextmanager
def _postgres_database(template: str = "template1") -> Iterator[str]:
    name = _unique_name("turngate_test")
    _postgres_admin(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    try:
        yield _postgres_url(name).render_as_string(hide_password=False)
    finally:
        _postgres_admin(f'DROP DATABASE "{name}" WITH (FORCE)')


BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A migrated, empty database of each backend, for this test alone."""
    if request.param == "sqlite":
        path = tmp_path / "turngate.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        yield f"sqlite+aiosqlite:///{path}"
        return
    with _postgres_database(request.getfixturevalue("postgres_template")) as url:
        yield url


@pytest.fixture(params=BACKENDS)
def blank_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database of each backend that has never been migrated."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'turngate.db'}"
        return
    with _postgres_database() as url:
        yield url


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[SqlStore]:
    store = open_store(database_url)
    yield store
    await store.close()


@pytest.fixture
def pass_store_time(store: SqlStore) -> Callable[[int], Awaitable[None]]:
    """Waits until the store's clock has passed `instant` (µs), so deadlines up to it are due."""

    async def wait(instant: int) -> None:
        await asyncio.sleep((instant - await store.now()) / 1_000_000 + 0.001)
        assert await store.now() > instant

    return wait
