"""Opening SQL databases the way the store and the ledger need them, and naming their failures."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, Literal, TypeVar
from weakref import WeakKeyDictionary

from sqlalchemy import event
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, ProgrammingError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from turngate.service.ports.store import StoreUnavailable, WriteOutcomeUnknown

SqliteSynchronous = Literal["NORMAL", "FULL"]
_T = TypeVar("_T")

DEFAULT_URL = "sqlite+aiosqlite:///./turngate.db"
# A waiting SQLite writer retries for this long before the store reports itself unavailable.
SQLITE_BUSY_TIMEOUT_MS = 5_000
# Without it an unreachable PostgreSQL host would hold a caller for asyncpg's default of 60 s.
POSTGRES_CONNECT_TIMEOUT_S = 5.0

# PostgreSQL's SQLSTATE for a relation that does not exist.
_UNDEFINED_TABLE = "42P01"
# SQLSTATEs of a connection lost (class 08) or shut down by the server (57P01-57P05): not an answer.
_CONNECTION_LOST = ("08", "57P")

_ASYNC_DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg"}
# The synchronous level each SQLite engine of make_engine configures its connections with.
_SQLITE_SYNCHRONOUS: WeakKeyDictionary[Engine, SqliteSynchronous] = WeakKeyDictionary()


def _async_url(url: str | URL) -> URL:
    """`url` with its async driver: plain `sqlite://` and `postgresql://` are accepted too."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend not in _ASYNC_DRIVERS:
        raise ValueError(f"unsupported database {parsed.drivername!r}: use sqlite or postgresql")
    return parsed.set(drivername=_ASYNC_DRIVERS[backend])


def make_engine(url: str | URL, *, sqlite_synchronous: SqliteSynchronous = "NORMAL") -> AsyncEngine:
    """An async engine for `url`.

    SQLite runs in WAL mode with `synchronous=NORMAL` (a killed process loses no committed write)
    or `FULL` (a power loss neither). PostgreSQL connections are pinged on checkout, so those a
    database restart broke are replaced instead of failing the next calls.
    """
    parsed = _async_url(url)
    if parsed.get_backend_name() == "postgresql":
        return create_async_engine(
            parsed, pool_pre_ping=True, connect_args={"timeout": POSTGRES_CONNECT_TIMEOUT_S}
        )
    if sqlite_synchronous not in ("NORMAL", "FULL"):
        raise ValueError(f"sqlite_synchronous must be NORMAL or FULL, not {sqlite_synchronous!r}")
    engine = create_async_engine(parsed)
    _SQLITE_SYNCHRONOUS[engine.sync_engine] = sqlite_synchronous

    @event.listens_for(engine.sync_engine, "connect")
    def _configure(dbapi_connection: Any, _record: Any) -> None:
        _configure_sqlite(dbapi_connection, sqlite_synchronous)

    return engine


async def to_the_end(work: Coroutine[Any, Any, _T]) -> _T:
    """Runs `work` (closing connections) to its end even when the caller is cancelled meanwhile,
    as a stopping server cancels its loops, and again while any is left: a close cut short logs an
    ERROR and leaves the connection's thread (aiosqlite) or socket behind. A cancellation that
    arrived meanwhile is raised once `work` has ended."""
    running = asyncio.ensure_future(work)
    cancelled = False
    while not running.done():
        try:
            await asyncio.shield(running)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    return running.result()


async def dispose(engine: AsyncEngine) -> None:
    """Closes every connection of `engine`, to the end (`to_the_end`)."""
    await to_the_end(engine.dispose())


def _configure_sqlite(dbapi_connection: Any, synchronous: SqliteSynchronous) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA synchronous={synchronous}")
    # Statement journals in memory: in a temporary file they cost an upsert in the writer's
    # savepoints about 40 µs, most of an admission's SQL (docs/decisions.md, "The embedded
    # store's writer").
    cursor.execute("PRAGMA temp_store=MEMORY")
    cursor.close()


def sqlite_file_connector(engine: AsyncEngine) -> Callable[[], sqlite3.Connection] | None:
    """How to open a plain `sqlite3` connection to the SQLite file of `engine`, configured as the
    engine's connections are (WAL, its synchronous level, the busy timeout), in autocommit mode
    (transactions are the caller's: BEGIN IMMEDIATE…COMMIT); for the embedded store's writer
    thread. None for another database, or an in-memory one (a second connection would open
    another database)."""
    if engine.dialect.name != "sqlite":
        return None
    args, kwargs = engine.dialect.create_connect_args(engine.url)
    target = str(args[0]) if args else ""
    if target in ("", ":memory:") or "mode=memory" in target:
        return None
    synchronous = _SQLITE_SYNCHRONOUS.get(engine.sync_engine, "NORMAL")
    options: dict[str, Any] = {**kwargs, "isolation_level": None, "check_same_thread": True}

    def connect() -> sqlite3.Connection:
        connection: sqlite3.Connection = sqlite3.connect(target, **options)
        try:
            _configure_sqlite(connection, synchronous)
        except BaseException:
            connection.close()
            raise
        return connection

    return connect


@contextmanager
def unavailable_on_failure(*, sent: bool = False) -> Iterator[None]:
    """Turns the database failing or being unreachable into StoreUnavailable; once a write was
    `sent` (its COMMIT), into WriteOutcomeUnknown, unless the database answered it with an error
    (it rolled the transaction back: nothing was applied).

    Errors that mean a bug or a bad schema (integrity, programming, data) propagate as they are,
    except a table that does not exist yet: the database has not been migrated (SQLite reports it
    as an OperationalError, which is unavailable like any other).
    """
    try:
        yield
    except ProgrammingError as exc:
        if getattr(exc.orig, "sqlstate", None) == _UNDEFINED_TABLE:
            raise StoreUnavailable(f"database not migrated yet: {str(exc.orig).splitlines()[0]}") from exc
        raise
    except (IntegrityError, DataError):
        raise
    except (DBAPIError, PoolTimeout, OSError, TimeoutError) as exc:
        kind = WriteOutcomeUnknown if sent and not _rolled_back(exc) else StoreUnavailable
        # SQLAlchemy appends the statement and a help link on later lines: keep the cause only.
        raise kind(f"database unavailable: {str(exc).splitlines()[0]}") from exc


def _rolled_back(error: BaseException) -> bool:
    """Whether the database answered with an error, so the transaction it ended was rolled back:
    PostgreSQL replied with an SQLSTATE over a connection still whole, other than a lost connection
    (class 08, which asyncpg reports itself) or a server shutting the connection down (57P); SQLite
    failed with anything but an I/O error (which may come after its WAL frames were written)."""
    if not isinstance(error, DBAPIError) or error.connection_invalidated:
        return False
    if isinstance(error.orig, sqlite3.Error):
        return (getattr(error.orig, "sqlite_errorcode", 0) & 0xFF) != sqlite3.SQLITE_IOERR
    sqlstate = getattr(error.orig, "sqlstate", None)
    return isinstance(sqlstate, str) and not sqlstate.startswith(_CONNECTION_LOST)
