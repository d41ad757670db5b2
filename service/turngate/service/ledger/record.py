"""The one function that turns core events into ledger rows.

It runs inside the SQL store's transaction and, in redis mode, in the outbox projector, which
may deliver a batch more than once. So every write is idempotent and monotonic: events are
insert-or-ignore by epoch and seq, a turn's first Stop is kept, a tool call or interaction
leaves its open state once and never returns to it, and a steer is inserted once and ends once.

Writes of one kind go as one executemany, the kinds in the order admit, stop, tool call,
interaction, steer, steer end, settle. That keeps each row's writes in seq order, so the rows are
those recording event by event would give: a turn is admitted, then stopped, then settled; every
tool call, interaction and steer has a row of its own, written only by its own kinds, in seq order
(a steer is sent before it ends). An executemany takes its columns from its first row, so every
row of one kind names the same columns (a turn inserted as it leaves the queue and one admitted
share the admit statement: `_turn_row`).

Last, each session's `session_activity` row takes the newest event's time and the generation of
the last turn that ran and settled, one upsert per session, each column only ever moving forward.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from functools import cache
from itertools import groupby
from operator import itemgetter
from typing import Any, assert_never

from sqlalchemy import ColumnElement, bindparam, case, false
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql import Executable, Update

from turngate.service.codec import dump_event_body
from turngate.service.core import (
    Event,
    InteractionChanged,
    InteractionStatus,
    QueuePaused,
    QueueReordered,
    QueueResumed,
    SessionKey,
    SettledBy,
    SteerEnded,
    SteerStatus,
    StopRequested,
    ToolCallChanged,
    ToolCallStatus,
    TurnAdmitted,
    TurnDequeued,
    TurnOutcome,
    TurnPhase,
    TurnQueued,
    TurnSettled,
    TurnSteered,
)
from turngate.service.sql.tables import (
    dialect_insert,
    interactions,
    session_activity,
    session_events,
    steers,
    tool_calls,
    turns,
)

_Row = dict[str, Any]


async def record(conn: AsyncConnection, key: SessionKey, events: Sequence[Event]) -> None:
    """Writes the session_events rows and the ledger rows for `events` (in seq order)."""
    await record_sessions(conn, [(key, events)])


async def record_sessions(
    conn: AsyncConnection, sessions: Sequence[tuple[SessionKey, Sequence[Event]]]
) -> None:
    """`record` for several sessions at once, in one statement per kind of write (the projector
    records its batches so)."""
    for statement, rows in recording(conn.dialect.name, sessions):
        await conn.execute(statement, rows)


def recording(
    dialect: str, sessions: Sequence[tuple[SessionKey, Sequence[Event]]]
) -> list[tuple[Executable, list[_Row]]]:
    """What `record_sessions` executes, in order: each statement with its rows (executemany).
    The embedded store's writer thread runs them on its own connection."""
    events = [_event_row(key, event) for key, session_events_ in sessions for event in session_events_]
    if not events:
        return []
    statements = _statements(dialect)
    writes = sorted(
        (
            write
            for key, session_events_ in sessions
            for event in session_events_
            if (write := ledger_write(key, event))
        ),
        key=itemgetter(0),
    )
    return [
        (statements.events, events),
        *(
            (statements.writes[kind], [row for _, row in group])
            for kind, group in groupby(writes, key=itemgetter(0))
        ),
        (statements.activity, _activity_rows(sessions)),
    ]


def _activity_rows(sessions: Sequence[tuple[SessionKey, Sequence[Event]]]) -> list[_Row]:
    """One `session_activity` row per session of `sessions` that has events, in key order."""
    rows: dict[SessionKey, _Row] = {}
    for key, session_events_ in sessions:
        for event in session_events_:
            row = rows.setdefault(key, _activity_row(key))
            row["last_activity_at"] = max(row["last_activity_at"], event.time)
            if isinstance(event.body, TurnSettled):
                row["settled_generation"] = max(row["settled_generation"], event.body.turn.generation)
    return [rows[key] for key in sorted(rows)]


