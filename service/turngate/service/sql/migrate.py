"""Bringing a database's schema to the newest migration, with Alembic configured in code.

A new revision is written against a migrated database with
`alembic.command.revision(alembic_config(), "message", autogenerate=True)` run inside
`AsyncConnection.run_sync`, with the connection set as `config.attributes["connection"]`.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from importlib.resources import files
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, event, func, select
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from turngate.service.sql.engine import dispose, make_engine, unavailable_on_failure

log = logging.getLogger("turngate.schema")

# The PostgreSQL advisory lock that serializes migrations ("turngate" in ASCII).
_MIGRATION_LOCK = 0x7475726E67617465


def alembic_config() -> Config:
    """Alembic's configuration for the migrations shipped in this package (no alembic.ini)."""
    config = Config()
    config.set_main_option("script_location", str(files("turngate.service.sql") / "migrations"))
    return config


async def migrate(url: str) -> None:
    """Upgrades the database at `url` to the newest schema; at the newest already, writes nothing.

    A migration is one transaction, and concurrent migrations (replicas starting together) run
    one after the other. Alembic keeps the running migration in module globals, so one process
    runs one migration at a time: two on one event loop (servers sharing a process, a store's and
    a ledger's) would interleave at their awaits and clobber each other's.
    """
    async with _one_migration_at_a_time():
        engine = make_engine(url)
        if engine.dialect.name == "sqlite":
            _begin_immediate(engine)
        try:
            with unavailable_on_failure():
                async with engine.begin() as conn:
                    before, after = await conn.run_sync(_upgrade)
        finally:
            await dispose(engine)
    where = make_url(url).render_as_string(hide_password=True)
    if before == after:
        log.info("schema at version %s: %s", _version(after), where)
    else:
        log.info("schema at version %s (migrated from %s): %s", _version(after), _version(before), where)


def _version(revisions: tuple[str, ...]) -> str:
    return ", ".join(revisions) or "none"


# The migration lock of each event loop (an asyncio lock belongs to one loop).
_migrating: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()


def _one_migration_at_a_time() -> asyncio.Lock:
    return _migrating.setdefault(asyncio.get_running_loop(), asyncio.Lock())


def _begin_immediate(engine: AsyncEngine) -> None:
    """Makes SQLite run DDL inside the transaction (pysqlite would autocommit each statement) and
    take the write lock when it begins."""

    @event.listens_for(engine.sync_engine, "connect")
    def _no_implicit_transactions(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None

    @event.listens_for(engine.sync_engine, "begin")
    def _begin(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def _upgrade(connection: Connection) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Upgrades to the newest schema; the revisions before and after."""
    if connection.dialect.name == "postgresql":
        # Replicas starting together on a new database would otherwise race to create the tables.
        connection.execute(select(func.pg_advisory_xact_lock(_MIGRATION_LOCK)))
    before = _current_revisions(connection)
    config = alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, "head")
    return before, _current_revisions(connection)


async def is_migrated(url: str) -> bool:
    """Whether the database at `url` has the newest schema this release knows, or one a newer
    release migrated it to; raises StoreUnavailable while it does not answer."""
    engine = make_engine(url)
    try:
        with unavailable_on_failure():
            async with engine.connect() as conn:
                current = await conn.run_sync(_current_revisions)
    finally:
        await dispose(engine)
    script = ScriptDirectory.from_config(alembic_config())
    known = {revision.revision for revision in script.walk_revisions()}
    return bool(current) and (set(current) == set(script.get_heads()) or not set(current) <= known)


def _current_revisions(connection: Connection) -> tuple[str, ...]:
    return MigrationContext.configure(connection).get_current_heads()
