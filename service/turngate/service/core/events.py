"""What decide() records: the session's ordered event log (seq 1, 2, 3…), one body per change.

A log belongs to one epoch of its session (`Session.epoch`): a store that lost the session starts
a new log, at seq 1 again, in a new epoch, so (epoch, seq) names an event for good.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from turngate.service.core.records import Interaction, SettledTurn, ToolCall


@dataclass(frozen=True, slots=True)
class TurnAdmitted:
    turn_id: str
    runner_id: str
    generation: int
    admitted_at: int
    lease_expires_at: int
    traceparent: str = ""
    kind: Literal["turn_admitted"] = "turn_admitted"


@dataclass(frozen=True, slots=True)
class StopRequested:
    """A Stop was accepted. `generation` is 0 and `deadline` None when the turn had not started."""

    turn_id: str
    generation: int
    reason: str
    requested_at: int
    deadline: int | None
    before_start: bool = False
    force: bool = False
    kind: Literal["stop_requested"] = "stop_requested"


@dataclass(frozen=True, slots=True)
class ToolCallChanged:
    turn_id: str
    generation: int
    call_id: str
    call: ToolCall
    error: str = ""
    kind: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True)
class InteractionChanged:
    turn_id: str
    generation: int
    interaction_id: str
    interaction: Interaction
    resolution: str = ""
    kind: Literal["interaction"] = "interaction"


@dataclass(frozen=True, slots=True)
class TurnSettled:
    turn: SettledTurn
    interrupted_tool_call_ids: tuple[str, ...] = ()
    cancelled_interaction_ids: tuple[str, ...] = ()
    traceparent: str = ""
    kind: Literal["turn_settled"] = "turn_settled"


EventBody = TurnAdmitted | StopRequested | ToolCallChanged | InteractionChanged | TurnSettled

# The epoch of every document and event written before epochs existed (turngate 0.1.0): below any
# epoch taken from a store clock (µs since 1970), and never 0, which means "none yet".
LEGACY_EPOCH = 1


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of the log: its position, the store-clock time it happened, what happened, and
    the epoch of the log it belongs to."""

    seq: int
    time: int
    body: EventBody
    epoch: int = LEGACY_EPOCH

    @property
    def turn_id(self) -> str:
        return self.body.turn.turn_id if isinstance(self.body, TurnSettled) else self.body.turn_id
