"""The embedded store's writer (store/sqlite.py): commands queued together are read, decided and
written in one SQLite transaction, each answered once that transaction has committed; one that
fails is rolled back alone; cancelled callers, closing the store, a `before_write` hook, and other
writers of the same file (a second store, another process) leave nothing half-written.

Each test holds the writer thread inside a piece of its own while it queues commands, so which
commands share a transaction is known, not left to timing.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import shutil
import sqlite3
import sys
import textwrap
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.exc import IntegrityError

from tests.support.commands import KEY, LEASE, admit, open_call
from tests.support.waiting import eventually
from turngate.service.core import Admit, Admitted, Command, Decision, Session, SessionKey, TurnAdmitted
from turngate.service.ports.store import Applied, StoreUnavailable, WriteOutcomeUnknown
from turngate.service.store.cas import History
from turngate.service.store.sql import SqlStore, open_store
from turngate.service.store.sqlite import BATCH_CAP, SqliteWriter

HOLD_TIMEOUT_S = 10.0
QueuedBehind = Callable[[int], Awaitable[None]]


@pytest.fixture
def sqlite_url(sqlite_template: Path, tmp_path: Path) -> str:
    path = tmp_path / "turngate.db"
    shutil.copyfile(sqlite_template, path)
    return f"sqlite+aiosqlite:///{path}"


@pytest.fixture
async def store(sqlite_url: str) -> AsyncIterator[SqlStore]:
    store = open_store(sqlite_url)
    yield store
    await store.close()


def writer_of(store: SqlStore) -> SqliteWriter:
    assert store.writer is not None, "a store on a SQLite file writes through its writer thread"
    return store.writer


@asynccontextmanager
async def writer_held(store: SqlStore) -> AsyncIterator[QueuedBehind]:
    """Holds the writer thread inside a piece (alone in its batch) until the block ends; yields a
    wait until `n` pieces are queued behind it."""
    writer = writer_of(store)
    entered, release = threading.Event(), threading.Event()

    def hold(_conn: sqlite3.Connection) -> None:
        entered.set()
        release.wait(HOLD_TIMEOUT_S)

    held = asyncio.ensure_future(writer.run(hold))
    assert await asyncio.to_thread(entered.wait, HOLD_TIMEOUT_S)

    async def queued_behind(n: int) -> None:
        await eventually(lambda: writer.queued >= n)

    try:
        yield queued_behind
    finally:
        release.set()
        await held


def admit_command(turn_id: str = "t1") -> Admit:
    return Admit(turn_id, "runner", LEASE)


async def test_commands_queued_together_commit_in_one_transaction_per_batch_cap_each_answered_with_its_write(
    store: SqlStore,
) -> None:
    writer = writer_of(store)
    keys = [SessionKey("p", f"s{i}") for i in range(BATCH_CAP + 10)]
    async with writer_held(store) as queued_behind:
        transactions = writer.transactions
        callers = [asyncio.ensure_future(store.apply(key, admit_command())) for key in keys]
        await queued_behind(len(keys))
        await asyncio.sleep(0.05)
        assert not any(caller.done() for caller in callers), "nobody is answered before the commit"
    decisions = await asyncio.gather(*callers)

    # The holder's transaction, then BATCH_CAP commands in one, then the 10 left in another.
    assert writer.transactions - transactions == 3
    for key, decision in zip(keys, decisions, strict=True):
        assert isinstance(decision.reply, Admitted)
        assert await store.load(key) == decision.state
        assert await store.events_after(key, 0, 10) == list(decision.events)
        assert [turn.turn_id for turn in await store.ledger.list_turns(key, None, 10)] == ["t1"]


async def test_commands_on_one_session_in_one_batch_each_decide_on_the_write_before_them(
    store: SqlStore,
) -> None:
    writer = writer_of(store)
    lease = await admit(store, KEY, "t1")
    async with writer_held(store) as queued_behind:
        transactions = writer.transactions
        callers = [
            asyncio.ensure_future(store.apply(KEY, open_call("t1", lease.generation, f"c{i}")))
            for i in range(50)
        ]
        await queued_behind(50)
    decisions = await asyncio.gather(*callers)

    assert writer.transactions - transactions == 2, "the holder's transaction, then the 50 commands' one"
    # In queue order: each decided on the document its predecessor wrote, and says so.
    assert [[e.seq for e in d.events] for d in decisions] == [[i + 2] for i in range(50)]
    for i, decision in enumerate(decisions):
        assert decision.state.active is not None
        assert list(decision.state.active.tool_calls) == [f"c{j}" for j in range(i + 1)]
    assert await store.load(KEY) == decisions[-1].state
    logged = await store.events_after(KEY, 1, 100)
    assert logged == [event for decision in decisions for event in decision.events]


async def _fail_ledger_writes_of(store: SqlStore, session_id: str) -> None:
    """A trigger refuses the ledger's turn row of `session_id`: the ledger write raises an
    IntegrityError, as a constraint would."""
    writer = writer_of(store)

    def create(conn: sqlite3.Connection) -> None:
        conn.execute(
            f"CREATE TRIGGER refuse_{session_id} BEFORE INSERT ON turns WHEN NEW.session_id = '{session_id}' "
            "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
        )

    await writer.run(create)


def _decide_failing_for(
    store: SqlStore, session_id: str
) -> Callable[[Session, Command, int, History], Applied]:
    decide = store._decide

    def failing(state: Session, command: Command, now: int, history: History) -> Applied:
        if isinstance(command, Admit) and command.runner_id == session_id:
            raise RuntimeError("a bug in decide")
        return decide(state, command, now, history)

    return failing


@pytest.mark.parametrize("failure", ["integrity-error-in-the-ledger-write", "bug-raising-in-decide"])
async def test_a_command_failing_inside_a_batch_gets_its_error_and_rolls_back_alone(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    writer = writer_of(store)
    bad = SessionKey("p", "bad")
    error: type[Exception]
    if failure == "integrity-error-in-the-ledger-write":
        await _fail_ledger_writes_of(store, "bad")
        error = IntegrityError
    else:
        monkeypatch.setattr(store, "_decide", _decide_failing_for(store, "bad-runner"))
        error = RuntimeError
    good = [SessionKey("p", f"good{i}") for i in range(10)]
    async with writer_held(store) as queued_behind:
        transactions = writer.transactions
        before = [asyncio.ensure_future(store.apply(key, admit_command())) for key in good[:5]]
        failing = asyncio.ensure_future(store.apply(bad, Admit("t1", "bad-runner", LEASE)))
        after = [asyncio.ensure_future(store.apply(key, admit_command())) for key in good[5:]]
        await queued_behind(11)
    decisions = await asyncio.gather(*before, *after)

    with pytest.raises(error):
        await failing
    assert writer.transactions - transactions == 2, "the others committed in the batch the failure was in"
    for key, decision in zip(good, decisions, strict=True):
        assert isinstance(decision.reply, Admitted)
        assert await store.load(key) == decision.state
        assert [turn.turn_id for turn in await store.ledger.list_turns(key, None, 10)] == ["t1"]
    assert await store.load(bad) == Session()
    assert await store.events_after(bad, 0, 10) == []
    assert await store.ledger.list_turns(bad, None, 10) == []


async def test_a_failure_that_ends_the_whole_transaction_fails_every_command_of_the_batch(
    store: SqlStore,
) -> None:
    """As SQLite does on a full disk or an I/O error: the commands before the failing one are gone
    with the transaction, so their callers are told so, never answered as if written."""
    writer = writer_of(store)

    def end_the_transaction(conn: sqlite3.Connection) -> None:
        conn.execute("ROLLBACK")
        raise sqlite3.OperationalError("database or disk is full")

    keys = [SessionKey("p", f"s{i}") for i in range(6)]
    async with writer_held(store) as queued_behind:
        transactions = writer.transactions
        before = [asyncio.ensure_future(store.apply(key, admit_command())) for key in keys[:3]]
        failing = asyncio.ensure_future(writer.run(end_the_transaction))
        after = [asyncio.ensure_future(store.apply(key, admit_command())) for key in keys[3:]]
        await queued_behind(7)
    outcomes = await asyncio.gather(*before, failing, *after, return_exceptions=True)

    assert writer.transactions - transactions == 1, "the holder's alone"
    assert all(isinstance(outcome, StoreUnavailable) for outcome in outcomes[:3] + outcomes[4:]), outcomes
    assert "disk is full" in str(outcomes[3])
    for key in keys:
        assert await store.load(key) == Session()
        assert await store.events_after(key, 0, 10) == []


async def test_a_caller_cancelled_while_its_command_is_queued_still_has_it_committed_and_notified(
    store: SqlStore,
) -> None:
    committed: list[Decision] = []
    store.add_listener(lambda _key, decision: committed.append(decision))
    async with writer_held(store) as queued_behind:
        caller = asyncio.ensure_future(store.apply(KEY, admit_command()))
        await queued_behind(1)
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
    await eventually(lambda: len(committed) == 1)

    assert [e.body.kind for e in await store.events_after(KEY, 0, 10)] == ["turn_admitted"]
    assert await store.load(KEY) == committed[0].state


async def test_a_cancelled_callers_queued_command_that_then_fails_is_consumed_never_left_never_retrieved(
    store: SqlStore, caplog: pytest.LogCaptureFixture
) -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    handler = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        await _fail_ledger_writes_of(store, "bad")
        with caplog.at_level(logging.DEBUG, logger="turngate.service.store.cas"):
            async with writer_held(store) as queued_behind:
                caller = asyncio.ensure_future(store.apply(SessionKey("p", "bad"), admit_command()))
                await queued_behind(1)
                caller.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await caller
            await eventually(lambda: any("caller was cancelled" in r.getMessage() for r in caplog.records))
        del caller
        gc.collect()
    finally:
        loop.set_exception_handler(handler)

    assert reported == [], "the whole context says which task, and what it raised"
    assert await store.load(SessionKey("p", "bad")) == Session()


async def test_closing_the_store_commits_what_is_queued_then_refuses_more(sqlite_url: str) -> None:
    store = open_store(sqlite_url)
    keys = [SessionKey("p", f"s{i}") for i in range(10)]
    async with writer_held(store) as queued_behind:
        callers = [asyncio.ensure_future(store.apply(key, admit_command())) for key in keys]
        await queued_behind(len(keys))
        closing = asyncio.ensure_future(store.close())
        await asyncio.sleep(0.05)
        assert not closing.done(), "close waits for the queued commands"
    decisions = await asyncio.gather(*callers)
    await closing

    with pytest.raises(StoreUnavailable, match="closed"):
        await store.apply(KEY, admit_command())
    reopened = open_store(sqlite_url)
    try:
        for key, decision in zip(keys, decisions, strict=True):
            assert await reopened.load(key) == decision.state
    finally:
        await reopened.close()


async def test_a_before_write_hook_holding_one_command_holds_no_lock_and_no_other_session(
    store: SqlStore,
) -> None:
    """The hook runs between a decision and its write with the writer free: another session's
    command commits meanwhile, and the held one commits after, on the version it decided on."""
    decided, release = asyncio.Event(), asyncio.Event()
    held_key, other_key = SessionKey("p", "held"), SessionKey("p", "other")

    async def hold(key: SessionKey, _command: Command) -> None:
        if key == held_key:
            decided.set()
            await release.wait()

    store.before_write = hold
    held = asyncio.ensure_future(store.apply(held_key, admit_command()))
    await decided.wait()
    other = await asyncio.wait_for(store.apply(other_key, admit_command()), HOLD_TIMEOUT_S)
    assert not held.done()
    release.set()
    decision = await held

    assert await store.load(other_key) == other.state
    assert await store.load(held_key) == decision.state
    assert [e.seq for e in await store.events_after(held_key, 0, 10)] == [1]


async def test_the_clock_is_the_host_clock_read_as_the_writer_decides(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    frozen_ns = time.time_ns() + 3_600 * 10**9  # an hour ahead: no real clock reads this
    monkeypatch.setattr(time, "time_ns", lambda: frozen_ns)

    decision = await store.apply(KEY, admit_command())

    [admitted] = [e.body for e in decision.events]
    assert isinstance(admitted, TurnAdmitted)
    assert admitted.admitted_at == frozen_ns // 1_000
    assert admitted.lease_expires_at == frozen_ns // 1_000 + LEASE


async def test_a_batch_meeting_another_connections_write_lock_waits_for_it_then_decides_again_holding_it(
    store: SqlStore, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    decisions: list[int] = []
    decide = store._decide

    def counted(state: Session, command: Command, now: int, history: History) -> Applied:
        decisions.append(now)
        return decide(state, command, now, history)

    monkeypatch.setattr(store, "_decide", counted)
    path = sqlite_url.removeprefix("sqlite+aiosqlite:///")
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        caller = asyncio.ensure_future(store.apply(KEY, admit_command()))
        await eventually(lambda: len(decisions) == 1)  # decided, then refused the write lock
        await asyncio.sleep(0.1)
        assert not caller.done()
        other.execute("ROLLBACK")
        decision = await caller
    finally:
        other.close()

    assert len(decisions) == 2, "decided again once holding the lock"
    assert decision.events[0].time == decisions[1]
    assert await store.load(KEY) == decision.state


async def test_two_stores_on_one_file_writing_one_session_at_once_lose_nothing(sqlite_url: str) -> None:
    """Two replicas in one process: two writer threads, two connections, one file."""
    first, second = open_store(sqlite_url), open_store(sqlite_url)
    try:
        lease = await admit(first, KEY, "t1")
        await asyncio.gather(
            *(
                store.apply(KEY, open_call("t1", lease.generation, f"{name}{i}"))
                for i in range(30)
                for name, store in (("first", first), ("second", second))
            )
        )
        state = await second.load(KEY)
        turn = await first.ledger.get_turn(KEY, "t1")
    finally:
        await first.close()
        await second.close()

    expected = {f"{name}{i}" for i in range(30) for name in ("first", "second")}
    assert state.active is not None
    assert set(state.active.tool_calls) == expected
    assert state.head == 61
    assert turn is not None
    assert {call.call_id for call in turn.tool_calls} == expected


_OTHER_PROCESS = textwrap.dedent(
    """
    import asyncio, sys
    from turngate.service.core import RecordToolCall, SessionKey, ToolCallStatus
    from turngate.service.store.sql import open_store

    async def main(url, generation, rounds, per_round):
        store = open_store(url)
        key = SessionKey("project", "session")
        for r in range(rounds):
            calls = [f"theirs{r}-{i}" for i in range(per_round)]
            await asyncio.gather(*(
                store.apply(key, RecordToolCall("t1", generation, call, "tool", ToolCallStatus.OPEN))
                for call in calls
            ))
        await store.close()

    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])))
    """
)


async def test_another_process_writing_the_same_session_at_once_loses_nothing_and_leaves_no_gap(
    store: SqlStore, sqlite_url: str
) -> None:
    rounds, per_round = 8, 16
    lease = await admit(store, KEY, "t1")
    other = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _OTHER_PROCESS, sqlite_url, str(lease.generation), str(rounds), str(per_round)
    )
    for r in range(rounds):
        await asyncio.gather(
            *(store.apply(KEY, open_call("t1", lease.generation, f"ours{r}-{i}")) for i in range(per_round))
        )
    assert await asyncio.wait_for(other.wait(), 60) == 0

    names = {f"{side}{r}-{i}" for side in ("ours", "theirs") for r in range(rounds) for i in range(per_round)}
    state = await store.load(KEY)
    assert state.active is not None
    assert set(state.active.tool_calls) == names
    assert [e.seq for e in await store.events_after(KEY, 0, 1_000)] == list(range(1, len(names) + 2))
    turn = await store.ledger.get_turn(KEY, "t1")
    assert turn is not None
    assert {call.call_id for call in turn.tool_calls} == names


async def test_only_a_sqlite_file_gets_a_writer_thread(database_url: str) -> None:
    """PostgreSQL keeps its pooled connections, each apply on one of its own."""
    store = open_store(database_url)
    try:
        assert (store.writer is None) == database_url.startswith("postgresql")
    finally:
        await store.close()


class _FailingCommit(sqlite3.Connection):
    """A connection whose COMMITs fail with `code` (as SQLite's own would), without committing."""

    code = sqlite3.SQLITE_IOERR

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql == "COMMIT":
            failure = sqlite3.OperationalError("the commit failed")
            failure.sqlite_errorcode = self.code
            raise failure
        return super().execute(sql, *args)


@pytest.mark.parametrize(
    ("code", "unknown"),
    [(sqlite3.SQLITE_IOERR, True), (sqlite3.SQLITE_IOERR | (3 << 8), True), (sqlite3.SQLITE_FULL, False)],
    ids=["io-error", "io-error-write", "disk-full"],
)
async def test_a_commit_that_fails_with_an_io_error_is_of_unknown_outcome_any_other_rolled_back(
    tmp_path: Path, code: int, unknown: bool
) -> None:
    """A COMMIT may fail with an I/O error after its WAL frames were written (a crash then
    recovers them): every caller of the batch is told its outcome is unknown. Any other COMMIT
    failure rolled the batch back: not applied."""
    path = tmp_path / "commit.db"

    def connect() -> sqlite3.Connection:
        connection = sqlite3.connect(path, isolation_level=None, factory=_FailingCommit)
        assert isinstance(connection, _FailingCommit)
        connection.code = code
        return connection

    writer = SqliteWriter(connect)
    try:
        with pytest.raises(StoreUnavailable) as failed:
            await writer.run(lambda conn: conn.execute("CREATE TABLE t (x)"))
    finally:
        await writer.close()

    assert isinstance(failed.value, WriteOutcomeUnknown) is unknown, failed.value
    assert "the commit failed" in str(failed.value)
