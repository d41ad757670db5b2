"""Records of what happened inside a turn, shared by the session document, replies and events."""

from __future__ import annotations

from dataclasses import dataclass

from turngate.service.core.enums import (
    InteractionStatus,
    QueueAction,
    SettledBy,
    SteerStatus,
    ToolCallStatus,
    TurnOutcome,
)


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
class SteerInput:
    """What a steer carries to a runner: kept in the document only while it waits for one (a
    pending steer's, or a queued turn's that a steer became: S6, S7)."""

    steer_id: str
    content: str
    content_type: str


@dataclass(frozen=True, slots=True)
class Steer:
    """A steer of the active turn (S1-S5). `input` is kept while PENDING only; `seq` is the
    turn_steered event's, answered again to a repeated SteerTurn. `requeue_wait` > 0: unconsumed at
    the turn's end, it joins the queue for that long (S6)."""

    status: SteerStatus
    sent_at: int
    expires_at: int
    seq: int
    input: SteerInput | None = None
    requeue_wait: int = 0
    ended_at: int | None = None


@dataclass(frozen=True, slots=True)
class StopRequest:
    """An accepted Stop; kept whole so a repeated Stop returns the same answer. `queue` is what the
    queue does when the stopped turn ends (an INTERRUPT's stop is CONTINUE)."""

    requested_at: int
    reason: str
    deadline: int
    cancelled_interaction_ids: tuple[str, ...] = ()
    queue: QueueAction = QueueAction.PAUSE


@dataclass(frozen=True, slots=True)
class QueuedTurn:
    """A turn waiting in the session's queue: no lease, no generation, nothing written by it yet.
    `lease_ttl`, `traceparent` and `principal` are its admission's, kept for its promotion."""

    turn_id: str
    runner_id: str
    queued_at: int
    expires_at: int
    lease_ttl: int
    traceparent: str = ""
    principal: str = ""
    steer: SteerInput | None = None  # a turn a steer became (S6, S7): its input, for its runner


@dataclass(frozen=True, slots=True)
class QueuePause:
    """Why the queue is paused: the turn whose end paused it, and that end; `stop_requested` when a
    gateway's Stop of it did (saying PAUSE), with the Stop's `stop_reason`."""

    turn_id: str
    outcome: TurnOutcome
    stop_requested: bool = False
    stop_reason: str = ""


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
    # When it joined the queue (0: it never waited); a turn that never ran has generation 0.
    queued_at: int = 0
