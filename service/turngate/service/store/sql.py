"""The SQL store: SQLite (embedded default) or PostgreSQL, through SQLAlchemy async Core."""

from __future__ import annotations

import sqlite3
import time
from contextlib import AbstractContextManager
from functools import partial
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    ColumnElement,
    Select,
    and_,
    bindparam,
    cast,
    func,
    select,
    true,
    tuple_,
)
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql import Executable

from turngate.service.codec import dump_session, load_event_body, load_session
from turngate.service.core import Command, Decision, Event, Session, SessionKey
from turngate.service.ledger.directory import Directory
from turngate.service.ledger.reads import Ledger
from turngate.service.ledger.record import record, recording
from turngate.service.ports.store import Applied, BeforeWrite, Unrecorded
from turngate.service.sql.engine import (
    DEFAULT_URL,
    SqliteSynchronous,
    make_engine,
    sqlite_file_connector,
    to_the_end,
    unavailable_on_failure,
)
from turngate.service.sql.tables import dialect_insert, session_events, sessions
from turngate.service.store.cas import CompareAndSetStore, History
from turngate.service.store.sqlite import SqliteWriter, Statements

# The key's parameters are named apart from the columns, which an UPDATE would otherwise SET.
_SESSION = and_(
    sessions.c.project_id == bindparam("key_project_id"),
    sessions.c.session_id == bindparam("key_session_id"),
)
# The compare-and-set: its SET clause comes from the parameters (version, doc, deadline_at, …).
_UPDATE_IF_UNCHANGED = sessions.update().where(_SESSION, sessions.c.version == bindparam("key_version"))
# A retirement (R1), compared the same way: its history stays in the history tables.
_DELETE_IF_UNCHANGED = sessions.delete().where(_SESSION, sessions.c.version == bindparam("key_version"))
# The health probe's write, of a session no id can name (ids are never empty): it changes nothing.
_PROBE_KEY = SessionKey("", "")
_PROBE = sessions.update().where(_SESSION).values(version=sessions.c.version)
# The embedded store's read of a document and its version, on the writer thread's connection.
_SQLITE_READ = "SELECT doc, version FROM sessions WHERE project_id = ? AND session_id = ?"


class _Conflict(Exception):
    """Another writer changed the session between our read and our write."""


def _host_now() -> int:
    return time.time_ns() // 1000


def _store_clock(dialect: str) -> ColumnElement[int]:
    """The store's clock (I10) as SQL, in µs since the epoch.

    PostgreSQL's `clock_timestamp()`, so every replica reads one clock. SQLite lives inside this
    process, so its clock is the host's, bound when the statement runs.
    """
    if dialect == "postgresql":
        epoch = func.extract("epoch", func.clock_timestamp())
        return cast(func.floor(epoch * 1_000_000), BigInteger)
    return bindparam("host_now", callable_=_host_now, type_=BigInteger)


