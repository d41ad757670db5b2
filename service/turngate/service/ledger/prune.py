"""History retention's deletes: the history older than a cutoff, in bounded batches.

What goes: settled turns whose `settled_at` is before the cutoff (a queued turn that expired or was
cancelled is recorded settled as it leaves the queue), with their tool calls, interactions and
steers; session events whose `time` is before it; and the `session_activity` row of a session whose
newest event is before it and that has no turn unsettled (its history is gone and nothing in it is
live: ListSessions no longer lists it). What stays, however old: a turn that is not settled, every
event naming it, and its session's activity row (a queued turn has no row yet: the retention's
floor, at least the longest queue wait, keeps its events; core/limits.py).

Each batch is one short transaction of at most `BATCH` turns or events, found by an index from the
oldest (migration 0007), so a prune costs what it deletes and never holds locks for long. On
PostgreSQL a batch locks the rows it takes FOR UPDATE SKIP LOCKED: rows another transaction holds
are left for the next prune instead of waited for, and concurrent prunes (every replica runs one)
share the work. A turn once prunable stays so (its row never changes after settling), so on SQLite,
whose SELECT runs before the write transaction begins, the batch deletes what it found. A session's
activity row is not: a write may record a new event of it after the SELECT, so its delete asks
again whether the row is older than the cutoff.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import astuple, dataclass, fields
from typing import Any

from sqlalchemy import ColumnElement, Select, Table, and_, bindparam, func, select, tuple_
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql import Delete

from turngate.service.core import TurnPhase
from turngate.service.sql.engine import unavailable_on_failure
from turngate.service.sql.tables import (
    interactions,
    session_activity,
    session_events,
    steers,
    tool_calls,
    turns,
)

# Rows one transaction takes at most.
BATCH = 1_000


@dataclass(frozen=True, slots=True)
class Pruned:
    """Rows deleted (or, for a dry run, that would be), by table."""

    turns: int = 0
    tool_calls: int = 0
    interactions: int = 0
    steers: int = 0
    session_events: int = 0
    session_activity: int = 0

    def __add__(self, other: Pruned) -> Pruned:
        return Pruned(*(mine + theirs for mine, theirs in zip(astuple(self), astuple(other), strict=True)))

    @property
    def total(self) -> int:
        return sum(astuple(self))

    def by_table(self) -> dict[str, int]:
        return {field.name: getattr(self, field.name) for field in fields(self)}


async def prune(engine: AsyncEngine, before: int, *, batch: int = BATCH) -> Pruned:
    """Deletes the history older than `before` (store-clock µs), a batch per transaction, until a
    batch finds less than a full one; raises StoreUnavailable while the database does not answer."""
    pruned = Pruned()
    with unavailable_on_failure():
        for kind in _KINDS:
            while True:
                found = await _prune_batch(engine, kind, before, batch)
                pruned += found
                if getattr(found, kind.counted) < batch:
                    break
    return pruned


async def prunable(engine: AsyncEngine, before: int) -> Pruned:
    """What `prune(engine, before)` would delete now, counted."""
    with unavailable_on_failure():
        async with engine.connect() as conn:
            return Pruned(
                turns=await _count(conn, select(func.count()).where(_old_turn(before))),
                tool_calls=await _count(conn, _children_count(tool_calls, before)),
                interactions=await _count(conn, _children_count(interactions, before)),
                steers=await _count(conn, _children_count(steers, before)),
                session_events=await _count(conn, select(func.count()).where(_old_event(before))),
                session_activity=await _count(conn, select(func.count()).where(_old_activity(before))),
            )


def _old_turn(before: int) -> ColumnElement[bool]:
    """A turn settled before `before` (`settled_at` is NULL until it settles)."""
    return and_(turns.c.settled_at < before, turns.c.phase == TurnPhase.SETTLED)


def _old_event(before: int) -> ColumnElement[bool]:
    """An event written before `before` that names no turn of its session still unsettled."""
    unsettled = select(turns.c.generation).where(
        turns.c.project_id == session_events.c.project_id,
        turns.c.session_id == session_events.c.session_id,
        turns.c.turn_id == session_events.c.turn_id,
        turns.c.phase != TurnPhase.SETTLED,
    )
    return and_(session_events.c.time < before, ~unsettled.exists())


def _old_activity(before: int) -> ColumnElement[bool]:
    """A session whose newest event was written before `before` and that has no turn unsettled."""
    unsettled = select(turns.c.generation).where(
        turns.c.project_id == session_activity.c.project_id,
        turns.c.session_id == session_activity.c.session_id,
        turns.c.phase != TurnPhase.SETTLED,
    )
    return and_(session_activity.c.last_activity_at < before, ~unsettled.exists())


def oldest_turns(before: int, batch: int) -> Select[tuple[str, str, int]]:
    """The keys of up to `batch` prunable turns, settled longest ago first, locked (PostgreSQL)."""
    return (
        select(turns.c.project_id, turns.c.session_id, turns.c.generation)
        .where(_old_turn(before))
        .order_by(turns.c.settled_at)
        .limit(batch)
        .with_for_update(skip_locked=True)
    )


def oldest_events(before: int, batch: int) -> Select[tuple[str, str, int, int]]:
    """The keys of up to `batch` prunable events, oldest first, locked (PostgreSQL)."""
    return (
        select(*session_events.primary_key)
        .where(_old_event(before))
        .order_by(session_events.c.time)
        .limit(batch)
        .with_for_update(skip_locked=True, of=session_events)
    )


def oldest_activity(before: int, batch: int) -> Select[tuple[str, str]]:
    """The keys of up to `batch` sessions whose activity row is prunable, oldest first, locked
    (PostgreSQL)."""
    return (
        select(*session_activity.primary_key)
        .where(_old_activity(before))
        .order_by(session_activity.c.last_activity_at)
        .limit(batch)
        .with_for_update(skip_locked=True, of=session_activity)
    )


_Keys = Sequence[Row[Any]]


@dataclass(frozen=True, slots=True)
class _Kind:
    """What a prune deletes in batches, in this order: how a batch is found, how its rows are
    deleted (given the cutoff), and which count says the batch was full."""

    oldest: Callable[[int, int], Select[Any]]
    delete: Callable[[AsyncConnection, _Keys, int], Awaitable[Pruned]]
    counted: str


async def _prune_batch(engine: AsyncEngine, kind: _Kind, before: int, batch: int) -> Pruned:
    async with engine.begin() as conn:
        keys = (await conn.execute(kind.oldest(before, batch))).all()
        return await kind.delete(conn, keys, before) if keys else Pruned()


async def _delete_turns(conn: AsyncConnection, keys: _Keys, _before: int) -> Pruned:
    return Pruned(
        tool_calls=await _delete(conn, tool_calls, keys),
        interactions=await _delete(conn, interactions, keys),
        steers=await _delete(conn, steers, keys),
        turns=await _delete(conn, turns, keys),
    )


async def _delete_events(conn: AsyncConnection, keys: _Keys, _before: int) -> Pruned:
    return Pruned(session_events=await _delete(conn, session_events, keys))


async def _delete_activity(conn: AsyncConnection, keys: _Keys, before: int) -> Pruned:
    statement, params = activity_deletion(conn.dialect.name, keys, before)
    return Pruned(session_activity=(await conn.execute(statement, params)).rowcount)


_KINDS = (
    _Kind(oldest_turns, _delete_turns, "turns"),
    _Kind(oldest_events, _delete_events, "session_events"),
    _Kind(oldest_activity, _delete_activity, "session_activity"),
)


def activity_deletion(dialect: str, keys: _Keys, before: int) -> tuple[Delete, list[dict[str, Any]] | None]:
    """`deletion` of activity rows, each only while still older than `before` (a write may have
    recorded a newer event since they were found)."""
    statement, params = deletion(dialect, session_activity, keys)
    return statement.where(session_activity.c.last_activity_at < before), params


async def _delete(conn: AsyncConnection, table: Table, keys: Sequence[Row[Any]]) -> int:
    """Deletes the rows of `table` whose leading key columns (as many as each key has) are one of
    `keys`; how many."""
    statement, params = deletion(conn.dialect.name, table, keys)
    return (await conn.execute(statement, params)).rowcount


def deletion(
    dialect: str, table: Table, keys: Sequence[Row[Any]]
) -> tuple[Delete, list[dict[str, Any]] | None]:
    """`_delete`'s statement and its parameters, each key found by the primary key's index: on
    PostgreSQL one statement (asyncpg counts no rows of an executemany), on SQLite one per key
    (it scans the whole table for a row-value IN list)."""
    names = keys[0]._fields
    columns = [table.c[name] for name in names]
    if dialect == "postgresql":
        return table.delete().where(tuple_(*columns).in_([tuple(key) for key in keys])), None
    by_key = table.delete().where(*(column == bindparam(column.name) for column in columns))
    return by_key, [key._asdict() for key in keys]


def _children_count(table: Table, before: int) -> Select[int]:
    """How many tool calls, interactions or steers belong to prunable turns."""
    of_turn = and_(*(table.c[name] == turns.c[name] for name in ("project_id", "session_id", "generation")))
    return select(func.count()).select_from(table.join(turns, of_turn)).where(_old_turn(before))


async def _count(conn: AsyncConnection, query: Select[int]) -> int:
    return (await conn.execute(query)).scalar_one()
