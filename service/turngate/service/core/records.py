"""Records of what happened inside a turn, shared by the session document, replies and events."""

from __future__ import annotations

from dataclasses import dataclass

from turngate.service.core.enums import InteractionStatus, SettledBy, ToolCallStatus, TurnOutcome


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call of the active turn (its error text lives in events and the ledger only)."""

    name: str
    status: ToolCallStatus
    opened_at: int
    closed_at: int | None = None


@dataclass(frozen=True, slots=True)
class Interaction:
    """One interaction of the active turn (its resolution lives in events and the ledger only)."""

    kind: str
    status: InteractionStatus
    opened_at: int
    closed_at: int | None = None


@dataclass(frozen=True, slots=True)
class StopRequest:
    """An accepted Stop; kept whole so a repeated Stop returns the same answer."""

    requested_at: int
    reason: str
    deadline: int
    cancelled_interaction_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SettledTurn:
    """A settled turn, as remembered by the session (the last few) and reported in replies."""

    turn_id: str
    runner_id: str
    generation: int
    outcome: TurnOutcome
    settled_by: SettledBy
    admitted_at: int
    settled_at: int
    stop_requested: bool = False
    stop_reason: str = ""
    error: str = ""
    principal: str = ""