class SqlStore(CompareAndSetStore):
    """`Store` over one SQL database; the session row, its events and its ledger rows commit together.

    On PostgreSQL every apply reads, decides and writes on a pooled connection of its own. On a
    SQLite file, writes go through `writer` (store/sqlite.py): one thread, one connection, the
    commands queued together read, decided and written in one transaction; reads stay on the
    engine's pooled connections (WAL readers, which never wait for the writer).

    `ledger` reads the history (and what a Stop on a session no longer here recalls: R2);
    `directory`, which sessions and projects it holds.
    """

    def __init__(
        self, engine: AsyncEngine, *, before_write: BeforeWrite | None = None, max_attempts: int = 32
    ) -> None:
        self.ledger = Ledger(engine)
        self.directory = Directory(engine)
        super().__init__(before_write=before_write, max_attempts=max_attempts, recall=self.ledger.recall)
        self._engine = engine
        self._clock = _store_clock(engine.dialect.name)
        self._insert_session = dialect_insert(engine.dialect.name, sessions).on_conflict_do_nothing()
        # One round trip reads the document, its version and the clock, even for a new session.
        clock = select(self._clock.label("now")).subquery("clock")
        self._read = select(clock.c.now, sessions.c.doc, sessions.c.version).select_from(
            clock.outerjoin(sessions, _SESSION)
        )
        connect = sqlite_file_connector(engine)
        self.writer = None if connect is None else SqliteWriter(connect)
        self._statements = Statements()

    def _unavailable_on_failure(self) -> AbstractContextManager[None]:
        return unavailable_on_failure()

    async def _attempt(self, key: SessionKey, command: Command, history: History) -> Applied | None:
        """One read-decide-write; None when another writer changed the session first."""
        if self.writer is not None:
            return await self._attempt_on_sqlite(self.writer, key, command, history)
        async with self._engine.connect() as conn:
            row = (await conn.execute(self._read, _key(key))).one()
            # End the read: the write transaction must begin with its write (SQLite cannot
            # upgrade a read transaction that another writer has overtaken).
            await conn.commit()
            state = Session() if row.doc is None else load_session(row.doc)
            applied = self._decide(state, command, row.now, history)
            if not applied.decision.changed:
                return applied
            await self._before_write(key, command)
            try:
                async with conn.begin() as transaction:
                    await self._write(conn, key, row.version, applied.decision, row.now)
                    with unavailable_on_failure(sent=True):
                        await transaction.commit()
                        await self._after_write(key, command)
            except _Conflict:
                return None
        return applied

    async def _write(
        self, conn: AsyncConnection, key: SessionKey, version: int | None, decision: Decision, now: int
    ) -> None:
        statement, row = self._document_write(key, version, decision, now)
        written = await conn.execute(statement, row)
        if written.rowcount != 1:
            raise _Conflict
        await record(conn, key, decision.events)

    def _document_write(
        self, key: SessionKey, version: int | None, decision: Decision, now: int
    ) -> tuple[Executable, dict[str, Any]]:
        """The compare-and-set of the session row: an insert of version 1 that does nothing if the
        row exists, or an update (a delete, R1) of the version read; either writes one row or none."""
        if decision.removed:
            return _DELETE_IF_UNCHANGED, {**_key(key), "key_version": version}
        values = {
            "doc": dump_session(decision.state).decode(),
            "deadline_at": decision.state.deadline(),
            "turn_active": decision.state.turn_active,
            "idle_since": decision.state.idle_since(),
            "updated_at": now,
        }
        if version is None:
            row = {"project_id": key.project_id, "session_id": key.session_id, "version": 1, **values}
            return self._insert_session, row
        return _UPDATE_IF_UNCHANGED, {**_key(key), "key_version": version, "version": version + 1, **values}

    # --- SQLite: the work the writer thread runs, in its transaction --------------------------------

    async def _attempt_on_sqlite(
        self, writer: SqliteWriter, key: SessionKey, command: Command, history: History
    ) -> Applied | None:
        """Read, decide and write in one piece of a writer batch. With a `before_write` hook (tests),
        the decision is made in one batch and written in a later one, if the version is still the
        one decided on, so the hook runs between them with no lock held, as on PostgreSQL."""
        if self.before_write is None:
            written = await writer.run(partial(self._decide_and_write, key, command, history))
        else:
            applied, version = await writer.run(partial(self._decide_only, key, command, history))
            if not applied.decision.changed:
                return applied
            await self._before_write(key, command)
            written = await writer.run(partial(self._write_decided, key, version, applied))
        if written is not None and written.decision.changed:
            with unavailable_on_failure(sent=True):
                await self._after_write(key, command)
        return written

    def _read_sqlite(self, conn: sqlite3.Connection, key: SessionKey) -> tuple[Session, int | None]:
        row = conn.execute(_SQLITE_READ, (key.project_id, key.session_id)).fetchone()
        return (Session(), None) if row is None else (load_session(row[0]), row[1])

    def _decide_only(
        self, key: SessionKey, command: Command, history: History, conn: sqlite3.Connection
    ) -> tuple[Applied, int | None]:
        state, version = self._read_sqlite(conn, key)
        return self._decide(state, command, _host_now(), history), version

    def _decide_and_write(
        self, key: SessionKey, command: Command, history: History, conn: sqlite3.Connection
    ) -> Applied | None:
        """The clock is read as the writer decides (I10: SQLite's clock is the host's)."""
        applied, version = self._decide_only(key, command, history, conn)
        if applied.decision.changed and not self._write_sqlite(
            conn, key, version, applied.decision, applied.now
        ):
            return None  # read and written in one transaction: cannot happen; decided again if it did
        return applied

    def _write_decided(
        self, key: SessionKey, version: int | None, applied: Applied, conn: sqlite3.Connection
    ) -> Applied | None:
        return applied if self._write_sqlite(conn, key, version, applied.decision, applied.now) else None

    def _write_sqlite(
        self, conn: sqlite3.Connection, key: SessionKey, version: int | None, decision: Decision, now: int
    ) -> bool:
        """`_write` on the writer's connection: False (nothing written) when the version changed."""
        written = self._statements.execute(conn, *self._document_write(key, version, decision, now))
        if written.rowcount != 1:
            return False
        for statement, rows in recording("sqlite", [(key, decision.events)]):
            self._statements.execute_many(conn, statement, rows)
        return True

    def _probe_sqlite(self, conn: sqlite3.Connection) -> None:
        self._statements.execute(conn, _PROBE, _key(_PROBE_KEY))

    # --- reads ---------------------------------------------------------------------------------------

    async def load(self, key: SessionKey) -> Session:
        with unavailable_on_failure():
            async with self._engine.connect() as conn:
                doc = await conn.scalar(select(sessions.c.doc).where(_SESSION), _key(key))
        return Session() if doc is None else load_session(doc)

    async def unrecorded(self, key: SessionKey) -> Unrecorded:
        """The ledger commits with the document: it lacks nothing."""
        return Unrecorded(await self.load(key), ())

    async def events_after(self, key: SessionKey, after_seq: int, limit: int) -> list[Event]:
        """The session's epoch is the only one this store writes; naming it (the newest, an index
        lookup) lets the read seek straight to `after_seq` in the primary key."""
        of_session = (
            session_events.c.project_id == key.project_id,
            session_events.c.session_id == key.session_id,
        )
        epoch = select(func.max(session_events.c.epoch)).where(*of_session).scalar_subquery()
        query = (
            select(session_events.c.seq, session_events.c.time, session_events.c.body, session_events.c.epoch)
            .where(*of_session, session_events.c.epoch == epoch, session_events.c.seq > after_seq)
            .order_by(session_events.c.seq)
            .limit(limit)
        )
        with unavailable_on_failure():
            async with self._engine.connect() as conn:
                rows = await conn.execute(query)
        return [Event(row.seq, row.time, load_event_body(row.body), row.epoch) for row in rows]

    async def now(self) -> int:
        with unavailable_on_failure():
            async with self._engine.connect() as conn:
                return (await conn.execute(select(self._clock))).scalar_one()

    async def next_deadline(self) -> int | None:
        with unavailable_on_failure():
            async with self._engine.connect() as conn:
                deadline: int | None = await conn.scalar(select(func.min(sessions.c.deadline_at)))
        return deadline

    async def due(self, now: int, limit: int) -> list[SessionKey]:
        return await self._earliest(sessions.c.deadline_at, now, limit)

    async def retirable(self, before: int, limit: int) -> list[SessionKey]:
        return await self._earliest(sessions.c.idle_since, before, limit)

    async def _earliest(self, instant: Column[int], until: int, limit: int) -> list[SessionKey]:
        """Up to `limit` sessions whose `instant` (an indexed column) is at or before `until`,
        earliest first."""
        query = (
            select(sessions.c.project_id, sessions.c.session_id)
            .where(instant <= until)
            .order_by(instant)
            .limit(limit)
        )
        with unavailable_on_failure():
            async with self._engine.connect() as conn:
                rows = await conn.execute(query)
        return [SessionKey(row.project_id, row.session_id) for row in rows]

    async def active(
        self, project_id: str, after: tuple[int, str] | None, limit: int
    ) -> list[tuple[SessionKey, int]]:
        query = (
            select(sessions.c.session_id, sessions.c.deadline_at)
            .where(sessions.c.project_id == project_id, sessions.c.deadline_at.is_not(None))
            .order_by(sessions.c.deadline_at, sessions.c.session_id)
            .limit(limit)
        )
        if after is not None:
            query = query.where(tuple_(sessions.c.deadline_at, sessions.c.session_id) > tuple_(*after))
        with unavailable_on_failure():
            async with self._engine.connect() as conn:
                rows = await conn.execute(query)
        return [(SessionKey(project_id, row.session_id), row.deadline_at) for row in rows]

    async def count_active_in_project(self, project_id: str, bound: int) -> int:
        held = (
            select(sessions.c.session_id)
            .where(sessions.c.turn_active == true(), sessions.c.project_id == project_id)
            .limit(bound)
            .subquery()
        )
        return await self._count(select(func.count()).select_from(held))

    async def count_active(self) -> int:
        return await self._count(
            select(func.count()).select_from(sessions).where(sessions.c.turn_active == true())
        )

    async def _count(self, query: Select[int]) -> int:
        with unavailable_on_failure():
            async with self._engine.connect() as conn:
                return (await conn.execute(query)).scalar_one()

    async def ping(self) -> None:
        """A write transaction that changes nothing: an UPDATE of no row, which still needs the
        write lock (SQLite) or a writable database (not a PostgreSQL standby), and the schema."""
        with unavailable_on_failure():
            if self.writer is not None:
                # A piece of the writer's next batch: no second writer contending for the lock.
                await self.writer.run(self._probe_sqlite)
                return
            async with self._engine.connect() as conn:
                # Its own transaction, so SQLite's write lock is held inside the statement only.
                autocommit = await conn.execution_options(isolation_level="AUTOCOMMIT")
                await autocommit.execute(_PROBE, _key(_PROBE_KEY))

    async def close(self) -> None:
        """Commits what the writer has queued, then closes every connection, to the end even if
        cancelled meanwhile."""
        await to_the_end(self._close())

    async def _close(self) -> None:
        if self.writer is not None:
            await self.writer.close()
        await self._engine.dispose()


def _key(key: SessionKey) -> dict[str, str]:
    return {"key_project_id": key.project_id, "key_session_id": key.session_id}


def open_store(
    url: str = DEFAULT_URL,
    *,
    sqlite_synchronous: SqliteSynchronous = "NORMAL",
    before_write: BeforeWrite | None = None,
) -> SqlStore:
    """The store for `url` (sqlite or postgresql), whose schema `sql.migrate.migrate(url)` has made."""
    return SqlStore(make_engine(url, sqlite_synchronous=sqlite_synchronous), before_write=before_write)