def _activity_row(key: SessionKey) -> _Row:
    return {
        "project_id": key.project_id,
        "session_id": key.session_id,
        "last_activity_at": 0,
        "settled_generation": 0,
    }


class Write(IntEnum):
    """The kinds of ledger write, in the order they run (see the module's docstring)."""

    ADMIT = 0
    STOP = 1
    TOOL_CALL = 2
    INTERACTION = 3
    STEER = 4
    STEER_END = 5
    SETTLE = 6


@dataclass(frozen=True, slots=True)
class _Statements:
    events: Executable
    # Indexed by Write.
    writes: tuple[Executable, ...]
    activity: Executable


@cache
def _statements(dialect: str) -> _Statements:
    """The ledger's writes in one dialect."""
    tool_call = dialect_insert(dialect, tool_calls)
    interaction = dialect_insert(dialect, interactions)
    activity = dialect_insert(dialect, session_activity)
    writes = {
        Write.ADMIT: dialect_insert(dialect, turns).on_conflict_do_nothing(),
        Write.STOP: _turn_update().where(turns.c.stop_requested.is_(false())),
        Write.TOOL_CALL: tool_call.on_conflict_do_update(
            index_elements=list(tool_calls.primary_key),
            set_={c: tool_call.excluded[c] for c in ("status", "error", "closed_at")},
            where=tool_calls.c.status == ToolCallStatus.OPEN,
        ),
        Write.INTERACTION: interaction.on_conflict_do_update(
            index_elements=list(interactions.primary_key),
            set_={c: interaction.excluded[c] for c in ("status", "resolution", "closed_at")},
            where=interactions.c.status == InteractionStatus.PENDING,
        ),
        Write.STEER: dialect_insert(dialect, steers).on_conflict_do_nothing(),
        Write.STEER_END: steers.update()
        .where(
            steers.c.project_id == bindparam("key_project_id"),
            steers.c.session_id == bindparam("key_session_id"),
            steers.c.generation == bindparam("key_generation"),
            steers.c.steer_id == bindparam("key_steer_id"),
        )
        .where(steers.c.status == SteerStatus.PENDING),
        Write.SETTLE: _turn_update(),
    }
    return _Statements(
        events=dialect_insert(dialect, session_events).on_conflict_do_nothing(),
        writes=tuple(writes[kind] for kind in Write),
        activity=activity.on_conflict_do_update(
            index_elements=list(session_activity.primary_key),
            set_={
                name: _greater(activity.excluded[name], session_activity.c[name])
                for name in ("last_activity_at", "settled_generation")
            },
        ),
    )


def _greater(new: ColumnElement[int], old: ColumnElement[int]) -> ColumnElement[int]:
    """The greater of two values: a delivery again, or late, never moves a column back."""
    return case((new > old, new), else_=old)


def _turn_update() -> Update:
    """An UPDATE of one turn row; the SET clause comes from each row's other keys."""
    return turns.update().where(
        turns.c.project_id == bindparam("key_project_id"),
        turns.c.session_id == bindparam("key_session_id"),
        turns.c.generation == bindparam("key_generation"),
    )


def _turn_key(key: SessionKey, generation: int) -> _Row:
    """The WHERE values of `_turn_update`; named apart from the columns, which would join the SET."""
    return {"key_project_id": key.project_id, "key_session_id": key.session_id, "key_generation": generation}


def _child_key(key: SessionKey, generation: int) -> _Row:
    return {"project_id": key.project_id, "session_id": key.session_id, "generation": generation}


def _turn_row(key: SessionKey, generation: int, **columns: Any) -> _Row:
    """A `turns` row the admit statement inserts: every column, those not given NULL."""
    return {column.name: None for column in turns.columns} | _child_key(key, generation) | columns


def _event_row(key: SessionKey, event: Event) -> _Row:
    return {
        "project_id": key.project_id,
        "session_id": key.session_id,
        "epoch": event.epoch,
        "seq": event.seq,
        "time": event.time,
        "kind": event.body.kind,
        "turn_id": event.turn_id,
        "body": dump_event_body(event.body).decode(),
    }


