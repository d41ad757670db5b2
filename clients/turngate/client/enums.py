"""The contract's enums as Python enums (protos/turngate/v1/turngate.proto).

Each member's value is the contract's number, so `outcome == pb.TURN_OUTCOME_CANCELLED` holds for
code written against the generated messages; its name is the contract's without the enum's
prefix (`TurnOutcome.CANCELLED`), and `proto_name` is the contract's full name
(`TURN_OUTCOME_CANCELLED`). `ErrorReason` is the exception: its values are `ErrorInfo`'s reason
strings, which is how errors carry it (and what the SDK's errors gave before it had enums).

A number this SDK does not know (sent by a newer service) reads as `UNSPECIFIED`, the contract's
"not set / unknown" zero value, instead of failing: `TurnOutcome(99) is TurnOutcome.UNSPECIFIED`.
The exact number stays in the `raw` message of the value it came with (docs/decisions.md).
"""

from __future__ import annotations

import re
from enum import IntEnum, StrEnum

from turngate.v1 import turngate_pb2 as pb

__all__ = [
    "AdmissionMode",
    "ErrorReason",
    "InteractionStatus",
    "QueueAction",
    "SessionPhase",
    "SessionTokenScope",
    "SettledBy",
    "SteerFallback",
    "SteerStatus",
    "ToolCallStatus",
    "TurnOutcome",
    "TurnPhase",
]


class ContractEnum(IntEnum):
    """Base of the contract's enums: unknown numbers read as UNSPECIFIED (0)."""

    @classmethod
    def _missing_(cls, value: object) -> ContractEnum | None:
        if isinstance(value, int) and not isinstance(value, bool):
            return cls(0)
        return None

    @property
    def proto_name(self) -> str:
        """The contract's name of this value, e.g. `TURN_OUTCOME_CANCELLED`."""
        return f"{_prefix(type(self).__name__)}{self.name}"


def _prefix(enum_name: str) -> str:
    """`TurnOutcome` -> `TURN_OUTCOME_` (buf's STANDARD rule for enum value prefixes)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", enum_name).upper() + "_"


class SessionPhase(ContractEnum):
    """Whether the session has an active turn, and in which phase."""

    UNSPECIFIED = 0
    IDLE = 1
    """No active turn: the next admission is admitted."""
    RUNNING = 2
    """A turn is running."""
    STOPPING = 3
    """A turn was asked to stop and has not settled yet; no new turn is admitted until it does."""


class TurnPhase(ContractEnum):
    """Where one turn is in its life."""

    UNSPECIFIED = 0
    RUNNING = 1
    """Admitted, holding the session."""
    STOPPING = 2
    """A Stop was accepted; still holding the session until it settles."""
    SETTLED = 3
    """Ended with exactly one outcome."""
    QUEUED = 4
    """Waiting in the session's queue: no lease, no generation yet."""


class TurnOutcome(ContractEnum):
    """The one terminal outcome of a turn (UNSPECIFIED until it settles)."""

    UNSPECIFIED = 0
    COMPLETED = 1
    """The runner reported success."""
    FAILED = 2
    """The runner reported a failure."""
    CANCELLED = 3
    """Stopped: by the runner after a Stop, forced by a gateway, or stop grace expired."""
    LOST = 4
    """The lease expired: the runner stopped heartbeating."""
    EXPIRED = 5
    """Waited in the session's queue past its `expires_at` without being admitted."""


class SettledBy(ContractEnum):
    """Who settled a turn (UNSPECIFIED until it settles)."""

    UNSPECIFIED = 0
    RUNNER = 1
    """The runner, reporting its outcome."""
    WATCHDOG = 2
    """The clock: lease expiry or stop-grace expiry."""
    GATEWAY = 3
    """A gateway's forced Stop."""


class ToolCallStatus(ContractEnum):
    """The status of one tool call."""

    UNSPECIFIED = 0
    OPEN = 1
    """Started and not finished."""
    SUCCEEDED = 2
    """Finished and succeeded."""
    FAILED = 3
    """Finished with an error reported by the runner."""
    INTERRUPTED = 4
    """Still open when its turn settled: closed by the service, not a failure of the tool."""


class InteractionStatus(ContractEnum):
    """The status of one interaction (an approval or question put to a person)."""

    UNSPECIFIED = 0
    PENDING = 1
    """Waiting for an answer."""
    RESOLVED = 2
    """Answered (the first answer wins)."""
    CANCELLED = 3
    """Withdrawn by a Stop or by the turn's settlement; a later answer is refused."""


class AdmissionMode(ContractEnum):
    """What an admission does while another turn holds the session (`runner.turn(mode=...)`)."""

    UNSPECIFIED = 0
    """As REJECT."""
    REJECT = 1
    """Refuse: `SessionBusy` (or `SessionQueuePaused` while turns wait in a paused queue)."""
    ENQUEUE = 2
    """Wait in the session's queue, first in first out, for at most `max_queue_wait`; admitted at
    once on an idle session with an empty queue."""
    INTERRUPT = 3
    """Stop the active turn (only if it is `expected_active_turn_id`, when given) and wait at the
    head of the queue; admitted at once on an idle session."""


class QueueAction(ContractEnum):
    """What the session's queue does after a Stop (`gateway.stop(queue=...)`)."""

    UNSPECIFIED = 0
    """As PAUSE."""
    PAUSE = 1
    """The stopped turn's end pauses the queue: nothing starts until `resume_queue`."""
    CONTINUE = 2
    """The queue goes on: its head is admitted when the stopped turn ends."""
    CLEAR = 3
    """Every queued turn is cancelled now, in the Stop's own write."""


