"""Reading the ledger from SQL; its rows become views by column name (`turn_view_of`…), whoever
holds them (`replay` too)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from sqlalchemy import Select, Table, select
from sqlalchemy.ext.asyncio import AsyncEngine

from turngate.service.core import (
    InteractionStatus,
    SessionKey,
    SettledBy,
    SettledTurn,
    SteerStatus,
    ToolCallStatus,
    TurnOutcome,
    TurnPhase,
    limits,
)
from turngate.service.ports.history import InteractionView, SteerView, ToolCallView, TurnHistory, TurnView
from turngate.service.sql.engine import unavailable_on_failure
from turngate.service.sql.tables import interactions, steers, tool_calls, turns


class Ledger:
    """`TurnHistory` over one SQL engine."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def get_turn(self, key: SessionKey, turn_id: str) -> TurnView | None:
        with unavailable_on_failure():
            async with self._engine.connect() as conn:
                turn = (
                    await conn.execute(
                        _turns(key)
                        .where(turns.c.turn_id == turn_id)
                        .order_by(turns.c.generation.desc())
                        .limit(1)
                    )
                ).first()
                if turn is None:
                    return None
                calls = await conn.execute(_children(tool_calls, key, turn.generation))
                asked = await conn.execute(_children(interactions, key, turn.generation))
                sent = await conn.execute(_children(steers, key, turn.generation))
        return turn_view_of(
            turn._mapping,
            tuple(tool_call_view_of(c._mapping) for c in calls),
            tuple(interaction_view_of(i._mapping) for i in asked),
            tuple(steer_view_of(s._mapping) for s in sent),
        )

    async def list_turns(self, key: SessionKey, before_generation: int | None, limit: int) -> list[TurnView]:
        query = _turns(key).order_by(turns.c.generation.desc()).limit(limit)
        if before_generation is not None:
            query = query.where(turns.c.generation < before_generation)
        with unavailable_on_failure():
            async with self._engine.connect() as conn:
                rows = await conn.execute(query)
        return [turn_view_of(row._mapping) for row in rows]

    async def recall(self, key: SessionKey) -> tuple[SettledTurn, ...]:
        return await recall(self, key)


async def recall(history: TurnHistory, key: SessionKey) -> tuple[SettledTurn, ...]:
    """The session's last settled turns in `history`, oldest first, as its document remembered
    them (R2)."""
    newest = await history.list_turns(key, None, limits.RECENT_TURNS)
    return tuple(turn for view in reversed(newest) if (turn := settled_turn_of(view)) is not None)


def settled_turn_of(view: TurnView) -> SettledTurn | None:
    """A settled turn's view as the document's memory of it (None: not settled). History keeps no
    principal: a recalled turn is nobody's."""
    if view.outcome is None or view.settled_by is None or view.settled_at is None:
        return None
    return SettledTurn(
        turn_id=view.turn_id,
        runner_id=view.runner_id,
        generation=view.generation,
        outcome=view.outcome,
        settled_by=view.settled_by,
        admitted_at=view.admitted_at,
        settled_at=view.settled_at,
        stop_requested=view.stop_requested,
        stop_reason=view.stop_reason,
        error=view.error,
        queued_at=view.queued_at or 0,
    )


def _turns(key: SessionKey) -> Select[Any]:
    return select(turns).where(turns.c.project_id == key.project_id, turns.c.session_id == key.session_id)


def _children(table: Table, key: SessionKey, generation: int) -> Select[Any]:
    """A turn's tool calls, interactions or steers in the order they were opened (sent)."""
    return (
        select(table)
        .where(
            table.c.project_id == key.project_id,
            table.c.session_id == key.session_id,
            table.c.generation == generation,
        )
        .order_by(table.c.opened_seq)
    )


# The columns of `turns` that a TurnView holds as they are (the others are enums or children).
_PLAIN = tuple(
    f.name
    for f in fields(TurnView)
    if f.name not in ("phase", "outcome", "settled_by", "tool_calls", "interactions", "steers")
)


def turn_view_of(
    row: Mapping[str, Any],
    calls: tuple[ToolCallView, ...] = (),
    asked: tuple[InteractionView, ...] = (),
    sent: tuple[SteerView, ...] = (),
) -> TurnView:
    """A `turns` row as a view, with its tool calls, interactions and steers."""
    return TurnView(
        **{name: row[name] for name in _PLAIN},
        phase=TurnPhase(row["phase"]),
        outcome=None if row["outcome"] is None else TurnOutcome(row["outcome"]),
        settled_by=None if row["settled_by"] is None else SettledBy(row["settled_by"]),
        tool_calls=calls,
        interactions=asked,
        steers=sent,
    )


def tool_call_view_of(row: Mapping[str, Any]) -> ToolCallView:
    """A `tool_calls` row as a view."""
    return ToolCallView(
        row["call_id"],
        row["name"],
        ToolCallStatus(row["status"]),
        row["error"],
        row["opened_at"],
        row["closed_at"],
    )


def interaction_view_of(row: Mapping[str, Any]) -> InteractionView:
    """An `interactions` row as a view."""
    return InteractionView(
        row["interaction_id"],
        row["kind"],
        InteractionStatus(row["status"]),
        row["resolution"],
        row["opened_at"],
        row["closed_at"],
    )


def steer_view_of(row: Mapping[str, Any]) -> SteerView:
    """A `steers` row as a view."""
    return SteerView(
        row["steer_id"],
        SteerStatus(row["status"]),
        row["sent_at"],
        row["ended_at"],
        row["content"],
        row["content_type"],
        row["requeued"],
    )
