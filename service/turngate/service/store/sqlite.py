"""The embedded store's writer: one thread, one plain `sqlite3` connection, commands group-committed.

SQLite has one writer per file. Connections of one process that all write take turns through
SQLite's busy handler, which sleeps between tries, and every statement through aiosqlite is a trip
to its thread and back. So the SQL store on a SQLite file writes through a `SqliteWriter`: callers
queue their work (a function of the connection: read, decide, write one command); a thread of its
own takes everything queued when it frees up (at most `BATCH_CAP` pieces), runs each piece inside
one transaction under a SAVEPOINT of its own, commits once and answers every caller, in queue
order. Two trips between threads per batch, whatever its size.

* A piece that raises is rolled back to its savepoint alone and its caller gets the error; the
  others commit. If SQLite ended the whole transaction itself (a full disk, an I/O error), or the
  BEGIN or the COMMIT fails, nothing of the batch was written and every caller gets the error;
  but a COMMIT that fails with an I/O error may have written its WAL frames first, so its callers
  are told the outcome is unknown (WriteOutcomeUnknown).
* Other connections to the file (another replica or store, `turngate migrate`): the transaction
  begins deferred, so the batch reads and decides, and its first write takes the write lock, at
  once when nobody else has it. When another connection has it, or wrote since the batch began to
  read, SQLite refuses that write at once (it never waits to upgrade a read transaction); the
  batch is rolled back and run again in `BEGIN IMMEDIATE`, which waits for the lock in the busy
  handler (5 s, as before) and holds it from the first read. Either way, what a piece writes is
  written over exactly what it read: another process never changes a row under a batch.
* A caller is answered only once the commit holding its write has returned. A committed piece
  stays committed whatever became of its caller (its future is simply left unset when cancelled).
* `close` lets the thread finish everything queued before it, then closes the connection; work
  queued after it fails with StoreUnavailable.

sqlite3's own errors are raised as SQLAlchemy's (`DBAPIError.instance`), so the store classifies
them as it does the engine's (engine.unavailable_on_failure).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import sqlite3
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import ClauseElement, Executable

from turngate.service.ports.store import StoreUnavailable
from turngate.service.sql.engine import unavailable_on_failure

# The most pieces one transaction takes: bounds how long the write lock is held at once (and so
# how long another process waits for it) and how much one failed commit fails.
BATCH_CAP = 64

_T = TypeVar("_T")
Work = Callable[[sqlite3.Connection], _T]


@dataclass(eq=False, slots=True)
class _Job(Generic[_T]):
    work: Work[_T]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[_T]
    # The caller's context (its current span), for the work run in the thread.
    context: contextvars.Context


class _Close:
    """Queued by `close`: the thread ends once everything queued before it is done."""


class _LockTaken(Exception):
    """A deferred transaction could not take the write lock: another connection has it."""


@dataclass(frozen=True, slots=True)
class _Outcome:
    value: Any = None
    error: BaseException | None = None


class SqliteWriter:
    """Runs work on one SQLite connection in one thread, group-committing what is queued together.

    `transactions` and `pieces` count what was committed (tests compare them).
    """

    def __init__(self, connect: Callable[[], sqlite3.Connection], *, batch_cap: int = BATCH_CAP) -> None:
        self._connect = connect
        self._batch_cap = batch_cap
        self._queue: queue.SimpleQueue[_Job[Any] | _Close] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._connection: sqlite3.Connection | None = None
        self.transactions = 0
        self.pieces = 0

    @property
    def queued(self) -> int:
        """How many pieces wait for the thread (approximately, as it takes them meanwhile)."""
        return self._queue.qsize()

    async def run(self, work: Work[_T]) -> _T:
        """What `work(connection)` returned inside a write transaction, once that transaction has
        committed. `work` may run twice (a batch that met another connection's write lock runs
        again, holding it): it must read what it needs through the connection."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[_T] = loop.create_future()
        with self._lock:
            if self._closed:
                raise StoreUnavailable("the store is closed")
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name="turngate-sqlite-writer", daemon=True
                )
                self._thread.start()
            self._queue.put(_Job(work, loop, future, contextvars.copy_context()))
        return await future

    async def close(self) -> None:
        """Finishes what is queued, then closes the connection; later work fails."""
        with self._lock:
            self._closed = True
            thread = self._thread
            if thread is not None:
                self._queue.put(_Close())
        if thread is not None:
            await asyncio.to_thread(thread.join)

    # --- the thread ------------------------------------------------------------------------------

    def _serve(self) -> None:
        closing = False
        while not closing:
            batch: list[_Job[Any]] = []
            item = self._queue.get()
            while True:
                if isinstance(item, _Close):
                    closing = True
                    break
                batch.append(item)
                if len(batch) >= self._batch_cap:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            if batch:
                try:
                    outcomes = self._run_batch(batch)
                except BaseException as error:  # a bug here must not leave callers waiting forever
                    if self._connection is not None:
                        _roll_back(self._connection)
                    outcomes = [_Outcome(error=error)] * len(batch)
                _deliver(batch, outcomes)
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _run_batch(self, batch: Sequence[_Job[Any]]) -> list[_Outcome]:
        try:
            conn = self._open()
        except sqlite3.Error as error:
            return [_Outcome(error=_wrapped(error)) for _ in batch]
        try:
            # Deferred: the batch reads and decides first, and takes the write lock at its first
            # write, at once when no other connection holds it (the usual case).
            return self._transaction(conn, batch, "BEGIN")
        except _LockTaken:
            # Another connection holds the write lock, or wrote since the batch began to read:
            # SQLite refuses the upgrade at once (no busy handler for it). Wait for the lock in the
            # busy handler, then read, decide and write everything again, holding it throughout.
            _roll_back(conn)
        return self._transaction(conn, batch, "BEGIN IMMEDIATE")

    def _transaction(
        self, conn: sqlite3.Connection, batch: Sequence[_Job[Any]], begin: str
    ) -> list[_Outcome]:
        """The batch in one transaction begun with `begin`; raises _LockTaken when a deferred one
        could not take the write lock."""
        deferred = begin == "BEGIN"
        committing = False
        try:
            conn.execute(begin)
        except sqlite3.Error as error:
            return [_Outcome(error=_wrapped(error)) for _ in batch]
        try:
            outcomes = [self._run_piece(conn, job, deferred) for job in batch]
            if not conn.in_transaction:
                # SQLite rolled the whole transaction back (it does on a full disk or an I/O
                # error): whatever the pieces before the failing one did is gone too.
                failure = next(o.error for o in reversed(outcomes) if o.error is not None)
                gone = f"rolled back with its batch by SQLite: {failure}"
                return [
                    o if o.error is not None else _Outcome(error=StoreUnavailable(gone)) for o in outcomes
                ]
            committing = True
            conn.execute("COMMIT")
        except sqlite3.Error as error:
            _roll_back(conn)
            if deferred and _busy(error):
                raise _LockTaken from error
            return [_Outcome(error=_commit_failed(error) if committing else _wrapped(error)) for _ in batch]
        self.transactions += 1
        self.pieces += sum(o.error is None for o in outcomes)
        return outcomes

    def _run_piece(self, conn: sqlite3.Connection, job: _Job[Any], deferred: bool) -> _Outcome:
        """One job under a savepoint of its own: rolled back alone when it raises (unless it met
        another connection's write lock in a deferred transaction: then the whole batch waits)."""
        if not conn.in_transaction:
            return _Outcome(error=StoreUnavailable("the batch's transaction was rolled back by SQLite"))
        conn.execute("SAVEPOINT piece")
        try:
            value = job.context.run(job.work, conn)
        except Exception as error:
            if deferred and isinstance(error, sqlite3.Error) and _busy(error):
                raise
            if conn.in_transaction:
                conn.execute("ROLLBACK TO piece")
                conn.execute("RELEASE piece")
            return _Outcome(error=_wrapped(error) if isinstance(error, sqlite3.Error) else error)
        conn.execute("RELEASE piece")
        return _Outcome(value)

    def _open(self) -> sqlite3.Connection:
        if self._connection is None:
            self._connection = self._connect()
        return self._connection


