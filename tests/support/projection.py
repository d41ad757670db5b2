"""What the ledger projector's tests share: writing turns through a store, reading what the Redis log
and the ledger hold, and what the ledger must hold for a session's events."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.stores import stream_entries
from turngate.service.core import (
    Admit,
    Admitted,
    Complete,
    Event,
    RecordToolCall,
    SessionKey,
    ToolCallStatus,
    TurnOutcome,
)
from turngate.service.ledger.projector import AfterCommit, LedgerProjector
from turngate.service.ledger.record import record
from turngate.service.ports.store import Store
from turngate.service.sql.tables import (
    interactions,
    ledger_cursors,
    session_activity,
    session_events,
    steers,
    tool_calls,
    turns,
)
from turngate.service.store.redis.connection import Client
from turngate.service.store.redis.keys import LEDGER_GROUP, Keyspace, log_event

SECOND = 1_000_000
LEDGER_TABLES = (session_events, turns, tool_calls, interactions, steers, session_activity)
# How long a test waits for something nothing signals: reached only when the test fails.
WAIT_TIMEOUT_S = 20.0

# Every ledger row of one project, per table, in primary-key order, without the project id.
Rows = dict[str, list[tuple[object, ...]]]


async def play_turn(store: Store, key: SessionKey, turn_id: str) -> None:
    """A turn with one tool call, completed: four events."""
    admitted = (await store.apply(key, Admit(turn_id, "runner", 20 * SECOND))).reply
    assert isinstance(admitted, Admitted)
    generation = admitted.generation
    await store.apply(key, RecordToolCall(turn_id, generation, "c1", "search", ToolCallStatus.OPEN))
    await store.apply(key, RecordToolCall(turn_id, generation, "c1", "search", ToolCallStatus.SUCCEEDED))
    await store.apply(key, Complete(turn_id, generation, TurnOutcome.COMPLETED))


async def ledger_rows(engine: AsyncEngine, project_id: str) -> Rows:
    async with engine.connect() as conn:
        return {
            table.name: [
                tuple(row)[1:]
                for row in await conn.execute(
                    select(table).where(table.c.project_id == project_id).order_by(*table.primary_key)
                )
            ]
            for table in LEDGER_TABLES
        }


async def cursor_of(engine: AsyncEngine, key: SessionKey) -> int | None:
    async with engine.connect() as conn:
        cursor: int | None = await conn.scalar(
            select(ledger_cursors.c.seq).where(
                ledger_cursors.c.project_id == key.project_id, ledger_cursors.c.session_id == key.session_id
            )
        )
    return cursor


async def log_of(redis: Client, keys: Keyspace, key: SessionKey) -> list[Event]:
    """Every event the session's Redis log holds."""
    return [log_event(entry_id, fields) for entry_id, fields in await stream_entries(redis, keys.log(key))]


async def rows_recording(engine: AsyncEngine, events: dict[SessionKey, list[Event]]) -> Rows:
    """The ledger rows `record()` writes for these events, as the SQL store would (recorded under a
    project of their own, then read back without it)."""
    project_id = f"expected-{uuid.uuid4().hex[:8]}"
    async with engine.begin() as conn:
        for key, session_events_ in events.items():
            await record(conn, SessionKey(project_id, key.session_id), session_events_)
    return await ledger_rows(engine, project_id)


def commits_log() -> tuple[dict[SessionKey, list[int]], AfterCommit]:
    """An after_commit hook that notes, per session, the cursor of every commit, in commit order."""
    cursors: dict[SessionKey, list[int]] = {}

    async def note(key: SessionKey, cursor: int) -> None:
        cursors.setdefault(key, []).append(cursor)

    return cursors, note


def each_event_committed_once(cursors: dict[SessionKey, list[int]], heads: dict[SessionKey, int]) -> bool:
    """No two of a session's commits moved its cursor to the same place (each moves it forward,
    under its row's lock: a repeat would be an event recorded twice), and the furthest reached the
    session's head. Not the order of the notes: a hook runs after its commit, so two commits that
    end together (two projectors, or one's concurrent batches) may note in either order."""
    return set(cursors) == set(heads) and all(
        len(seqs) == len(set(seqs)) and max(seqs) == heads[key] for key, seqs in cursors.items()
    )


async def heads(redis: Client, keys: Keyspace, sessions_: list[SessionKey]) -> dict[SessionKey, int]:
    """The last seq of each session's log."""
    return {key: (await log_of(redis, keys, key))[-1].seq for key in sessions_}


async def marks(redis: Client, keys: Keyspace, sessions_: list[SessionKey]) -> dict[SessionKey, int]:
    """The `ledger` mark of each session's document."""
    return {key: int(await redis.hget(keys.doc(key), "ledger") or 0) for key in sessions_}


async def pending_count(redis: Client, keys: Keyspace) -> int:
    """Outbox entries delivered to a consumer and not acknowledged, over all buckets."""
    replies = [await redis.xpending(keys.outbox(bucket), LEDGER_GROUP) for bucket in keys.all_buckets()]
    return sum(int(reply["pending"]) for reply in replies)


async def expected_rows(
    redis: Client, keys: Keyspace, ledger: AsyncEngine, sessions_: list[SessionKey]
) -> Rows:
    """What the SQL store's ledger holds for the events the sessions' Redis logs hold."""
    return await rows_recording(ledger, {key: await log_of(redis, keys, key) for key in sessions_})


async def reclaimed_all(projector: LedgerProjector) -> bool:
    """Reclaims once; true when nothing is left to project."""
    await projector.reclaim()
    return await projector.lag() == 0


async def lag_is_zero(projector: LedgerProjector) -> bool:
    return await projector.lag() == 0


async def stopped(task: asyncio.Task[None]) -> None:
    """Cancels a projector's `run()` and waits for it to end (raising what it failed with, if so)."""
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
