"""What decide() records: the session's ordered event log (seq 1, 2, 3…), one body per change.

A log belongs to one epoch of its session (`Session.epoch`): a store that lost the session starts
a new log, at seq 1 again, in a new epoch, so (epoch, seq) names an event for good.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from turngate.service.core.enums import SteerStatus, TurnOutcome
from turngate.service.core.records import Interaction, SettledTurn, SteerInput, ToolCall


@dataclass(frozen=True, slots=True)
class TurnAdmitted:
    """`from_queue`: promoted from the queue, after waiting `waited` µs."""

    turn_id: str
    runner_id: str
    generation: int
    admitted_at: int
    lease_expires_at: int
    traceparent: str = ""
    from_queue: bool = False
    waited: int = 0
    steer: SteerInput | None = None  # a turn a steer became: the input its runner is to run (S6, S7)
    kind: Literal["turn_admitted"] = "turn_admitted"

    @property
    def queued_at(self) -> int | None:
        """When it joined the queue (None: it did not wait in one)."""
        return self.admitted_at - self.waited if self.from_queue else None


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
    unconsumed_steer_ids: tuple[str, ...] = ()
    kind: Literal["turn_settled"] = "turn_settled"


@dataclass(frozen=True, slots=True)
class TurnQueued:
    """A turn joined the queue at 1-based `position` (1: the head, as an INTERRUPT's turn)."""

    turn_id: str
    runner_id: str
    position: int
    queued_at: int
    expires_at: int
    traceparent: str = ""
    steer: SteerInput | None = None
    kind: Literal["turn_queued"] = "turn_queued"


@dataclass(frozen=True, slots=True)
class TurnDequeued:
    """A queued turn left the queue without running: CANCELLED (a Stop named it, or `cleared` by a
    Stop's CLEAR) or EXPIRED (it waited past its expires_at). `generation` is taken as it leaves:
    its place in history (it never held a lease)."""

    turn_id: str
    runner_id: str
    generation: int
    outcome: TurnOutcome
    queued_at: int
    reason: str = ""
    cleared: bool = False
    kind: Literal["turn_dequeued"] = "turn_dequeued"


@dataclass(frozen=True, slots=True)
class QueuePaused:
    """The end of turn_id (with `outcome`) paused the queue; `stop_requested` when a gateway's Stop
    did (its `stop_reason`)."""

    turn_id: str
    outcome: TurnOutcome
    stop_requested: bool = False
    stop_reason: str = ""
    kind: Literal["queue_paused"] = "queue_paused"


@dataclass(frozen=True, slots=True)
class QueueResumed:
    """ResumeQueue un-paused the queue that turn_id's end had paused."""

    turn_id: str
    kind: Literal["queue_resumed"] = "queue_resumed"


@dataclass(frozen=True, slots=True)
class QueueReordered:
    """MoveQueuedTurn moved `moved_turn_id`: the queue's turns now wait in `turn_ids`' order (Q8)."""

    turn_ids: tuple[str, ...]
    moved_turn_id: str
    kind: Literal["queue_reordered"] = "queue_reordered"

    @property
    def turn_id(self) -> str:
        return self.moved_turn_id


@dataclass(frozen=True, slots=True)
class TurnSteered:
    """A steer reached the running turn (S1): pushed to its runner, which acknowledges it by
    `expires_at` (S2)."""

    turn_id: str
    generation: int
    steer_id: str
    content: str
    content_type: str
    expires_at: int
    kind: Literal["turn_steered"] = "turn_steered"


@dataclass(frozen=True, slots=True)
class SteerEnded:
    """A steer's one end (S2): CONSUMED or DECLINED by the runner, UNCONSUMED when its turn
    settled first (then `requeued` when it joined the queue as a turn of its own, S6), EXPIRED."""

    turn_id: str
    generation: int
    steer_id: str
    status: SteerStatus
    requeued: bool = False
    kind: Literal["steer_ended"] = "steer_ended"


EventBody = (
    TurnAdmitted
    | StopRequested
    | ToolCallChanged
    | InteractionChanged
    | TurnSettled
    | TurnQueued
    | TurnDequeued
    | QueuePaused
    | QueueResumed
    | QueueReordered
    | TurnSteered
    | SteerEnded
)

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
