"""What decide() answers the caller: one reply type per outcome, or a Refusal."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from turngate.service.core.enums import Directive, ErrorReason, SteerStatus, TurnOutcome, TurnPhase
from turngate.service.core.records import Interaction, QueuedTurn, SettledTurn, SteerInput, ToolCall


@dataclass(frozen=True, slots=True)
class Refusal:
    """The command was refused; `message` is for people, the other fields for programs."""

    reason: ErrorReason
    message: str
    active_turn_id: str = ""
    active_phase: TurnPhase | None = None
    active_lease_expires_at: int | None = None
    retry_after: int | None = None
    settled_outcome: TurnOutcome | None = None
    limit: str = ""


@dataclass(frozen=True, slots=True)
class Admitted:
    """The lease; `steer` is the input of a turn a steer became (S6, S7)."""

    turn_id: str
    generation: int
    lease_expires_at: int
    heartbeat_interval: int
    replayed: bool
    steer: SteerInput | None = None


@dataclass(frozen=True, slots=True)
class Queued:
    """The admission waits: no lease yet. `position` is 1-based; `depth` the queue's length."""

    turn: QueuedTurn
    position: int
    depth: int
    replayed: bool


@dataclass(frozen=True, slots=True)
class HeartbeatReply:
    directive: Directive
    lease_expires_at: int | None = None
    stop_deadline: int | None = None
    stop_reason: str = ""
    settled_outcome: TurnOutcome | None = None


@dataclass(frozen=True, slots=True)
class ToolCallReply:
    call_id: str
    call: ToolCall
    error: str
    recorded: bool


@dataclass(frozen=True, slots=True)
class InteractionReply:
    turn_id: str
    interaction_id: str
    interaction: Interaction
    resolution: str
    recorded: bool
    kind: Literal["interaction"] = "interaction"


@dataclass(frozen=True, slots=True)
class CompleteReply:
    turn: SettledTurn
    recorded: bool


@dataclass(frozen=True, slots=True)
class Cancelled:
    cancelled_turn_ids: tuple[str, ...]
    stopping_turn_id: str = ""
    settled: bool = False
    before_start: bool = False
    cancelled_interaction_ids: tuple[str, ...] = ()
    stop_deadline: int | None = None
    queued: bool = False
    cleared_turn_ids: tuple[str, ...] = ()
    # The turn still active, untouched, when this Stop cancelled one that had not started.
    active_turn_id: str = ""
    kind: Literal["cancelled"] = "cancelled"


@dataclass(frozen=True, slots=True)
class Mismatch:
    expected_turn_id: str
    current_turn_id: str
    current_phase: TurnPhase
    expected_outcome: TurnOutcome | None
    kind: Literal["mismatch"] = "mismatch"


@dataclass(frozen=True, slots=True)
class Idle:
    expected_turn_id: str
    expected_outcome: TurnOutcome | None
    last_turn_id: str
    last_outcome: TurnOutcome | None
    kind: Literal["idle"] = "idle"


@dataclass(frozen=True, slots=True)
class Swept:
    """The watchdog's Expire: whether this tick settled the session's turn, and which queued turns
    it expired."""

    settled: bool
    expired_turn_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Retired:
    """The watchdog's Retire: whether the session left the hot store (R1)."""

    retired: bool


@dataclass(frozen=True, slots=True)
class Resumed:
    """ResumeQueue: the turn it admitted ('' if none) and the queue after it."""

    admitted_turn_id: str
    queue: tuple[QueuedTurn, ...]
    kind: Literal["resumed"] = "resumed"


@dataclass(frozen=True, slots=True)
class QueueCleared:
    """ClearQueue: the turns it cancelled, head first, and the active turn that runs on ('' if none)."""

    cleared_turn_ids: tuple[str, ...]
    active_turn_id: str
    kind: Literal["queue_cleared"] = "queue_cleared"


@dataclass(frozen=True, slots=True)
class QueueMoved:
    """MoveQueuedTurn: the queue after the move, and its version (Q8)."""

    queue: tuple[QueuedTurn, ...]
    queue_version: int
    kind: Literal["queue_moved"] = "queue_moved"


@dataclass(frozen=True, slots=True)
class Steered:
    """SteerTurn: the steer reached turn_id, as the event at `seq` (S1)."""

    turn_id: str
    steer_id: str
    seq: int
    replayed: bool = False
    kind: Literal["steered"] = "steered"


@dataclass(frozen=True, slots=True)
class SteerMismatch:
    """SteerTurn: the turn it names is not running, and nothing changed (S1). `reason` is
    ACTIVE_TURN_MISMATCH when another turn holds the session, TURN_NOT_ACTIVE otherwise (the named
    turn is stopping, queued, ended or unknown); `expected_outcome` is how it ended, if it did."""

    expected_turn_id: str
    reason: ErrorReason
    current_turn_id: str = ""
    current_phase: TurnPhase | None = None
    expected_phase: TurnPhase | None = None
    expected_outcome: TurnOutcome | None = None


@dataclass(frozen=True, slots=True)
class SteerQueued:
    """SteerTurn with the ENQUEUE fallback: the steer became the queued turn `turn` (S7), at
    1-based `position` of a queue `depth` long; `admitted` when the session was idle and it runs."""

    turn: QueuedTurn
    position: int
    depth: int
    admitted: bool
    replayed: bool = False
    kind: Literal["steer_queued"] = "steer_queued"


@dataclass(frozen=True, slots=True)
class SteerAcknowledged:
    """AcknowledgeSteer: the steer's end; `recorded` False when it had ended already (S2)."""

    steer_id: str
    status: SteerStatus
    recorded: bool


SteerReply = Steered | SteerMismatch | SteerQueued
CancelReply = Cancelled | Mismatch | Idle
# The answers remembered by request id (CancelTurn, ResolveInteraction, ResumeQueue, ClearQueue).
RememberedReply = CancelReply | InteractionReply | Resumed | QueueCleared | QueueMoved | Steered | SteerQueued
Reply = (
    Refusal
    | Admitted
    | Queued
    | HeartbeatReply
    | ToolCallReply
    | InteractionReply
    | CompleteReply
    | CancelReply
    | Swept
    | Retired
    | Resumed
    | QueueCleared
    | QueueMoved
    | SteerReply
    | SteerAcknowledged
)
