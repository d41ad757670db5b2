"""The ledger replayed in memory: turns as the ledger will hold them once it has recorded events it
has not yet (redis mode, while the projector is behind or the ledger is down).

Each event becomes the very row `record()` writes for it (`ledger_write`), applied as its
statement applies it: an admission inserts the turn unless it is there; a turn keeps its first
Stop; a tool call or an interaction is inserted, then updated only while it is open or pending;
a steer is inserted once, then ended only while pending; a settlement updates the turn. Applying
events the ledger already holds changes nothing, so a turn read from the ledger may be replayed
onto with any events from before what it has recorded.
Read back after the ledger records the same events, a turn equals its replay (the ledger
contract tests compare the two on every SQL backend).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any, assert_never

from turngate.service.core import Event, InteractionStatus, SessionKey, SteerStatus, ToolCallStatus
from turngate.service.ledger.reads import interaction_view_of, steer_view_of, tool_call_view_of, turn_view_of
from turngate.service.ledger.record import Write, ledger_write
from turngate.service.ports.history import InteractionView, SteerView, ToolCallView, TurnView
from turngate.service.sql.tables import turns

_Columns = dict[str, Any]


def replay(key: SessionKey, recorded: Iterable[TurnView], events: Sequence[Event]) -> dict[int, TurnView]:
    """The turns of `recorded` with `events` (in seq order) applied, and the turns they admit, by
    generation. Events of a turn that neither holds are skipped: it cannot be known whole."""
    held = {view.generation: _Turn.of(view) for view in recorded}
    for event in events:
        if (write := ledger_write(key, event)) is not None:
            _apply(held, *write)
    return {generation: turn.view() for generation, turn in held.items()}


@dataclass(slots=True)
class _Turn:
    """One turn's rows: its `turns` columns, its tool calls, interactions and steers by id, in the
    order they were opened (the ledger's order)."""

    row: _Columns
    calls: dict[str, _Columns]
    asked: dict[str, _Columns]
    sent: dict[str, _Columns]

    @classmethod
    def of(cls, view: TurnView) -> _Turn:
        return cls(
            {
                f.name: getattr(view, f.name)
                for f in fields(view)
                if f.name not in ("tool_calls", "interactions", "steers")
            },
            {call.call_id: _columns(call) for call in view.tool_calls},
            {it.interaction_id: _columns(it) for it in view.interactions},
            {steer.steer_id: _columns(steer) for steer in view.steers},
        )

    def view(self) -> TurnView:
        return turn_view_of(
            self.row,
            tuple(tool_call_view_of(call) for call in self.calls.values()),
            tuple(interaction_view_of(it) for it in self.asked.values()),
            tuple(steer_view_of(steer) for steer in self.sent.values()),
        )


def _columns(view: ToolCallView | InteractionView | SteerView) -> _Columns:
    return {f.name: getattr(view, f.name) for f in fields(view)}


def _apply(held: dict[int, _Turn], kind: Write, row: _Columns) -> None:
    """`row` written as `record()`'s statement of `kind` writes it (ledger/record.py)."""
    generation = row["key_generation"] if "key_generation" in row else row["generation"]
    turn = held.get(generation)
    match kind:
        case Write.ADMIT:
            if turn is None:
                # The columns an admission leaves out are NULL, as in the table.
                held[generation] = _Turn({column.name: None for column in turns.columns} | row, {}, {}, {})
        case Write.STOP:
            if turn is not None and not turn.row["stop_requested"]:
                turn.row |= _set(row)
        case Write.TOOL_CALL:
            if turn is not None:
                _upsert(
                    turn.calls, row["call_id"], row, ToolCallStatus.OPEN, ("status", "error", "closed_at")
                )
        case Write.INTERACTION:
            if turn is not None:
                _upsert(
                    turn.asked,
                    row["interaction_id"],
                    row,
                    InteractionStatus.PENDING,
                    ("status", "resolution", "closed_at"),
                )
        case Write.STEER:
            if turn is not None:
                turn.sent.setdefault(row["steer_id"], row)
        case Write.STEER_END:
            steer = turn.sent.get(row["key_steer_id"]) if turn is not None else None
            if steer is not None and steer["status"] == SteerStatus.PENDING:
                steer |= _set(row)
        case Write.SETTLE:
            if turn is not None:
                turn.row |= _set(row)
        case _:
            assert_never(kind)


def _set(row: _Columns) -> _Columns:
    """The SET clause of a turn update: the row without the key it is matched on."""
    return {name: value for name, value in row.items() if not name.startswith("key_")}


def _upsert(
    children: dict[str, _Columns], child_id: str, row: _Columns, open_status: int, updated: tuple[str, ...]
) -> None:
    """Inserts a tool call or interaction, or updates `updated` while it still has `open_status`."""
    existing = children.get(child_id)
    if existing is None:
        children[child_id] = row
    elif existing["status"] == open_status:
        existing.update({name: row[name] for name in updated})
