"""What callers ask of a session. Durations are µs; policy values (grace, TTLs, bounds) come from
settings. `principal` is the authenticated caller's name ('' when authentication is off): a turn
belongs to the principal that admitted it."""

from __future__ import annotations

from dataclasses import dataclass

from turngate.service.core import limits
from turngate.service.core.enums import (
    AdmissionMode,
    QueueAction,
    SteerFallback,
    SteerStatus,
    ToolCallStatus,
    TurnOutcome,
)


@dataclass(frozen=True, slots=True)
class Admit:
    """`active_in_project` is how many of the project's sessions had an active turn when the
    caller looked; `max_active_in_project` bounds it (0: no bound).

    `mode` says what happens while another turn holds the session (§7): REJECT refuses, ENQUEUE
    waits in the queue for at most `max_queue_wait` µs, INTERRUPT stops the active turn (guarded by
    `expected_active_turn_id` when set; the stop has `stop_grace`) and waits at the queue's head.
    `max_queue_depth` is the configured bound on the queue. `may_stop_others` says whether the
    caller may stop a turn another principal holds (its role allows Stop: auth/access.py); without
    it, an INTERRUPT may stop only a turn of its own principal."""

    turn_id: str
    runner_id: str
    lease_ttl: int
    traceparent: str = ""
    principal: str = ""
    active_in_project: int = 0
    max_active_in_project: int = 0
    mode: AdmissionMode = AdmissionMode.REJECT
    expected_active_turn_id: str = ""
    max_queue_wait: int = limits.DEFAULT_MAX_QUEUE_WAIT
    max_queue_depth: int = limits.DEFAULT_MAX_QUEUE_DEPTH
    stop_grace: int = limits.DEFAULT_STOP_GRACE
    may_stop_others: bool = False


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """`lease_ttl` None keeps the length chosen at admission."""

    turn_id: str
    generation: int
    lease_ttl: int | None = None
    principal: str = ""


@dataclass(frozen=True, slots=True)
class RecordToolCall:
    turn_id: str
    generation: int
    call_id: str
    name: str
    status: ToolCallStatus
    error: str = ""
    principal: str = ""
    max_open: int = limits.MAX_OPEN_TOOL_CALLS


@dataclass(frozen=True, slots=True)
class RecordInteraction:
    turn_id: str
    generation: int
    interaction_id: str
    kind: str
    principal: str = ""
    max_pending: int = limits.MAX_PENDING_INTERACTIONS


@dataclass(frozen=True, slots=True)
class ResolveInteraction:
    """`request_id` makes it idempotent: a retry gets the first answer for `tombstone_ttl`."""

    interaction_id: str
    resolution: str
    request_id: str = ""
    tombstone_ttl: int = limits.DEFAULT_TOMBSTONE_TTL


@dataclass(frozen=True, slots=True)
class Complete:
    turn_id: str
    generation: int
    outcome: TurnOutcome
    error: str = ""
    principal: str = ""


@dataclass(frozen=True, slots=True)
class Cancel:
    """A Stop. Empty `expected_turn_id` stops whatever is active; `request_id` makes it idempotent.

    `stop_grace` is how long a stopping turn has to settle; `tombstone_ttl` how long a tombstone and
    a request_id's answer are kept. `queue` is what the queue does after this Stop: PAUSE (when
    the stopped turn ends), CONTINUE, or CLEAR (every queued turn is cancelled now).
    """

    expected_turn_id: str
    reason: str
    force: bool
    request_id: str
    stop_grace: int
    tombstone_ttl: int
    queue: QueueAction = QueueAction.PAUSE


@dataclass(frozen=True, slots=True)
class ResumeQueue:
    """Un-pauses the session's queue; the head is admitted at once if the session is idle.
    `request_id` makes it idempotent: a retry gets the first answer for `tombstone_ttl`."""

    request_id: str = ""
    tombstone_ttl: int = limits.DEFAULT_TOMBSTONE_TTL


@dataclass(frozen=True, slots=True)
class ClearQueue:
    """Cancels every turn waiting in the queue (each tombstoned for `tombstone_ttl`, as a Stop
    cancels a queued turn), leaving the active turn alone. `request_id` makes it idempotent."""

    reason: str = ""
    request_id: str = ""
    tombstone_ttl: int = limits.DEFAULT_TOMBSTONE_TTL


@dataclass(frozen=True, slots=True)
class MoveQueuedTurn:
    """Moves queued `turn_id` to the queue's head ('' `after_turn_id`) or right after another queued
    turn (Q8), only if the queue is still at `expected_queue_version` (None: whatever it is).
    `request_id` makes it idempotent: a retry gets the first answer for `tombstone_ttl`."""

    turn_id: str
    after_turn_id: str = ""
    expected_queue_version: int | None = None
    request_id: str = ""
    tombstone_ttl: int = limits.DEFAULT_TOMBSTONE_TTL


@dataclass(frozen=True, slots=True)
class SteerTurn:
    """Input for the running turn `expected_turn_id` (§9). `steer_id` names it (and, when it
    becomes a turn of its own, that turn); a retry with the same `request_id` (or, without one, the
    same `steer_id`) answers the first call for `tombstone_ttl`. The runner acknowledges it within
    `steer_wait`; `requeue` asks that it join the queue if its turn ends first (S6). `fallback`
    says what happens when that turn is not running (S1, S7); a turn it becomes waits at most
    `max_queue_wait`, in a queue of at most `max_queue_depth`, and holds a lease of `lease_ttl`."""

    expected_turn_id: str
    steer_id: str
    content: str
    content_type: str = "text/plain"
    fallback: SteerFallback = SteerFallback.REJECT
    requeue: bool = False
    request_id: str = ""
    steer_wait: int = limits.DEFAULT_STEER_WAIT
    max_steers: int = limits.DEFAULT_MAX_STEERS_PER_TURN
    tombstone_ttl: int = limits.DEFAULT_TOMBSTONE_TTL
    max_queue_wait: int = limits.DEFAULT_MAX_QUEUE_WAIT
    max_queue_depth: int = limits.DEFAULT_MAX_QUEUE_DEPTH
    lease_ttl: int = limits.DEFAULT_LEASE_TTL


@dataclass(frozen=True, slots=True)
class AcknowledgeSteer:
    """The runner's word on a steer of its turn (S2): CONSUMED or DECLINED, fenced like every runner
    write (I2)."""

    turn_id: str
    generation: int
    steer_id: str
    status: SteerStatus
    principal: str = ""


@dataclass(frozen=True, slots=True)
class Expire:
    """The watchdog's tick: settle whatever the clock says is due (the active turn's deadlines and
    queued turns' expiries)."""


@dataclass(frozen=True, slots=True)
class Retire:
    """The watchdog's removal of a session idle for `idle_retention` (R1): it leaves the hot store
    if, once whatever the clock says is due is settled, nothing in it is live."""

    idle_retention: int = limits.DEFAULT_IDLE_RETENTION


RunnerCommand = Heartbeat | RecordToolCall | RecordInteraction | Complete | AcknowledgeSteer
Command = (
    Admit
    | RunnerCommand
    | ResolveInteraction
    | Cancel
    | ResumeQueue
    | ClearQueue
    | MoveQueuedTurn
    | SteerTurn
    | Expire
    | Retire
)
