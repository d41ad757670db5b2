"""History retention's prune on SQLite and PostgreSQL: it deletes what settled (or was written)
before the cutoff and nothing after it, never a turn not settled nor its events, in batches, the
same the second time; on PostgreSQL it skips what another transaction holds and holds nothing a
writer waits for; and its selects find their rows by index."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from contextlib import closing
from typing import Any

import pytest
from sqlalchemy import event, func, make_url, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.commands import KEY, STEERED_TURNS, admit, enqueue, open_call, play_steers, stop
from tests.support.plans import plan
from turngate.service.core import (
    Complete,
    RecordInteraction,
    SessionKey,
    TurnOutcome,
    TurnPhase,
)
from turngate.service.ledger.prune import Pruned, deletion, oldest_events, oldest_turns, prunable, prune
from turngate.service.sql.engine import make_engine
from turngate.service.sql.tables import (
    interactions,
    session_activity,
    session_events,
    steers,
    tool_calls,
    turns,
)
from turngate.service.store.sql import SqlStore

OTHER = SessionKey("project", "other")
# SQLite has one writer: a prune's batch and a write take turns; nothing holds a row apart.
ON_POSTGRESQL = pytest.mark.parametrize(
    "database_url", [pytest.param("postgresql", marks=pytest.mark.postgres)], indirect=True
)
ON_SQLITE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
# How long a prune may take when nothing should hold it up: reached only when a test fails.
PRUNE_TIMEOUT_S = 10.0


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    """A connection pool of the prune's own, as the history retention's loop and the CLI have."""
    engine = make_engine(database_url)
    yield engine
    await engine.dispose()


async def finished_turn(store: SqlStore, key: SessionKey, turn_id: str) -> int:
    """A turn with a tool call and an interaction, completed; its generation."""
    generation = (await admit(store, key, turn_id)).generation
    await store.apply(key, open_call(turn_id, generation, f"{turn_id}-call"))
    await store.apply(key, RecordInteraction(turn_id, generation, f"{turn_id}-ask", "approval"))
    await store.apply(key, Complete(turn_id, generation, TurnOutcome.COMPLETED))
    return generation


async def turn_ids(engine: AsyncEngine) -> set[str]:
    async with engine.connect() as conn:
        return set((await conn.scalars(select(turns.c.turn_id))).all())


async def event_turn_ids(engine: AsyncEngine) -> set[str]:
    async with engine.connect() as conn:
        return set((await conn.scalars(select(session_events.c.turn_id))).all())


async def rows(engine: AsyncEngine) -> Pruned:
    """How many rows each history table holds."""
    async with engine.connect() as conn:
        counts = {
            table.name: (await conn.execute(select(func.count()).select_from(table))).scalar_one()
            for table in (turns, tool_calls, interactions, steers, session_events, session_activity)
        }
    return Pruned(**counts)


async def test_prune_deletes_turns_settled_before_the_cutoff_with_their_calls_interactions_and_events(
    store: SqlStore, engine: AsyncEngine
) -> None:
    await finished_turn(store, KEY, "old")
    old_events = len(await store.events_after(KEY, 0, 100))
    cutoff = await store.now()
    await finished_turn(store, KEY, "new")

    pruned = await prune(engine, cutoff)

    assert pruned == Pruned(turns=1, tool_calls=1, interactions=1, session_events=old_events)
    assert await store.ledger.get_turn(KEY, "old") is None
    kept = await store.ledger.get_turn(KEY, "new")
    assert kept is not None
    assert (len(kept.tool_calls), len(kept.interactions)) == (1, 1)
    assert [view.turn_id for view in await store.ledger.list_turns(KEY, None, 10)] == ["new"]
    assert await event_turn_ids(engine) == {"new"}


async def test_prune_never_deletes_a_running_or_stopping_turn_nor_its_events_however_old(
    store: SqlStore, engine: AsyncEngine
) -> None:
    running = (await admit(store, KEY, "running")).generation
    await store.apply(KEY, open_call("running", running, "c1"))
    await admit(store, OTHER, "stopping")
    await store.apply(OTHER, stop("stopping"))
    await finished_turn(store, SessionKey("project", "third"), "done")

    pruned = await prune(engine, await store.now())

    assert (pruned.turns, pruned.tool_calls) == (1, 1)
    assert await turn_ids(engine) == await event_turn_ids(engine) == {"running", "stopping"}
    phases = {
        key: await store.ledger.get_turn(key, turn_id)
        for key, turn_id in ((KEY, "running"), (OTHER, "stopping"))
    }
    assert [view.phase for view in phases.values() if view] == [TurnPhase.RUNNING, TurnPhase.STOPPING]

    await store.apply(KEY, Complete("running", running, TurnOutcome.COMPLETED))
    await store.apply(OTHER, stop("stopping", force=True))
    again = await prune(engine, await store.now())

    assert (again.turns, again.tool_calls) == (2, 1)
    assert await rows(engine) == Pruned()


async def test_s2_prune_deletes_a_settled_turns_steers_with_it_never_an_unsettled_turns(
    store: SqlStore, engine: AsyncEngine
) -> None:
    await play_steers(store, KEY)  # s1 and c settled, with 4 steers and 1; e running, with 1
    steered = {turn_id: await store.ledger.get_turn(KEY, turn_id) for turn_id in STEERED_TURNS}
    assert [len(view.steers) if view else None for view in steered.values()] == [4, 1, 1]

    pruned = await prune(engine, await store.now())

    assert (pruned.turns, pruned.steers) == (2, 5)
    running = await store.ledger.get_turn(KEY, "e")
    assert running == steered["e"]
    assert (await rows(engine)).steers == 1


async def test_a_queued_turn_that_left_the_queue_before_the_cutoff_is_pruned_like_a_settled_one(
    store: SqlStore, engine: AsyncEngine
) -> None:
    first = await admit(store, KEY, "first")
    await store.apply(KEY, enqueue("waiting"))
    await store.apply(KEY, stop("waiting"))  # it leaves the queue CANCELLED: a row, settled
    await store.apply(KEY, Complete("first", first.generation, TurnOutcome.COMPLETED))
    left = await store.ledger.get_turn(KEY, "waiting")
    assert left is not None
    assert (left.phase, left.outcome, left.admitted_at) == (TurnPhase.SETTLED, TurnOutcome.CANCELLED, 0)

    pruned = await prune(engine, await store.now())

    assert pruned.turns == 2
    assert await rows(engine) == Pruned()


async def test_prune_goes_in_batches_of_at_most_the_batch_size_until_nothing_older_is_left(
    store: SqlStore, engine: AsyncEngine
) -> None:
    for index in range(25):
        await finished_turn(store, KEY, f"t{index}")
    everything = await rows(engine)
    deletes: list[tuple[str, int]] = []

    @event.listens_for(engine.sync_engine, "after_cursor_execute")
    def _count(_conn: Any, _cursor: Any, statement: str, _params: Any, _context: Any, _many: bool) -> None:
        if statement.startswith("DELETE FROM "):
            deletes.append((statement.split()[2], _cursor.rowcount))

    pruned = await prune(engine, await store.now(), batch=10)

    assert pruned == everything
    assert [count for table, count in deletes if table == "turns"] == [10, 10, 5]
    event_batches = [count for table, count in deletes if table == "session_events"]
    assert sum(event_batches) == everything.session_events
    assert event_batches == [10] * (len(event_batches) - 1) + [event_batches[-1]]
    assert await rows(engine) == Pruned()


async def test_pruning_again_deletes_nothing_more(store: SqlStore, engine: AsyncEngine) -> None:
    await finished_turn(store, KEY, "old")
    cutoff = await store.now()
    await finished_turn(store, KEY, "new")
    first = await prune(engine, cutoff)
    left = await rows(engine)

    assert first.turns == 1
    assert await prune(engine, cutoff) == Pruned()
    assert await rows(engine) == left


async def test_a_dry_run_counts_exactly_what_prune_then_deletes_and_deletes_nothing(
    store: SqlStore, engine: AsyncEngine
) -> None:
    await finished_turn(store, KEY, "old")
    await admit(store, OTHER, "running")
    cutoff = await store.now()
    await finished_turn(store, KEY, "new")
    everything = await rows(engine)

    counted = await prunable(engine, cutoff)

    assert await rows(engine) == everything
    assert counted == await prune(engine, cutoff)
    assert counted.turns == 1


def pages(database_url: str) -> int:
    """The pages of the SQLite file, its write-ahead log checkpointed into it."""
    with closing(sqlite3.connect(make_url(database_url).database or "")) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        count: int = db.execute("PRAGMA page_count").fetchone()[0]
        return count


@ON_SQLITE
async def test_on_sqlite_new_history_reuses_the_pages_a_prune_freed_so_the_file_stops_growing(
    store: SqlStore, engine: AsyncEngine, database_url: str
) -> None:
    growth = []
    for round_ in range(4):
        before = pages(database_url)
        for index in range(50):
            await finished_turn(store, SessionKey("project", f"s{round_}-{index % 5}"), f"t{index}")
        # What retention keeps of each round: nothing but the sessions' documents.
        await prune(engine, await store.now())
        growth.append(pages(database_url) - before)

    assert growth[0] > 20, growth
    assert all(grown <= growth[0] // 4 for grown in growth[2:]), growth


@ON_POSTGRESQL
async def test_on_postgresql_prune_skips_rows_another_transaction_holds_instead_of_waiting(
    store: SqlStore, engine: AsyncEngine
) -> None:
    await finished_turn(store, KEY, "held")
    await finished_turn(store, OTHER, "free")
    cutoff = await store.now()
    async with engine.connect() as holder, holder.begin():
        await holder.execute(select(turns).where(turns.c.turn_id == "held").with_for_update())

        pruned = await asyncio.wait_for(prune(engine, cutoff), PRUNE_TIMEOUT_S)

        assert pruned.turns == 1
        assert await turn_ids(engine) == {"held"}

    assert (await prune(engine, cutoff)).turns == 1
    assert await turn_ids(engine) == set()


@ON_POSTGRESQL
async def test_on_postgresql_a_prune_batch_in_flight_holds_up_no_writer(
    store: SqlStore, engine: AsyncEngine
) -> None:
    await finished_turn(store, KEY, "old")
    cutoff = await store.now()
    async with engine.connect() as pruning, pruning.begin():
        # What a batch locks, held open: the old turn and the old events of the session.
        assert len((await pruning.execute(oldest_turns(cutoff, 1_000))).all()) == 1
        assert (await pruning.execute(oldest_events(cutoff, 1_000))).all()

        # The same session goes on: admitted, recorded, settled, while the batch holds its locks.
        written = await asyncio.wait_for(finished_turn(store, KEY, "new"), PRUNE_TIMEOUT_S)
        assert written > 0

    assert await turn_ids(engine) == {"old", "new"}


# PostgreSQL plans by its statistics: tables this large make a scan cost more than the index does.
_FILL = (
    """INSERT INTO turns (project_id, session_id, generation, turn_id, runner_id, phase, stop_requested,
    stop_reason, admitted_at, settled_at, lease_expires_at, error, traceparent)
    SELECT 'p', 's' || (i % 500), i, 't' || i, 'r', CASE WHEN i <= 50 THEN 3 ELSE 1 END, false, '', i,
    CASE WHEN i <= 50 THEN i END, i, '', '' FROM generate_series(1, 20000) AS i""",
    """INSERT INTO tool_calls (project_id, session_id, generation, call_id, turn_id, name, status, error,
    opened_at, opened_seq) SELECT 'p', 's' || (i % 500), i, 'c', 't' || i, 'n', 1, '', i, i
    FROM generate_series(1, 20000) AS i""",
    """INSERT INTO interactions (project_id, session_id, generation, interaction_id, turn_id, kind, status,
    resolution, opened_at, opened_seq) SELECT 'p', 's' || (i % 500), i, 'a', 't' || i, 'k', 1, '', i, i
    FROM generate_series(1, 20000) AS i""",
    """INSERT INTO steers (project_id, session_id, generation, steer_id, turn_id, status, sent_at, content,
    content_type, requeued, opened_seq) SELECT 'p', 's' || (i % 500), i, 's', 't' || i, 2, i, 'go',
    'text/plain', false, i FROM generate_series(1, 20000) AS i""",
    """INSERT INTO session_events (project_id, session_id, epoch, seq, time, kind, turn_id, body)
    SELECT 'p', 's' || (i % 500), 1, i, CASE WHEN i <= 100 THEN i ELSE 1000000000000 + i END, 'k',
    't' || i, '{}' FROM generate_series(1, 50000) AS i""",
    "ANALYZE",
)


async def test_the_prune_finds_what_it_deletes_by_index_and_deletes_each_row_by_its_primary_key(
    store: SqlStore, engine: AsyncEngine
) -> None:
    dialect = engine.dialect.name
    if dialect == "postgresql":
        async with engine.begin() as conn:
            for fill in _FILL:
                await conn.execute(text(fill))
        cutoff = 1_000  # the filled turns settled and events written before it (and only those)
    else:
        await finished_turn(store, KEY, "old")
        cutoff = await store.now()
    async with engine.connect() as conn:
        turn_keys = (await conn.execute(oldest_turns(cutoff, 3))).all()
        event_keys = (await conn.execute(oldest_events(cutoff, 3))).all()
    assert turn_keys
    assert event_keys

    finds = {
        "turns": await plan(engine, oldest_turns(cutoff, 1_000)),
        "session_events": await plan(engine, oldest_events(cutoff, 1_000)),
    }
    deletes = {}
    for table, keys in (
        (turns, turn_keys),
        (tool_calls, turn_keys),
        (interactions, turn_keys),
        (steers, turn_keys),
        (session_events, event_keys),
    ):
        statement, params = deletion(dialect, table, keys)
        deletes[table.name] = await plan(engine, statement, executemany=params is not None)

    if dialect == "sqlite":
        assert "SEARCH turns USING INDEX ix_turns_settled_at" in finds["turns"], finds
        assert "SEARCH session_events USING INDEX ix_session_events_time" in finds["session_events"], finds
        for name, found in deletes.items():
            assert f"SEARCH {name} USING INDEX sqlite_autoindex_{name}_1" in found, found
            assert f"SCAN {name}" not in found, found
    else:
        assert "ix_turns_settled_at" in finds["turns"], finds
        assert "ix_session_events_time" in finds["session_events"], finds
        for name, found in deletes.items():
            assert f"pk_{name}" in found, found
        assert not any("Seq Scan" in found for found in (*finds.values(), *deletes.values())), (
            finds,
            deletes,
        )