class SteerStatus(ContractEnum):
    """Where a steer is: PENDING until its one end (`gateway.steer`, `turn.acknowledge`)."""

    UNSPECIFIED = 0
    PENDING = 1
    """Sent to the running turn; its runner has not answered yet."""
    CONSUMED = 2
    """The runner took it into the turn."""
    DECLINED = 3
    """The runner chose not to take it."""
    UNCONSUMED = 4
    """The turn ended before its runner answered (requeued as a turn when the sender asked)."""
    EXPIRED = 5
    """The runner did not answer within the service's steer wait."""


class SteerFallback(ContractEnum):
    """What a steer does when the turn it names is not running (`gateway.steer(fallback=...)`)."""

    UNSPECIFIED = 0
    """As REJECT."""
    REJECT = 1
    """Answer `SteerMismatch` and change nothing."""
    ENQUEUE = 2
    """Queue the content as a turn of its own (turn id = steer id) for the same runner."""


class SessionTokenScope(ContractEnum):
    """What a session token allows on its one session (`gateway.mint_session_token`)."""

    UNSPECIFIED = 0
    WATCH = 1
    """WatchSession, GetSession, GetTurn and ListTurns."""
    STOP = 2
    """CancelTurn."""


class ErrorReason(StrEnum):
    """Why the service refused a request: `google.rpc.ErrorInfo`'s reason. A string enum, so a
    reason still equals its name (`reason == "SESSION_TURN_IN_USE"`), as when the SDK gave plain
    strings; UNSPECIFIED ("", falsy) when the error carried no reason of the contract, or one this
    SDK does not know (a newer service's). `number` is the contract's `ErrorReason` number."""

    UNSPECIFIED = ""
    SESSION_TURN_IN_USE = "SESSION_TURN_IN_USE"
    """Another turn is running in the session (retry later)."""
    SESSION_STOPPING = "SESSION_STOPPING"
    """Another turn is stopping; the session frees when it settles (retry later)."""
    TURN_CANCELLED = "TURN_CANCELLED"
    """This turn was cancelled before it started; never retry it."""
    TURN_ALREADY_SETTLED = "TURN_ALREADY_SETTLED"
    """This turn already ran and settled."""
    TURN_OWNED_BY_OTHER_RUNNER = "TURN_OWNED_BY_OTHER_RUNNER"
    """This turn is active under another runner id."""
    TURN_NOT_ACTIVE = "TURN_NOT_ACTIVE"
    """The lease presented is not the active turn's (a write from a stale runner)."""
    INTERACTION_NOT_PENDING = "INTERACTION_NOT_PENDING"
    """The interaction is resolved, cancelled or unknown; the first answer won."""
    LIMIT_EXCEEDED = "LIMIT_EXCEEDED"
    """A limit was exceeded (per turn, per project, per watcher)."""
    TURN_HELD_BY_OTHER_PRINCIPAL = "TURN_HELD_BY_OTHER_PRINCIPAL"
    """The turn was admitted to another authenticated principal."""
    SESSION_QUEUE_FULL = "SESSION_QUEUE_FULL"
    """The session's queue holds `max_queue_depth` turns already."""
    SESSION_QUEUE_PAUSED = "SESSION_QUEUE_PAUSED"
    """No turn is active but turns wait in a paused queue: enqueue, or have it resumed."""
    ACTIVE_TURN_MISMATCH = "ACTIVE_TURN_MISMATCH"
    """An INTERRUPT's `expected_active_turn_id` is not the active turn: nothing changed."""
    WRITE_OUTCOME_UNKNOWN = "WRITE_OUTCOME_UNKNOWN"
    """Not a refusal: the service's store lost a write's reply; it may have taken effect. Send the
    same request again to learn what it did (`errors.WriteOutcomeUnknown`)."""
    STEER_NOT_FOUND = "STEER_NOT_FOUND"
    """An acknowledgement named no steer of the turn."""
    QUEUE_VERSION_MISMATCH = "QUEUE_VERSION_MISMATCH"
    """A queue edit's `expected_queue_version` is not the queue's: read it again."""
    TURN_NOT_QUEUED = "TURN_NOT_QUEUED"
    """A queue edit named a turn that is not in the queue."""

    @classmethod
    def _missing_(cls, value: object) -> ErrorReason | None:
        return cls.UNSPECIFIED if isinstance(value, str) else None

    @classmethod
    def named(cls, name: str) -> ErrorReason:
        """The reason an `ErrorInfo` names (`SESSION_TURN_IN_USE`); UNSPECIFIED for '' or a name
        this SDK does not know."""
        return cls(name)

    @property
    def proto_name(self) -> str:
        """The contract's name of this value, e.g. `ERROR_REASON_TURN_CANCELLED`."""
        return f"{_prefix(type(self).__name__)}{self.name}"

    @property
    def number(self) -> int:
        """The contract's number of this value (`AdmissionRefusal.reason`)."""
        return pb.ErrorReason.Value(self.proto_name)

    @classmethod
    def numbered(cls, number: int) -> ErrorReason:
        """The reason the contract's `number` is (`number`'s inverse); UNSPECIFIED for one this SDK
        does not know."""
        return next((member for member in cls if member.number == number), cls.UNSPECIFIED)
