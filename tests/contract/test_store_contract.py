"""The Store contract (ports/store.py) on every backend: atomic compare-and-set, events, clock.

The store-level tests run on the in-memory store, SQLite, PostgreSQL and Redis (`any_store`);
those about SQL specifics (ledger rows written with the state, SQLite pragmas, opening by URL) on
SQL alone.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from tests.support.commands import KEY, LEASE, SECOND, admit, enqueue, open_call, stop
from tests.support.stores import ContractStore, OpenStore, open_redis_store, open_sql_store, wait_past
from turngate.service.core import (
    Admit,
    Admitted,
    Cancelled,
    Command,
    Complete,
    CompleteReply,
    Decision,
    ErrorReason,
    Expire,
    Heartbeat,
    QueueAction,
    Queued,
    Refusal,
    ResumeQueue,
    SessionKey,
    SettledBy,
    TurnAdmitted,
    TurnDequeued,
    TurnOutcome,
    TurnSettled,
)
from turngate.service.core.model import Session
from turngate.service.ports.store import Store, StoreContention, StoreUnavailable
from turngate.service.sql.engine import make_engine, sqlite_file_connector
from turngate.service.sql.migrate import migrate
from turngate.service.store.redis import store as redis_store
from turngate.service.store.redis.keys import Keyspace
from turngate.service.store.sql import SqlStore, open_store
from turngate.service.watchdog import Watchdog


async def admit_at_once(store: Store, turns: int) -> list[Decision]:
    """`turns` different turns ask for KEY at the same time."""
    return await asyncio.gather(*(store.apply(KEY, Admit(f"t{i}", "runner", LEASE)) for i in range(turns)))


async def settle_in_a_race(store: ContractStore) -> tuple[list[Command], list[Decision]]:
    """Two sweeps and the runner's late Complete all decide on the expired turn t1 before any of
    them writes. Returns the decisions that reached the write, and the three decisions."""
    lease = await admit(store, KEY, "t1", lease=1_000)
    await wait_past(store, lease.lease_expires_at)
    all_have_decided = asyncio.Barrier(3)
    writes: list[Command] = []

    async def write_together(_key: SessionKey, command: Command) -> None:
        writes.append(command)
        if len(writes) <= 3:
            await all_have_decided.wait()

    store.before_write = write_together
    decisions = await asyncio.gather(
        store.apply(KEY, Expire()),
        store.apply(KEY, Expire()),
        store.apply(KEY, Complete("t1", lease.generation, TurnOutcome.COMPLETED)),
    )
    return writes, list(decisions)


async def open_call_overtaken_once(
    store: ContractStore, other_replica: Store
) -> tuple[list[Command], Decision]:
    """Opens tool call "ours" on t1 while `other_replica` opens "theirs" between our read and
    our write. Returns the decisions that reached the write, and ours."""
    lease = await admit(store, KEY, "t1")
    writes: list[Command] = []

    async def overtaken_once(_key: SessionKey, command: Command) -> None:
        writes.append(command)
        if len(writes) == 1:
            await other_replica.apply(KEY, open_call("t1", lease.generation, "theirs"))

    store.before_write = overtaken_once
    return writes, await store.apply(KEY, open_call("t1", lease.generation, "ours"))


async def test_i1_200_concurrent_admits_admit_exactly_one(any_store: ContractStore) -> None:
    decisions = await admit_at_once(any_store, 200)

    admitted = [d.reply for d in decisions if isinstance(d.reply, Admitted)]
    refused = [d.reply for d in decisions if isinstance(d.reply, Refusal)]
    assert len(admitted) == 1
    winner = admitted[0].turn_id
    assert len(refused) == 199
    assert {(r.reason, r.active_turn_id) for r in refused} == {(ErrorReason.SESSION_TURN_IN_USE, winner)}
    assert [(e.seq, e.turn_id) for e in await any_store.events_after(KEY, 0, 1000)] == [(1, winner)]
    state = await any_store.load(KEY)
    assert state.active is not None
    assert state.active.turn_id == winner


async def test_i9_50_concurrent_writers_lose_no_update_and_leave_no_gap(any_store: ContractStore) -> None:
    lease = await admit(any_store, KEY, "t1")

    decisions = await asyncio.gather(
        *(any_store.apply(KEY, open_call("t1", lease.generation, f"c{i}")) for i in range(50))
    )

    state = await any_store.load(KEY)
    assert state.active is not None
    assert set(state.active.tool_calls) == {f"c{i}" for i in range(50)}
    assert sorted(e.seq for d in decisions for e in d.events) == list(range(2, 52))
    assert [e.seq for e in await any_store.events_after(KEY, 0, 1000)] == list(range(1, 52))
    assert state.head == 51


async def test_i9_events_gapless_and_state_change_together(any_store: ContractStore) -> None:
    lease = await admit(any_store, KEY, "t1")
    commands: list[Command] = [
        open_call("t1", lease.generation, "c1"),
        Heartbeat("t1", lease.generation),
        stop("t1"),
        Complete("t1", lease.generation, TurnOutcome.CANCELLED),
    ]
    for command in commands:
        decision = await any_store.apply(KEY, command)
        state = await any_store.load(KEY)
        events = await any_store.events_after(KEY, 0, 100)
        assert state == decision.state
        assert [e.seq for e in events] == list(range(1, state.head + 1))
        assert tuple(events[len(events) - len(decision.events) :]) == decision.events

    state = await any_store.load(KEY)
    events = await any_store.events_after(KEY, 0, 100)
    assert await any_store.events_after(KEY, 2, 2) == events[2:4]
    assert await any_store.events_after(KEY, state.head, 10) == []


async def test_i6_two_sweeps_racing_late_complete_settle_once(
    any_store: ContractStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On Redis, a decision held at the barrier longer than the clock window (a loaded machine) is
    # refused by the script and taken again: more writes than the race, which is what is tested.
    monkeypatch.setattr(redis_store, "BEHIND_LIMIT_US", 60 * SECOND)
    writes, decisions = await settle_in_a_race(any_store)

    assert len(writes) == 3, "the losers re-decided on fresh state and found nothing to write"
    assert sum(d.changed for d in decisions) == 1
    settled = [e.body for e in await any_store.events_after(KEY, 0, 100) if isinstance(e.body, TurnSettled)]
    assert len(settled) == 1
    assert (settled[0].turn.outcome, settled[0].turn.settled_by) == (TurnOutcome.LOST, SettledBy.WATCHDOG)
    assert decisions[2].reply == CompleteReply(settled[0].turn, recorded=False)


async def test_cas_conflict_injected_between_read_and_write_retries_without_lost_update(
    any_store: ContractStore, open_any_store: OpenStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On Redis, a decision whose trip to the script outlasts the clock's bound (a loaded machine)
    # is refused and taken again: more writes than the one conflict, which is what is tested.
    monkeypatch.setattr(redis_store, "BEHIND_LIMIT_US", 60 * SECOND)
    writes, decision = await open_call_overtaken_once(any_store, open_any_store())

    assert len(writes) == 2, "decided, lost the race, decided again"
    assert [e.seq for e in decision.events] == [3]
    state = await any_store.load(KEY)
    assert state.active is not None
    assert list(state.active.tool_calls) == ["theirs", "ours"]
    assert [e.seq for e in await any_store.events_after(KEY, 0, 100)] == [1, 2, 3]


async def test_cas_gives_up_with_store_contention_after_bounded_attempts(open_any_store: OpenStore) -> None:
    store, other_replica = open_any_store(max_attempts=3), open_any_store()
    lease = await admit(store, KEY, "t1")
    attempts: list[Command] = []

    async def always_overtaken(_key: SessionKey, command: Command) -> None:
        attempts.append(command)
        await other_replica.apply(KEY, Heartbeat("t1", lease.generation))

    store.before_write = always_overtaken
    with pytest.raises(StoreContention):
        await store.apply(KEY, open_call("t1", lease.generation, "ours"))

    assert len(attempts) == 3
    state = await store.load(KEY)
    assert state.active is not None
    assert dict(state.active.tool_calls) == {}
    assert [e.seq for e in await store.events_after(KEY, 0, 100)] == [1]


async def test_unchanged_decision_writes_nothing_and_notifies_no_one(any_store: ContractStore) -> None:
    committed: list[Decision] = []
    any_store.add_listener(lambda _key, decision: committed.append(decision))
    first = await any_store.apply(KEY, Admit("t1", "runner", LEASE))
    writes: list[Command] = []

    async def count(_key: SessionKey, command: Command) -> None:
        writes.append(command)

    any_store.before_write = count
    replay = await any_store.apply(KEY, Admit("t1", "runner", LEASE))

    assert isinstance(replay.reply, Admitted)
    assert replay.reply.replayed
    assert not replay.changed
    assert writes == []
    assert committed == [first]
    assert await any_store.load(KEY) == first.state


async def test_listeners_run_after_commit_and_a_failing_one_is_contained(
    any_store: ContractStore, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(_key: SessionKey, _decision: Decision) -> None:
        raise RuntimeError("listener bug")

    seen: list[tuple[SessionKey, Decision]] = []
    any_store.add_listener(broken)
    any_store.add_listener(lambda key, decision: seen.append((key, decision)))

    decision = await any_store.apply(KEY, Admit("t1", "runner", LEASE))

    assert seen == [(KEY, decision)]
    assert "listener bug" in caplog.text
    assert await any_store.events_after(KEY, 0, 10) == list(decision.events)


async def test_a_cancelled_caller_neither_interrupts_its_write_nor_skips_the_listeners(
    any_store: ContractStore,
) -> None:
    committed = asyncio.Event()
    any_store.add_listener(lambda _key, _decision: committed.set())
    decided, release = asyncio.Event(), asyncio.Event()

    async def hold(_key: SessionKey, _command: Command) -> None:
        decided.set()
        await release.wait()

    any_store.before_write = hold
    caller = asyncio.create_task(any_store.apply(KEY, Admit("t1", "runner", LEASE)))
    await decided.wait()
    caller.cancel()
    release.set()

    with pytest.raises(asyncio.CancelledError):
        await caller
    await asyncio.wait_for(committed.wait(), timeout=5)
    assert [e.body.kind for e in await any_store.events_after(KEY, 0, 10)] == ["turn_admitted"]


async def test_i11_sessions_of_two_projects_are_separate(any_store: ContractStore) -> None:
    mine, theirs = SessionKey("project-a", "same-session"), SessionKey("project-b", "same-session")
    await admit(any_store, mine, "t1")
    their_lease = await admit(any_store, theirs, "t1")

    stopped = await any_store.apply(mine, stop("t1", force=True))

    assert stopped.state.active is None
    their_state = await any_store.load(theirs)
    assert their_state.active is not None
    assert their_state.active.generation == their_lease.generation
    assert [e.body.kind for e in await any_store.events_after(theirs, 0, 10)] == ["turn_admitted"]
    assert len(await any_store.events_after(mine, 0, 10)) == 3
    assert await any_store.due(their_lease.lease_expires_at, 10) == [theirs]


async def test_deadline_index_due_and_next_deadline(any_store: ContractStore) -> None:
    assert await any_store.next_deadline() is None
    assert await any_store.due(2**62, 10) == []
    leases = {
        name: await admit(any_store, SessionKey("p", name), "t1", lease)
        for name, lease in [("late", 30 * SECOND), ("early", 10 * SECOND), ("middle", 20 * SECOND)]
    }
    early, middle, late = (leases[n].lease_expires_at for n in ("early", "middle", "late"))

    assert await any_store.next_deadline() == early
    assert await any_store.due(early - 1, 10) == []
    assert await any_store.due(early, 10) == [SessionKey("p", "early")]
    assert await any_store.due(late, 2) == [SessionKey("p", "early"), SessionKey("p", "middle")]

    stopping = await any_store.apply(SessionKey("p", "late"), stop("t1", grace=SECOND))
    await any_store.apply(
        SessionKey("p", "early"), Complete("t1", leases["early"].generation, TurnOutcome.COMPLETED)
    )

    stop_deadline = stopping.state.deadline()
    assert stop_deadline is not None
    assert stop_deadline < early
    assert await any_store.next_deadline() == stop_deadline
    assert await any_store.due(middle, 10) == [SessionKey("p", "late"), SessionKey("p", "middle")]


async def test_store_clock_is_microseconds_since_epoch_and_new_sessions_start_empty(
    any_store: ContractStore,
) -> None:
    before = time.time_ns() // 1000
    now = await any_store.now()
    after = time.time_ns() // 1000

    assert before - SECOND <= now <= after + SECOND
    assert await any_store.load(SessionKey("p", "never-written")) == Session()
    assert await any_store.events_after(SessionKey("p", "never-written"), 0, 10) == []
    await any_store.ping()


UNREACHABLE_POSTGRES = "postgresql+asyncpg://postgres@127.0.0.1:1/turngate"
UNREACHABLE_SQLITE = "sqlite+aiosqlite:////nonexistent-directory/turngate.db"


@pytest.mark.parametrize(
    "open_unreachable",
    [
        pytest.param(lambda: open_sql_store(UNREACHABLE_POSTGRES), id="postgresql-closed-port"),
        pytest.param(lambda: open_sql_store(UNREACHABLE_SQLITE), id="sqlite-missing-directory"),
        pytest.param(lambda: open_redis_store("redis://127.0.0.1:1/0", Keyspace()), id="redis-closed-port"),
    ],
)
async def test_unavailable_store_raises_store_unavailable(open_unreachable: Callable[[], Store]) -> None:
    store = open_unreachable()
    calls: list[Callable[[], Awaitable[Any]]] = [
        lambda: store.apply(KEY, Admit("t1", "runner", LEASE)),
        lambda: store.load(KEY),
        lambda: store.events_after(KEY, 0, 10),
        store.now,
        store.ping,
        store.next_deadline,
        lambda: store.due(0, 10),
    ]
    for call in calls:
        with pytest.raises(StoreUnavailable):
            await call()
    await store.close()


# The SQL store alone: its ledger rows commit in the same transaction as the state.


async def test_i1_concurrent_admits_record_one_turn_in_the_ledger(store: SqlStore) -> None:
    decisions = await admit_at_once(store, 20)

    [winner] = [d.reply.turn_id for d in decisions if isinstance(d.reply, Admitted)]
    assert [t.turn_id for t in await store.ledger.list_turns(KEY, None, 10)] == [winner]


async def test_i6_a_settlement_race_records_one_outcome_in_the_ledger(store: SqlStore) -> None:
    await settle_in_a_race(store)

    turn = await store.ledger.get_turn(KEY, "t1")
    assert turn is not None
    assert (turn.outcome, turn.settled_by) == (TurnOutcome.LOST, SettledBy.WATCHDOG)


async def test_an_overtaken_write_records_both_writers_in_the_ledger(
    store: SqlStore, database_url: str
) -> None:
    other_replica = open_store(database_url)
    await open_call_overtaken_once(store, other_replica)
    await other_replica.close()

    turn = await store.ledger.get_turn(KEY, "t1")
    assert turn is not None
    assert [c.call_id for c in turn.tool_calls] == ["theirs", "ours"]


async def test_i11_ledger_rows_of_two_projects_are_separate(store: SqlStore) -> None:
    mine, theirs = SessionKey("project-a", "same-session"), SessionKey("project-b", "same-session")
    await admit(store, mine, "t1")
    await admit(store, theirs, "t1")

    await store.apply(mine, stop("t1", force=True))

    my_turn, their_turn = await store.ledger.get_turn(mine, "t1"), await store.ledger.get_turn(theirs, "t1")
    assert my_turn is not None
    assert my_turn.outcome is TurnOutcome.CANCELLED
    assert their_turn is not None
    assert their_turn.outcome is None


async def test_i9_failed_ledger_write_leaves_state_and_events_unchanged(
    store: SqlStore, database_url: str
) -> None:
    lease = await admit(store, KEY, "t1")
    state, events = await store.load(KEY), await store.events_after(KEY, 0, 100)
    engine = make_engine(database_url)
    async with engine.begin() as conn:
        await conn.execute(text("DROP TABLE tool_calls"))
    await engine.dispose()

    with pytest.raises((StoreUnavailable, DBAPIError)):
        await store.apply(KEY, open_call("t1", lease.generation, "c1"))

    assert await store.load(KEY) == state
    assert await store.events_after(KEY, 0, 100) == events


@pytest.mark.parametrize(
    "url",
    [
        pytest.param(UNREACHABLE_POSTGRES, id="postgresql-closed-port"),
        pytest.param(UNREACHABLE_SQLITE, id="sqlite-missing-directory"),
    ],
)
async def test_unavailable_database_fails_ledger_reads_and_migrations_with_store_unavailable(
    url: str,
) -> None:
    store = open_store(url)
    calls: list[Callable[[], Awaitable[Any]]] = [
        lambda: store.ledger.get_turn(KEY, "t1"),
        lambda: store.ledger.list_turns(KEY, None, 10),
        lambda: migrate(url),
    ]
    for call in calls:
        with pytest.raises(StoreUnavailable):
            await call()
    await store.close()


@pytest.mark.parametrize(("synchronous", "level"), [("NORMAL", 1), ("FULL", 2)])
async def test_sqlite_runs_in_wal_mode_with_the_requested_synchronous(
    sqlite_template: Path, tmp_path: Path, synchronous: str, level: int
) -> None:
    path = tmp_path / "turngate.db"
    shutil.copyfile(sqlite_template, path)
    engine = make_engine(f"sqlite+aiosqlite:///{path}", sqlite_synchronous=synchronous)  # type: ignore[arg-type]
    async with engine.connect() as conn:
        assert await conn.scalar(text("PRAGMA journal_mode")) == "wal"
        assert await conn.scalar(text("PRAGMA synchronous")) == level
    await engine.dispose()


async def test_sqlite_connections_and_the_writers_keep_temporary_storage_in_memory(
    sqlite_template: Path, tmp_path: Path
) -> None:
    """The statement journals of the writer's savepoints stay in memory (PRAGMA temp_store=2), on
    the engine's connections and on the writer thread's own."""
    path = tmp_path / "turngate.db"
    shutil.copyfile(sqlite_template, path)
    engine = make_engine(f"sqlite+aiosqlite:///{path}")
    async with engine.connect() as conn:
        assert await conn.scalar(text("PRAGMA temp_store")) == 2
    connect = sqlite_file_connector(engine)
    assert connect is not None
    writers = connect()
    try:
        assert writers.execute("PRAGMA temp_store").fetchone() == (2,)
    finally:
        writers.close()
    await engine.dispose()


def test_open_store_refuses_unknown_databases_and_synchronous_levels() -> None:
    with pytest.raises(ValueError, match="unsupported database"):
        open_store("mysql://localhost/turngate")
    with pytest.raises(ValueError, match="sqlite_synchronous"):
        open_store("sqlite:///turngate.db", sqlite_synchronous="OFF")  # type: ignore[arg-type]


async def test_active_lists_a_projects_busy_sessions_by_deadline_in_pages(any_store: ContractStore) -> None:
    for name, seconds in (("late", 30), ("early", 10), ("middle", 20)):
        await admit(any_store, SessionKey("ops", name), "t1", lease=seconds * SECOND)
    await admit(any_store, SessionKey("other-project", "early"), "t1", lease=SECOND)
    await any_store.apply(SessionKey("ops", "stopped"), Admit("t1", "runner", LEASE))
    await any_store.apply(SessionKey("ops", "stopped"), stop("t1", force=True))

    first = await any_store.active("ops", None, 2)
    rest = await any_store.active("ops", (first[-1][1], first[-1][0].session_id), 2)

    assert [key.session_id for key, _ in first + rest] == ["early", "middle", "late"]
    assert [deadline for _, deadline in first + rest] == sorted(deadline for _, deadline in first + rest)
    assert await any_store.active("nobody", None, 10) == []


# The queue (docs/design.md §7) as the stores index it: a session whose turns only wait has a
# deadline (the earliest expiry) but no turn holding it.


async def test_active_lists_sessions_whose_queue_waits_but_only_those_a_turn_holds_are_counted(
    any_store: ContractStore,
) -> None:
    running, paused, behind = (SessionKey("ops", name) for name in ("running", "paused", "behind"))
    await admit(any_store, running, "t1", lease=30 * SECOND)
    await admit(any_store, behind, "t1", lease=10 * SECOND)
    await any_store.apply(behind, enqueue("t2"))
    first = await admit(any_store, paused, "t1")
    await any_store.apply(paused, enqueue("t2", wait=20 * SECOND))
    failed = await any_store.apply(paused, Complete("t1", first.generation, TurnOutcome.FAILED))
    await admit(any_store, SessionKey("other-project", "running"), "t1")

    assert (failed.state.queue_paused, failed.state.turn_active) == (True, False)
    listed = await any_store.active("ops", None, 10)
    assert [key for key, _ in listed] == [behind, paused, running], "a paused queue is listed too"
    assert [deadline for _, deadline in listed] == sorted(deadline for _, deadline in listed)
    assert await any_store.count_active() == 3, "queued turns hold no lease"
    assert await any_store.count_active_in_project("ops", 10) == 2
    assert await any_store.count_active_in_project("ops", 1) == 1
    assert await any_store.count_active_in_project("nobody", 10) == 0

    cleared = await any_store.apply(paused, stop("", queue=QueueAction.CLEAR))

    assert isinstance(cleared.reply, Cancelled)
    assert [key for key, _ in await any_store.active("ops", None, 10)] == [behind, running]
    assert await any_store.count_active_in_project("ops", 10) == 2


async def test_q4_a_session_whose_only_deadline_is_a_queued_expiry_is_swept_then_and_the_turn_expires(
    any_store: ContractStore,
) -> None:
    first = await admit(any_store, KEY, "t1")
    queued = (await any_store.apply(KEY, enqueue("t2", wait=SECOND // 2))).reply
    assert isinstance(queued, Queued)
    idle = await any_store.apply(KEY, Complete("t1", first.generation, TurnOutcome.FAILED))
    expires_at = queued.turn.expires_at
    assert (idle.state.active, idle.state.deadline()) == (None, expires_at)
    assert await any_store.next_deadline() == expires_at
    assert await any_store.due(expires_at - 1, 10) == []

    await wait_past(any_store, expires_at)
    await Watchdog(any_store).sweep()

    state = await any_store.load(KEY)
    expired = state.settled("t2")
    assert expired is not None
    assert (expired.outcome, expired.settled_by, expired.queued_at) == (
        TurnOutcome.EXPIRED,
        SettledBy.WATCHDOG,
        queued.turn.queued_at,
    )
    assert (state.queue, state.queue_paused) == ((), False)
    [dequeued] = [
        e.body for e in await any_store.events_after(KEY, 0, 100) if isinstance(e.body, TurnDequeued)
    ]
    assert (dequeued.turn_id, dequeued.outcome) == ("t2", TurnOutcome.EXPIRED)
    assert await any_store.next_deadline() is None
    assert await any_store.active(KEY.project_id, None, 10) == []


async def test_q2_q3_q4_promotion_pause_clear_and_expiry_commit_in_the_write_of_what_causes_them(
    any_store: ContractStore,
) -> None:
    """Each command below is one commit holding every event it caused, and the document, the log,
    the deadline index and the count of sessions a turn holds agree after it."""
    committed: list[Decision] = []
    any_store.add_listener(lambda _key, decision: committed.append(decision))

    async def one_write(command: Command) -> list[str]:
        before = len(committed)
        decision = await any_store.apply(KEY, command)
        assert committed[before:] == [decision], "one commit"
        assert await any_store.load(KEY) == decision.state
        log = await any_store.events_after(KEY, 0, 1_000)
        assert tuple(log[len(log) - len(decision.events) :]) == decision.events
        assert await any_store.next_deadline() == decision.state.deadline()
        assert await any_store.count_active() == int(decision.state.turn_active)
        return [event.body.kind for event in decision.events]

    first = await admit(any_store, KEY, "t1")
    for turn_id in ("t2", "t3"):
        assert await one_write(enqueue(turn_id)) == ["turn_queued"]

    # Q2: the head is admitted in the write that settles the active turn.
    assert await one_write(Complete("t1", first.generation, TurnOutcome.COMPLETED)) == [
        "turn_settled",
        "turn_admitted",
    ]
    promoted = (await any_store.load(KEY)).active
    assert promoted is not None
    assert promoted.turn_id == "t2"
    # Q3: a FAILED end pauses the queue in its own write; ResumeQueue admits the head in its.
    assert await one_write(Complete("t2", promoted.generation, TurnOutcome.FAILED)) == [
        "turn_settled",
        "queue_paused",
    ]
    assert await one_write(ResumeQueue()) == ["queue_resumed", "turn_admitted"]
    # Q3: CLEAR cancels every queued turn in the write of the Stop.
    for turn_id in ("t4", "t5"):
        await one_write(enqueue(turn_id))
    assert await one_write(stop("t3", queue=QueueAction.CLEAR)) == [
        "stop_requested",
        "turn_dequeued",
        "turn_dequeued",
    ]
    third = (await any_store.load(KEY)).active
    assert third is not None
    assert await one_write(Complete("t3", third.generation, TurnOutcome.CANCELLED)) == ["turn_settled"]
    # Q4: an expiry is written by the first command to find it passed (here, the watchdog's).
    await admit(any_store, KEY, "t6")
    queued = (await any_store.apply(KEY, enqueue("t7", wait=SECOND // 2))).reply
    assert isinstance(queued, Queued)
    await wait_past(any_store, queued.turn.expires_at)
    assert await one_write(Expire()) == ["turn_dequeued"]


async def test_q2_two_replicas_completing_the_active_turn_at_once_promote_the_head_once(
    any_store: ContractStore, open_any_store: OpenStore
) -> None:
    """The runner's CompleteTurn and its retry on another replica both decide on t1 running with
    t2 queued, before either writes: one write settles t1 and admits t2, the other decides again."""
    other_replica = open_any_store()
    first = await admit(any_store, KEY, "t1")
    await any_store.apply(KEY, enqueue("t2"))
    both_have_decided = asyncio.Barrier(2)
    writes: list[Command] = []

    async def write_together(_key: SessionKey, command: Command) -> None:
        writes.append(command)
        if len(writes) <= 2:
            await both_have_decided.wait()

    any_store.before_write = other_replica.before_write = write_together
    complete = Complete("t1", first.generation, TurnOutcome.COMPLETED)
    decisions = await asyncio.gather(any_store.apply(KEY, complete), other_replica.apply(KEY, complete))

    assert len(writes) == 2, "the loser decided again and found nothing to write"
    assert sum(decision.changed for decision in decisions) == 1
    promotions = [
        e.body
        for e in await any_store.events_after(KEY, 0, 100)
        if isinstance(e.body, TurnAdmitted) and e.body.from_queue
    ]
    state = await any_store.load(KEY)
    assert [p.turn_id for p in promotions] == ["t2"]
    assert state.active is not None
    assert (state.active.turn_id, state.active.generation) == ("t2", promotions[0].generation)