def ledger_write(key: SessionKey, event: Event) -> tuple[Write, _Row] | None:
    """The kind of write and the row recording `event`; None for what the turns do not record: a
    Stop of a turn that never started, a turn joining the queue (it has no row until it leaves it),
    the queue pausing, resuming or being reordered (the session log keeps those). A turn a steer
    became records nothing of the steer: its content is the steer row of the turn it came from
    (S6), or only in the log (S7; docs/decisions.md, "Steers in history"). (`replay` applies the
    same rows in memory.)"""
    match event.body:
        case TurnAdmitted() as body:
            return Write.ADMIT, _turn_row(
                key,
                body.generation,
                turn_id=body.turn_id,
                runner_id=body.runner_id,
                phase=TurnPhase.RUNNING,
                stop_requested=False,
                stop_reason="",
                admitted_at=body.admitted_at,
                lease_expires_at=body.lease_expires_at,
                error="",
                traceparent=body.traceparent,
                queued_at=body.queued_at,
            )
        case TurnDequeued() as body:  # never ran: its row is written whole, settled, as it leaves
            expired = body.outcome is TurnOutcome.EXPIRED
            return Write.ADMIT, _turn_row(
                key,
                body.generation,
                turn_id=body.turn_id,
                runner_id=body.runner_id,
                phase=TurnPhase.SETTLED,
                outcome=body.outcome,
                settled_by=SettledBy.WATCHDOG if expired else SettledBy.GATEWAY,
                settled_at=event.time,
                stop_requested=not expired,
                stop_reason=body.reason,
                admitted_at=0,
                lease_expires_at=event.time,
                error="",
                traceparent="",
                queued_at=body.queued_at,
            )
        case TurnQueued() | QueuePaused() | QueueResumed() | QueueReordered():
            return None
        case StopRequested(before_start=True):
            return None
        case StopRequested() as body:
            return Write.STOP, {
                **_turn_key(key, body.generation),
                "phase": TurnPhase.STOPPING,
                "stop_requested": True,
                "stop_reason": body.reason,
                "stop_requested_at": body.requested_at,
                "stop_deadline": body.deadline,
            }
        case ToolCallChanged() as body:
            return Write.TOOL_CALL, {
                **_child_key(key, body.generation),
                "call_id": body.call_id,
                "turn_id": body.turn_id,
                "name": body.call.name,
                "status": body.call.status,
                "error": body.error,
                "opened_at": body.call.opened_at,
                "closed_at": body.call.closed_at,
                "opened_seq": event.seq,
            }
        case InteractionChanged() as body:
            return Write.INTERACTION, {
                **_child_key(key, body.generation),
                "interaction_id": body.interaction_id,
                "turn_id": body.turn_id,
                "kind": body.interaction.kind,
                "status": body.interaction.status,
                "resolution": body.resolution,
                "opened_at": body.interaction.opened_at,
                "closed_at": body.interaction.closed_at,
                "opened_seq": event.seq,
            }
        case TurnSteered() as body:
            return Write.STEER, {
                **_child_key(key, body.generation),
                "steer_id": body.steer_id,
                "turn_id": body.turn_id,
                "status": SteerStatus.PENDING,
                "sent_at": event.time,
                "ended_at": None,
                "content": body.content,
                "content_type": body.content_type,
                "requeued": False,
                "opened_seq": event.seq,
            }
        case SteerEnded() as body:
            return Write.STEER_END, {
                **_turn_key(key, body.generation),
                "key_steer_id": body.steer_id,
                "status": body.status,
                "ended_at": event.time,
                "requeued": body.requeued,
            }
        case TurnSettled(turn=turn):
            return Write.SETTLE, {
                **_turn_key(key, turn.generation),
                "phase": TurnPhase.SETTLED,
                "outcome": turn.outcome,
                "settled_by": turn.settled_by,
                "settled_at": turn.settled_at,
                "stop_requested": turn.stop_requested,
                "stop_reason": turn.stop_reason,
                "error": turn.error,
            }
        case _:
            assert_never(event.body)
