"""The schema comes from the Alembic migrations alone, and migrating an up-to-date database is a no-op."""

from __future__ import annotations

import asyncio
import sys

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncConnection

from turngate.service.ports.store import StoreUnavailable
from turngate.service.sql.engine import make_engine
from turngate.service.sql.migrate import alembic_config, is_migrated, migrate
from turngate.service.sql.tables import metadata


def head() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def differences(conn: Connection) -> list[object]:
    """What the database's schema lacks or has beyond the declared tables."""
    return list(compare_metadata(MigrationContext.configure(conn), metadata))


# The PostgreSQL catalogs that any DDL adds rows to or rewrites rows of.
SCHEMA_CATALOGS = ("pg_class", "pg_attribute", "pg_constraint", "pg_index", "pg_type")


async def write_marker(conn: AsyncConnection) -> object:
    """Changes whenever anything is committed in this database: SQLite's data_version; in
    PostgreSQL, the row count and newest row version (xmin) of the catalogs and of every table
    (not the next xid: xids are shared by the whole server, which other tests write to)."""
    if conn.dialect.name == "sqlite":
        return await conn.scalar(text("PRAGMA data_version"))
    tables = [*SCHEMA_CATALOGS, "alembic_version", *metadata.tables]
    return [
        (await conn.execute(text(f"SELECT count(*), max(xmin::text::bigint) FROM {table}"))).one()
        for table in tables
    ]


async def test_replicas_migrating_a_blank_database_at_once_build_the_schema_once(
    blank_database_url: str,
) -> None:
    # Replicas are processes: Alembic keeps the running migration in module globals, so the race
    # that the advisory lock (PostgreSQL) or BEGIN IMMEDIATE (SQLite) settles is between processes.
    replicas = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-m", "turngate.service.cli", "migrate", "--store", blank_database_url
        )
        for _ in range(4)
    ]
    assert [await replica.wait() for replica in replicas] == [0, 0, 0, 0]

    engine = make_engine(blank_database_url)
    async with engine.connect() as conn:
        versions = (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalars().all()
        assert await conn.run_sync(differences) == []
    await engine.dispose()
    assert versions == [head()]


async def test_migrate_twice_writes_nothing(database_url: str) -> None:
    engine = make_engine(database_url)
    async with engine.connect() as conn:
        before = await write_marker(conn)
        await migrate(database_url)
        after = await write_marker(conn)
        version = await conn.scalar(text("SELECT version_num FROM alembic_version"))
    await engine.dispose()

    assert after == before
    assert version == head()


async def test_migrations_build_exactly_the_declared_tables(database_url: str) -> None:
    engine = make_engine(database_url)
    async with engine.connect() as conn:
        assert await conn.run_sync(differences) == []
    await engine.dispose()


async def migrate_to(url: str, revision: str) -> None:
    """Upgrades the database at `url` to `revision`, as an older release would have."""

    def upgrade(connection: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.upgrade(config, revision)

    engine = make_engine(url)
    async with engine.begin() as conn:
        await conn.run_sync(upgrade)
    await engine.dispose()


async def test_a_database_is_migrated_at_the_newest_schema_or_at_one_a_newer_release_made(
    blank_database_url: str,
) -> None:
    assert not await is_migrated(blank_database_url)
    await migrate_to(blank_database_url, "0001")
    assert not await is_migrated(blank_database_url), "an older release's schema is behind"
    await migrate(blank_database_url)
    assert await is_migrated(blank_database_url)

    engine = make_engine(blank_database_url)
    async with engine.begin() as conn:
        await conn.execute(text("UPDATE alembic_version SET version_num = 'a-newer-release'"))
    await engine.dispose()
    assert await is_migrated(blank_database_url)


async def test_whether_an_unreachable_database_is_migrated_is_unknown() -> None:
    with pytest.raises(StoreUnavailable):
        await is_migrated("postgresql+asyncpg://postgres@127.0.0.1:1/turngate")
