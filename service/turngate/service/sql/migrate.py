"""Bringing a database's schema to the newest migration.

A blank database is built from the declared tables (`sql/tables.py`) and stamped at the newest
revision, as Alembic recommends for a new database; one at an older revision is upgraded by the
Alembic migrations (`migrations/`), configured in code. A test proves that both ways build the
same schema. Reading a database's revision needs no Alembic, so a process whose database is
blank or already this release's never imports it (docs/decisions.md, "The ledger and its
projector").

A new revision is written against a migrated database with
`alembic.command.revision(alembic_config(), "message", autogenerate=True)` run inside
`AsyncConnection.run_sync`, with the connection set as `config.attributes["connection"]`; its
file is named after its revision (`0011_what.py` holds revision "0011").
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from importlib.resources import files
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    Column,
    Connection,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    event,
    func,
    inspect,
    select,
)
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from turngate.service.sql.engine import dispose, make_engine, unavailable_on_failure
from turngate.service.sql.tables import metadata

if TYPE_CHECKING:
    from alembic.config import Config

log = logging.getLogger("turngate.schema")

# The PostgreSQL advisory lock that serializes migrations ("turngate" in ASCII).
_MIGRATION_LOCK = 0x7475726E67617465
_MIGRATIONS = files("turngate.service.sql") / "migrations"
# Every revision this release ships, oldest first: each migration's file is named after it.
REVISIONS = tuple(
    sorted(
        entry.name.partition("_")[0]
        for entry in (_MIGRATIONS / "versions").iterdir()
        if entry.name.endswith(".py") and entry.name[:1].isdigit()
    )
)
HEAD = REVISIONS[-1]
# Where Alembic records the revision a database is at, as Alembic itself creates it.
_VERSION = Table(
    "alembic_version",
    MetaData(),
    Column("version_num", String(32), nullable=False),
    PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
)


def alembic_config() -> Config:
    """Alembic's configuration for the migrations shipped in this package (no alembic.ini)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS))
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
    """Brings the schema to the newest, in the transaction begun; the revisions before and after."""
    before = _current_revisions(connection)
    if before == (HEAD,):
        return before, before
    if connection.dialect.name == "postgresql":
        # Replicas starting together on a new database would otherwise race to create the tables.
        connection.execute(select(func.pg_advisory_xact_lock(_MIGRATION_LOCK)))
        before = _current_revisions(connection)
    if not before and not set(metadata.tables) & set(inspect(connection).get_table_names()):
        _create(connection)
    else:
        from alembic import command

        config = alembic_config()
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
    return before, _current_revisions(connection)


def _create(connection: Connection) -> None:
    """Builds the newest schema on a blank database and stamps it with the newest revision."""
    metadata.create_all(connection)
    _VERSION.create(connection)
    connection.execute(_VERSION.insert().values(version_num=HEAD))


async def is_migrated(url: str) -> bool:
    """Whether the database at `url` has the newest schema this release knows, or one a newer
    release migrated it to; raises StoreUnavailable while it does not answer."""
    engine = make_engine(url)
    try:
        with unavailable_on_failure():
            async with engine.connect() as conn:
                current = set(await conn.run_sync(_current_revisions))
    finally:
        await dispose(engine)
    return bool(current) and (current == {HEAD} or not current <= set(REVISIONS))


def _current_revisions(connection: Connection) -> tuple[str, ...]:
    """The revisions the database is at (none: it has never been migrated)."""
    if not inspect(connection).has_table(_VERSION.name):
        return ()
    return tuple(connection.scalars(select(_VERSION.c.version_num)))
