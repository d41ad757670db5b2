"""The vocabulary of the state machine. Values equal the contract's numbers, so the API maps them by value."""

from __future__ import annotations

from enum import IntEnum


class SessionPhase(IntEnum):
    IDLE = 1
    RUNNING = 2
    STOPPING = 3


class TurnPhase(IntEnum):
    RUNNING = 1
    STOPPING = 2
    SETTLED = 3
    QUEUED = 4


class TurnOutcome(IntEnum):
    COMPLETED = 1
    FAILED = 2
    CANCELLED = 3
    LOST = 4
    EXPIRED = 5


class SettledBy(IntEnum):
    RUNNER = 1
    WATCHDOG = 2
    GATEWAY = 3


class ToolCallStatus(IntEnum):
    OPEN = 1
    SUCCEEDED = 2
    FAILED = 3
    INTERRUPTED = 4


class InteractionStatus(IntEnum):
    PENDING = 1
    RESOLVED = 2
    CANCELLED = 3


class Directive(IntEnum):
    CONTINUE = 1
    STOP = 2
    ABANDON = 3


class ErrorReason(IntEnum):
    SESSION_TURN_IN_USE = 1
    SESSION_STOPPING = 2
    TURN_CANCELLED = 3
    TURN_ALREADY_SETTLED = 4
    TURN_OWNED_BY_OTHER_RUNNER = 5
    TURN_NOT_ACTIVE = 6
    INTERACTION_NOT_PENDING = 7
    LIMIT_EXCEEDED = 8
    TURN_HELD_BY_OTHER_PRINCIPAL = 9
    SESSION_QUEUE_FULL = 10
    SESSION_QUEUE_PAUSED = 11
    ACTIVE_TURN_MISMATCH = 12
    # Not a refusal: a store's answer when a write's outcome is unknown (never decide()'s).
    WRITE_OUTCOME_UNKNOWN = 13
    STEER_NOT_FOUND = 14
    QUEUE_VERSION_MISMATCH = 15
    TURN_NOT_QUEUED = 16


class AdmissionMode(IntEnum):
    """What an admission does while another turn holds the session (docs/design.md §7)."""

    REJECT = 1
    ENQUEUE = 2
    INTERRUPT = 3


class QueueAction(IntEnum):
    """What the queue does once the turn a Stop names has ended."""

    PAUSE = 1
    CONTINUE = 2
    CLEAR = 3


class SteerStatus(IntEnum):
    """Where a steer is (docs/design.md §9): PENDING until its one end (S2)."""

    PENDING = 1
    CONSUMED = 2
    DECLINED = 3
    UNCONSUMED = 4
    EXPIRED = 5


class SteerFallback(IntEnum):
    """What a steer does when the turn it names is not running (S1, S6)."""

    REJECT = 1
    ENQUEUE = 2
