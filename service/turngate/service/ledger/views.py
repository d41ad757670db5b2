"""What the ledger answers, whichever store keeps it: turns with their tool calls and interactions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from turngate.service.core import InteractionStatus, SettledBy, ToolCallStatus, TurnOutcome, TurnPhase
from turngate.service.store.base import SessionKey


@dataclass(frozen=True, slots=True)
class ToolCallView:
    call_id: str
    name: str
    status: ToolCallStatus
    error: str
    opened_at: int
    closed_at: int | None


@dataclass(frozen=True, slots=True)
class InteractionView:
    interaction_id: str
    kind: str
    status: InteractionStatus
    resolution: str
    opened_at: int
    closed_at: int | None


@dataclass(frozen=True, slots=True)
class TurnView:
    """One turn as the ledger recorded it; `lease_expires_at` is the lease given at admission."""

    turn_id: str
    runner_id: str
    generation: int
    phase: TurnPhase
    outcome: TurnOutcome | None
    settled_by: SettledBy | None
    stop_requested: bool
    stop_reason: str
    stop_requested_at: int | None
    stop_deadline: int | None
    admitted_at: int
    settled_at: int | None
    lease_expires_at: int
    error: str
    traceparent: str
    tool_calls: tuple[ToolCallView, ...] = ()
    interactions: tuple[InteractionView, ...] = ()


class TurnHistory(Protocol):
    """Reads of the ledger; a failing database raises StoreUnavailable."""

    async def get_turn(self, key: SessionKey, turn_id: str) -> TurnView | None:
        """The latest generation of `turn_id` in the session, its calls and interactions in order."""
        ...

    async def list_turns(self, key: SessionKey, before_generation: int | None, limit: int) -> list[TurnView]:
        """Up to `limit` turns, newest first, older than `before_generation` if given; without calls."""
        ...