def _roll_back(conn: sqlite3.Connection) -> None:
    # Nothing was committed either way; the next BEGIN says whether the connection is usable.
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def _busy(error: sqlite3.Error) -> bool:
    """SQLITE_BUSY, or an extended code of it (BUSY_SNAPSHOT: another connection wrote since this
    transaction began to read)."""
    return (getattr(error, "sqlite_errorcode", 0) & 0xFF) == sqlite3.SQLITE_BUSY


def _wrapped(error: sqlite3.Error) -> BaseException:
    """sqlite3's error as SQLAlchemy raises it (OperationalError, IntegrityError…); one per
    caller, so that no two callers raise (and add their tracebacks to) the same exception."""
    return DBAPIError.instance(None, None, error, sqlite3.Error)


def _commit_failed(error: sqlite3.Error) -> BaseException:
    """A failed COMMIT as each caller gets it: classified as the engine's failures are once a write
    was sent (engine.unavailable_on_failure): an I/O error may come after the WAL frames were
    written, so whether the batch took effect is unknown; any other error rolled it back."""
    try:
        with unavailable_on_failure(sent=True):
            raise _wrapped(error)
    except StoreUnavailable as failure:
        return failure


def _deliver(batch: Sequence[_Job[Any]], outcomes: Sequence[_Outcome]) -> None:
    """Hands each caller its outcome on its own event loop, in queue order."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[_Job[Any], _Outcome]]] = {}
    for job, outcome in zip(batch, outcomes, strict=True):
        by_loop.setdefault(job.loop, []).append((job, outcome))
    for loop, answers in by_loop.items():
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting any more
            loop.call_soon_threadsafe(_answer, answers)


def _answer(answers: Sequence[tuple[_Job[Any], _Outcome]]) -> None:
    for job, outcome in answers:
        if job.future.done():
            continue  # cancelled: what it wrote, if anything, stays committed
        if outcome.error is not None:
            job.future.set_exception(outcome.error)
        else:
            job.future.set_result(outcome.value)


# --- SQLAlchemy statements as plain sqlite3 SQL ---------------------------------------------------

_DIALECT = SQLiteDialect_pysqlite(paramstyle="named")


@dataclass(frozen=True, slots=True)
class Compiled:
    """A statement compiled for sqlite3 (named parameters), with the values of the parameters it
    binds itself (the constants in its clauses)."""

    sql: str
    constants: Mapping[str, Any]

    def params(self, row: Mapping[str, Any]) -> Mapping[str, Any]:
        return {**self.constants, **row} if self.constants else row


class Statements:
    """Compiles SQLAlchemy statements for one set of parameter names each, once."""

    def __init__(self) -> None:
        self._compiled: dict[tuple[int, tuple[str, ...]], tuple[Executable, Compiled]] = {}

    def get(self, statement: Executable, keys: Sequence[str]) -> Compiled:
        cache_key = (id(statement), tuple(keys))
        found = self._compiled.get(cache_key)
        if found is None:
            compiled = cast(ClauseElement, statement).compile(dialect=_DIALECT, column_keys=list(keys))
            constants = {name: value for name, value in compiled.params.items() if name not in keys}
            # The statement is kept with it, so its id is never another's.
            found = self._compiled[cache_key] = (statement, Compiled(compiled.string, constants))
        return found[1]

    def execute(
        self, conn: sqlite3.Connection, statement: Executable, row: Mapping[str, Any]
    ) -> sqlite3.Cursor:
        compiled = self.get(statement, tuple(row))
        return conn.execute(compiled.sql, compiled.params(row))

    def execute_many(
        self, conn: sqlite3.Connection, statement: Executable, rows: Sequence[Mapping[str, Any]]
    ) -> None:
        if not rows:
            return
        compiled = self.get(statement, tuple(rows[0]))
        conn.executemany(compiled.sql, [compiled.params(row) for row in rows])
