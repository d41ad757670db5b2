"""The schema: the Alembic migrations and the declared tables build the same one, a blank database
is built from the tables, an older one upgraded by the migrations, and migrating an up-to-date
database is a no-op."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.resources import files
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Table, TableClause, column, insert, inspect, table, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tests.contract.released import ADMITTED_AT, RELEASED_SCHEMA, migrate_url_to
from tests.support.postgres import postgres_database, postgres_url
from turngate.service.codec import dump_session
from turngate.service.core import (
    AdmissionMode,
    Admit,
    Admitted,
    Complete,
    Event,
    Session,
    SessionKey,
    SteerStatus,
    SteerTurn,
    TurnOutcome,
    decide,
)
from turngate.service.ledger.record import Write, ledger_write, recording
from turngate.service.ports.store import StoreUnavailable
from turngate.service.sql.engine import make_engine
from turngate.service.sql.migrate import HEAD, REVISIONS, alembic_config, is_migrated, migrate
from turngate.service.sql.tables import metadata, session_activity, sessions, turns
from turngate.service.store.sql import open_store


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


async def test_migrations_build_exactly_the_declared_tables(blank_database_url: str) -> None:
    await migrate_url_to(blank_database_url, "head")

    engine = make_engine(blank_database_url)
    async with engine.connect() as conn:
        assert await conn.run_sync(differences) == []
    await engine.dispose()


def schema_of(conn: Connection) -> dict[str, object]:
    """Everything the database says of each table: columns (by name: a column a migration added
    comes last, and nothing reads columns by position), keys, constraints, and each index as the
    database itself writes it out."""
    inspector = inspect(conn)
    if conn.dialect.name == "sqlite":
        query = "SELECT tbl_name, name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
    else:
        query = "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'"
    index_text = sorted(tuple(row) for row in conn.execute(text(query)))
    return {
        "indexes as written": index_text,
        **{
            name: {
                "columns": sorted(
                    (c["name"], str(c["type"]), c["nullable"], c.get("default"), c.get("autoincrement"))
                    for c in inspector.get_columns(name)
                ),
                "primary key": inspector.get_pk_constraint(name),
                "indexes": sorted(
                    (
                        index["name"],
                        tuple(index["column_names"]),
                        index["unique"],
                        sorted(
                            (option, str(value)) for option, value in index.get("dialect_options", {}).items()
                        ),
                    )
                    for index in inspector.get_indexes(name)
                ),
                "foreign keys": inspector.get_foreign_keys(name),
                "unique": inspector.get_unique_constraints(name),
                "checks": inspector.get_check_constraints(name),
            }
            for name in sorted(inspector.get_table_names())
        },
    }


async def schema_at(url: str) -> dict[str, object]:
    engine = make_engine(url)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(schema_of)
    finally:
        await engine.dispose()


async def test_a_blank_database_is_built_from_the_tables_with_the_schema_the_migrations_build(
    blank_database_url: str, tmp_path: Path
) -> None:
    async with another_blank_database(blank_database_url, tmp_path) as built:
        await migrate(built)
        await migrate_url_to(blank_database_url, "head")

        assert await schema_at(built) == await schema_at(blank_database_url)
        assert await is_migrated(built)
        # The migrations start from the stamp: none of them runs again (it would fail on its tables).
        await migrate_url_to(built, "head")


@asynccontextmanager
async def another_blank_database(like: str, tmp_path: Path) -> AsyncIterator[str]:
    """A second blank database of the backend of `like`."""
    if like.startswith("sqlite"):
        yield f"sqlite+aiosqlite:///{tmp_path / 'built.db'}"
        return
    async with postgres_database() as name:
        yield postgres_url(name)


def test_the_revisions_are_the_migrations_chain_each_in_a_file_named_after_it() -> None:
    script = ScriptDirectory.from_config(alembic_config())
    chain = tuple(revision.revision for revision in reversed(list(script.walk_revisions())))
    assert chain == REVISIONS
    assert head() == HEAD
    names = [
        entry.name
        for entry in (files("turngate.service.sql") / "migrations" / "versions").iterdir()
        if entry.name.endswith(".py")
    ]
    assert sorted(name.partition("_")[0] for name in names) == sorted(chain)


def test_a_process_that_builds_or_finds_this_releases_schema_never_imports_alembic(
    blank_database_url: str,
) -> None:
    """Alembic (with Mako, which loads Pygments' lexers where Pygments is installed) is a tenth
    of a second of every start: only a database at an older revision needs it."""
    program = f"""
import asyncio, sys
import turngate.service.server
from turngate.service.sql.migrate import is_migrated, migrate
asyncio.run(migrate({blank_database_url!r}))
asyncio.run(migrate({blank_database_url!r}))
assert asyncio.run(is_migrated({blank_database_url!r}))
print(sorted(name for name in sys.modules if name.partition(".")[0] in ("alembic", "mako")))
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


async def test_a_database_is_migrated_at_the_newest_schema_or_at_one_a_newer_release_made(
    blank_database_url: str,
) -> None:
    assert not await is_migrated(blank_database_url)
    await migrate_url_to(blank_database_url, "0001")
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


async def test_downgrading_to_the_last_release_and_upgrading_again_builds_the_declared_tables(
    database_url: str,
) -> None:
    def downgrade(connection: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.downgrade(config, RELEASED_SCHEMA)

    engine = make_engine(database_url)
    async with engine.begin() as conn:
        await conn.run_sync(downgrade)
    await engine.dispose()
    await migrate(database_url)

    engine = make_engine(database_url)
    async with engine.connect() as conn:
        assert await conn.run_sync(differences) == []
    await engine.dispose()


# 0005 and 0006 (the turn queue): what was written before them reads as it did and goes on.
KEY = SessionKey("project", "upgraded")
SECOND = 1_000_000


def columns_of(revision_table: Table, *left_out: str) -> TableClause:
    """`revision_table` as an earlier revision had it, without the columns added since."""
    return table(
        revision_table.name, *(column(c.name) for c in revision_table.columns if c.name not in left_out)
    )


async def record_before_0010(conn: AsyncConnection, key: SessionKey, events: list[Event]) -> None:
    """The rows `record()` writes for `events`, but the session's activity (0010 added it)."""
    for statement, rows in recording(conn.dialect.name, [(key, events)]):
        if getattr(statement, "table", None) is not session_activity:
            await conn.execute(statement, rows)


def a_completed_turn() -> tuple[int, list[Event]]:
    """Turn t1 admitted and completed a second later: its generation and events."""
    admitted = decide(Session(), Admit("t1", "runner", 20 * SECOND), ADMITTED_AT)
    assert isinstance(admitted.reply, Admitted)
    generation = admitted.reply.generation
    completed = decide(
        admitted.state, Complete("t1", generation, TurnOutcome.COMPLETED), ADMITTED_AT + SECOND
    )
    return generation, [*admitted.events, *completed.events]


async def test_0005_turns_recorded_before_it_never_waited_and_turns_that_wait_are_recorded_after_it(
    blank_database_url: str,
) -> None:
    generation, events = a_completed_turn()
    await migrate_url_to(blank_database_url, "0004")
    engine = make_engine(blank_database_url)
    async with engine.begin() as conn:
        for event in events:  # the turn row as 0004 wrote it: no queued_at
            write = ledger_write(KEY, event)
            assert write is not None
            kind, row = write
            if kind is Write.ADMIT:
                del row["queued_at"]
                await conn.execute(insert(columns_of(turns, "queued_at")).values(**row))
            else:
                await conn.execute(
                    update(turns)
                    .where(turns.c.session_id == KEY.session_id, turns.c.generation == generation)
                    .values(**{k: v for k, v in row.items() if not k.startswith("key_")})
                )
    await engine.dispose()

    await migrate(blank_database_url)

    store = open_store(blank_database_url)
    try:
        before = await store.ledger.get_turn(KEY, "t1")
        assert before is not None
        assert (before.outcome, before.queued_at, before.waited) == (TurnOutcome.COMPLETED, None, None)
        running = await store.apply(KEY, Admit("t2", "runner", 20 * SECOND))
        assert isinstance(running.reply, Admitted)
        queued = await store.apply(KEY, Admit("t3", "runner", 20 * SECOND, mode=AdmissionMode.ENQUEUE))
        promoted = await store.apply(KEY, Complete("t2", running.reply.generation, TurnOutcome.COMPLETED))
        after = await store.ledger.get_turn(KEY, "t3")
        assert after is not None
        assert (after.queued_at, after.admitted_at) == (queued.events[0].time, promoted.events[-1].time)
        assert after.waited == after.admitted_at - queued.events[0].time
    finally:
        await store.close()


async def test_0006_sessions_written_before_it_count_as_active_while_a_turn_holds_them(
    blank_database_url: str,
) -> None:
    held = decide(Session(), Admit("t1", "runner", 20 * SECOND), ADMITTED_AT)
    assert isinstance(held.reply, Admitted)
    idle = decide(
        held.state, Complete("t1", held.reply.generation, TurnOutcome.COMPLETED), ADMITTED_AT + SECOND
    )
    await migrate_url_to(blank_database_url, "0005")
    engine = make_engine(blank_database_url)
    async with engine.begin() as conn:
        for session_id, state in (("held", held.state), ("idle", idle.state)):
            await conn.execute(  # the session row as 0005 wrote it: no turn_active
                insert(columns_of(sessions, "turn_active")).values(
                    project_id=KEY.project_id,
                    session_id=session_id,
                    version=1,
                    doc=dump_session(state).decode(),
                    deadline_at=state.deadline(),
                    updated_at=ADMITTED_AT,
                )
            )
    await engine.dispose()

    await migrate(blank_database_url)

    store = open_store(blank_database_url)
    try:
        assert await store.count_active() == 1
        assert await store.count_active_in_project(KEY.project_id, 10) == 1
        await store.apply(
            SessionKey(KEY.project_id, "held"), Complete("t1", held.reply.generation, TurnOutcome.COMPLETED)
        )
        assert await store.count_active() == 0
    finally:
        await store.close()


async def test_0009_turns_recorded_before_it_have_no_steers_and_steers_are_recorded_after_it(
    blank_database_url: str,
) -> None:
    _, events = a_completed_turn()
    await migrate_url_to(blank_database_url, "0008")
    engine = make_engine(blank_database_url)
    async with engine.begin() as conn:  # no steer events then: 0008's tables take these writes
        await record_before_0010(conn, KEY, events)
    await engine.dispose()

    await migrate(blank_database_url)

    store = open_store(blank_database_url)
    try:
        before = await store.ledger.get_turn(KEY, "t1")
        assert before is not None
        assert (before.outcome, before.steers) == (TurnOutcome.COMPLETED, ())
        running = await store.apply(KEY, Admit("t2", "runner", 20 * SECOND))
        assert isinstance(running.reply, Admitted)
        await store.apply(KEY, SteerTurn("t2", "s1", "go left"))
        after = await store.ledger.get_turn(KEY, "t2")
        assert after is not None
        assert [(s.steer_id, s.status, s.content) for s in after.steers] == [
            ("s1", SteerStatus.PENDING, "go left")
        ]
    finally:
        await store.close()


async def test_0010_sessions_recorded_before_it_are_listed_by_their_newest_event_with_their_last_settled_turn(
    blank_database_url: str,
) -> None:
    generation, completed = a_completed_turn()
    running = decide(Session(), Admit("t9", "runner", 20 * SECOND), ADMITTED_AT + 5 * SECOND)
    busy = SessionKey(KEY.project_id, "busy")
    await migrate_url_to(blank_database_url, "0009")
    engine = make_engine(blank_database_url)
    async with engine.begin() as conn:
        await record_before_0010(conn, KEY, completed)
        await record_before_0010(conn, busy, list(running.events))
    await engine.dispose()

    await migrate(blank_database_url)

    store = open_store(blank_database_url)
    try:
        listed = await store.directory.sessions(KEY.project_id, None, 10)
        assert [(a.key, a.last_activity_at) for a in listed] == [
            (busy, running.events[-1].time),
            (KEY, completed[-1].time),
        ]
        settled = [a.last_settled for a in listed]
        assert settled[0] is None
        assert settled[1] is not None
        assert (settled[1].turn_id, settled[1].generation, settled[1].outcome) == (
            "t1",
            generation,
            TurnOutcome.COMPLETED,
        )
        assert [p.project_id for p in await store.directory.projects(None, 10, None)] == [KEY.project_id]
    finally:
        await store.close()


async def test_migrations_of_two_databases_at_once_in_one_process_each_complete(tmp_path: Path) -> None:
    """Servers sharing a process (or a store and its ledger) migrate at once: Alembic keeps the
    running migration in module globals, so they take turns instead of clobbering them."""
    urls = [f"sqlite+aiosqlite:///{tmp_path / f'db{i}.sqlite'}" for i in range(4)]
    # At an older revision, so that each migration is Alembic's (a blank one is built without it).
    for url in urls:
        await migrate_url_to(url, RELEASED_SCHEMA)

    await asyncio.gather(*map(migrate, urls))

    assert all([await is_migrated(url) for url in urls])
