"""What the SDK returns: the contract's messages as frozen dataclasses of Python types.

Field names are the contract's (protos/turngate/v1/turngate.proto); enums are `turngate.client.enums`;
times are aware UTC datetimes (None where the contract leaves them unset until something happens);
durations are float seconds; repeated fields are tuples; a message field that is unset (a
snapshot without an active turn) is None.

Every value built from a message keeps it as `raw` (not shown by repr, ignored by ==): an escape
hatch to fields this SDK does not know yet and to protobuf's JSON mapping (`turngate --json`).
It is None for values constructed by hand. They are built in one place, `turngate.client.convert`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeAlias

from turngate.client.enums import (
    ErrorReason,
    InteractionStatus,
    SessionPhase,
    SessionTokenScope,
    SettledBy,
    SteerStatus,
    ToolCallStatus,
    TurnOutcome,
    TurnPhase,
)
from turngate.v1 import turngate_pb2 as pb

__all__ = [
    "AdmissionRefusal",
    "Cancelled",
    "Event",
    "EventBody",
    "Idle",
    "Interaction",
    "InteractionChanged",
    "Mismatch",
    "MovedQueue",
    "QueuePaused",
    "QueueReordered",
    "QueueResumed",
    "QueuedTurn",
    "ResumedQueue",
    "SessionRef",
    "SessionSnapshot",
    "SessionToken",
    "Steer",
    "SteerAcknowledgement",
    "SteerEnded",
    "SteerInput",
    "SteerMismatch",
    "SteerQueued",
    "SteerRecord",
    "SteerResult",
    "Steered",
    "StopRequested",
    "StopResult",
    "ToolCall",
    "ToolCallChanged",
    "TurnAdmitted",
    "TurnDequeued",
    "TurnLease",
    "TurnQueued",
    "TurnRecord",
    "TurnSettled",
    "TurnSteered",
    "UnknownEvent",
]


@dataclass(frozen=True)
class SessionRef:
    """Names one session of one project."""

    project_id: str
    session_id: str
    raw: pb.SessionRef | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class TurnLease:
    """What a runner presents on every write of its turn: the turn and its fencing token."""

    session: SessionRef
    turn_id: str
    generation: int
    raw: pb.TurnLease | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class ToolCall:
    """One tool call of a turn."""

    call_id: str
    name: str
    status: ToolCallStatus
    error: str
    """With FAILED: the runner's error text."""
    opened_at: datetime
    closed_at: datetime | None
    """None while OPEN."""
    raw: pb.ToolCall | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class Interaction:
    """One interaction of a turn: a question or approval put to a person."""

    interaction_id: str
    kind: str
    status: InteractionStatus
    resolution: str
    """With RESOLVED: the answer."""
    opened_at: datetime
    closed_at: datetime | None
    """When it was resolved or cancelled."""
    raw: pb.Interaction | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class SteerInput:
    """What a steer carries to its runner; for a turn a steer became, the input it is to run."""

    steer_id: str
    """The steer, and the turn it became when it became one."""
    content: str
    content_type: str
    """`text/plain` unless the sender said otherwise (`application/json` for structure)."""
    raw: pb.SteerInput | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class SteerRecord:
    """A steer of a turn, as `get_turn` lists them."""

    steer_id: str
    status: SteerStatus
    """PENDING, or its one end."""
    sent_at: datetime
    ended_at: datetime | None
    """None while PENDING."""
    content: str
    content_type: str
    requeued: bool
    """With UNCONSUMED: it joined the queue as a turn of its own."""
    raw: pb.SteerRecord | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class TurnRecord:
    """One turn: what a snapshot, a settlement, `get_turn` or `list_turns` reports."""

    turn_id: str
    runner_id: str
    generation: int
    """Its fencing token."""
    phase: TurnPhase
    outcome: TurnOutcome
    """UNSPECIFIED until it settles."""
    settled_by: SettledBy
    """UNSPECIFIED until it settles."""
    stop_requested: bool
    admitted_at: datetime
    settled_at: datetime | None
    error: str
    """The error reported with FAILED (or CANCELLED) by the runner."""
    tool_calls: tuple[ToolCall, ...]
    """In the order they were opened; filled by `get_turn` only."""
    interactions: tuple[Interaction, ...]
    """In the order they were opened; filled by `get_turn` only."""
    lease_expires_at: datetime | None
    """While active: when the lease ends unless extended."""
    stop_reason: str
    stop_deadline: datetime | None
    """While stopping: when the service settles it CANCELLED."""
    queued_at: datetime | None = None
    """For a turn that waited in the session's queue: when it was queued (then `admitted_at` is
    when it was promoted; a turn that left the queue without running has generation 0)."""
    waited: float | None = None
    """For a turn that waited in the queue: seconds until it was admitted or left the queue."""
    trace_id: str = ""
    """The W3C trace id of the request that admitted it ('' when it carried none)."""
    steers: tuple[SteerRecord, ...] = ()
    """Its steers, in the order they came; filled by `get_turn` only."""
    pending_steer_ids: tuple[str, ...] = ()
    """While active: the steers its runner has not answered yet."""
    raw: pb.TurnRecord | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class QueuedTurn:
    """A turn waiting in a session's queue."""

    turn_id: str
    runner_id: str
    position: int
    """1-based place in the queue (1: admitted next)."""
    queued_at: datetime
    expires_at: datetime
    """When it leaves the queue EXPIRED unless admitted before."""
    steer: SteerInput | None = None
    """A turn a steer became: the input its runner is to run."""
    raw: pb.QueuedTurn | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class SessionSnapshot:
    """The session's state at one point of its log (`seq`); also the first event of a watch."""

    session: SessionRef
    seq: int
    """The last event reflected (0 for a session that never had one)."""
    phase: SessionPhase
    active: TurnRecord | None
    last_settled: TurnRecord | None
    resync: bool
    """In a watch: the cursor could not be resumed, or the session's log started again under the
    watch (the service's store lost it); the events between the cursor and `seq` are not
    replayed."""
    epoch: int = 0
    """The epoch of the session's log (0 from a service older than epochs)."""
    queue: tuple[QueuedTurn, ...] = ()
    """The turns waiting for the session, head first."""
    queue_paused: bool = False
    """The queue waits for `resume_queue` (a turn's end paused it)."""
    queue_paused_by: str = ""
    """The turn whose end paused the queue."""
    queue_pause: QueuePaused | None = None
    """With `queue_paused`: what paused it (the turn, how it ended, the Stop that ended it)."""
    queue_version: int = 0
    """How many writes have changed the queue: `move_queued_turn`'s `expected_queue_version`."""
    raw: pb.SessionSnapshot | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class SessionSummary:
    """A session of `list_sessions`: its state as `get_session` shows it, and its last activity."""

    snapshot: SessionSnapshot
    last_activity_at: datetime
    """When the newest event of the session that the service's history holds was written (the
    service's clock): what the list is ordered by."""
    raw: pb.SessionSummary | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class ProjectSummary:
    """A project of `list_projects`: one the caller may act on that has sessions."""

    project_id: str
    last_activity_at: datetime
    """When the newest event of any of its sessions was written (the service's clock)."""
    raw: pb.ProjectSummary | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class TurnAdmitted:
    """A turn was admitted (`turn` is RUNNING)."""

    turn: TurnRecord
    from_queue: bool = False
    """It was promoted from the session's queue (its runner picks up the lease by sending the same
    admission again, which `runner.turn` does)."""
    waited: float | None = None
    """With `from_queue`: seconds it waited."""
    steer: SteerInput | None = None
    """A turn a steer became: the input its runner is to run."""
    raw: pb.TurnAdmitted | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class TurnQueued:
    """A turn joined the session's queue."""

    turn: QueuedTurn
    position: int
    """Its 1-based place (1 for an INTERRUPT's turn)."""
    raw: pb.TurnQueued | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class TurnDequeued:
    """A queued turn left the queue without running."""

    turn_id: str
    runner_id: str
    outcome: TurnOutcome
    """CANCELLED (a Stop named it, or cleared the queue) or EXPIRED (waited past `expires_at`)."""
    reason: str
    """The Stop's reason, when a Stop removed it."""
    cleared: bool
    """A Stop's `QueueAction.CLEAR` removed it."""
    waited: float
    """Seconds it waited in the queue."""
    raw: pb.TurnDequeued | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class QueuePaused:
    """A turn's end paused the queue: nothing is admitted from it until `resume_queue`."""

    turn_id: str
    """The turn whose end paused it."""
    outcome: TurnOutcome
    """How that turn ended (FAILED, LOST, or CANCELLED by a Stop)."""
    stop_requested: bool = False
    """A gateway's Stop of that turn paused it (saying PAUSE); otherwise the turn's own end did."""
    stop_reason: str = ""
    """With `stop_requested`: the Stop's reason."""
    raw: pb.QueuePaused | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class QueueResumed:
    """`resume_queue` un-paused the queue."""

    turn_id: str
    """The turn whose end had paused it."""
    raw: pb.QueueResumed | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class StopRequested:
    """A Stop was accepted."""

    turn_id: str
    generation: int
    """The turn's fencing token (0 when it had not started)."""
    reason: str
    deadline: datetime | None
    """When the service settles it CANCELLED if its runner has not (None with force or
    before_start)."""
    before_start: bool
    force: bool
    raw: pb.StopRequested | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class ToolCallChanged:
    """A tool call was opened or closed."""

    turn_id: str
    generation: int
    tool_call: ToolCall
    raw: pb.ToolCallChanged | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class InteractionChanged:
    """An interaction was opened, resolved or cancelled."""

    turn_id: str
    generation: int
    interaction: Interaction
    raw: pb.InteractionChanged | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class TurnSettled:
    """A turn settled: its one terminal outcome."""

    turn: TurnRecord
    interrupted_tool_call_ids: tuple[str, ...]
    """Tool calls still open at settlement, now INTERRUPTED."""
    cancelled_interaction_ids: tuple[str, ...]
    """Interactions still pending at settlement, now CANCELLED."""
    trace_id: str
    """The W3C trace id of the admitting request (32 hex digits), when it carried one."""
    unconsumed_steer_ids: tuple[str, ...] = ()
    """Steers still pending at settlement, now UNCONSUMED."""
    raw: pb.TurnSettled | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class TurnSteered:
    """A steer reached the running turn: its runner folds it in and acknowledges it."""

    turn_id: str
    generation: int
    steer: SteerInput
    expires_at: datetime | None
    """When it ends EXPIRED unless acknowledged."""
    raw: pb.TurnSteered | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class SteerEnded:
    """A steer's one end: CONSUMED, DECLINED, UNCONSUMED or EXPIRED."""

    turn_id: str
    generation: int
    steer_id: str
    status: SteerStatus
    requeued: bool
    """With UNCONSUMED: it joined the queue as a turn of its own."""
    raw: pb.SteerEnded | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class QueueReordered:
    """`move_queued_turn` changed the queue's order."""

    turn_ids: tuple[str, ...]
    """The queued turns, head first."""
    moved_turn_id: str
    raw: pb.QueueReordered | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class UnknownEvent:
    """An event of a kind this SDK does not know (sent by a newer service): skip it, or read
    the `Event`'s `raw` message."""


EventBody: TypeAlias = (
    SessionSnapshot
    | TurnAdmitted
    | StopRequested
    | ToolCallChanged
    | InteractionChanged
    | TurnSettled
    | TurnQueued
    | TurnDequeued
    | QueuePaused
    | QueueResumed
    | TurnSteered
    | SteerEnded
    | QueueReordered
    | UnknownEvent
)
"""What happened: match on it (`case TurnSettled(turn=turn): ...`)."""

_KINDS: dict[type[EventBody], str] = {
    SessionSnapshot: "snapshot",
    TurnAdmitted: "turn_admitted",
    StopRequested: "stop_requested",
    ToolCallChanged: "tool_call",
    InteractionChanged: "interaction",
    TurnSettled: "turn_settled",
    TurnQueued: "turn_queued",
    TurnDequeued: "turn_dequeued",
    QueuePaused: "queue_paused",
    QueueResumed: "queue_resumed",
    TurnSteered: "turn_steered",
    SteerEnded: "steer_ended",
    QueueReordered: "queue_reordered",
    UnknownEvent: "",
}


@dataclass(frozen=True)
class Event:
    """One entry of the session's ordered, gapless event log, as a watch yields it."""

    seq: int
    """Position in the log: 1, 2, 3… A snapshot's seq is the head it reflects."""
    time: datetime
    """When it happened (the store's clock)."""
    session: SessionRef
    body: EventBody
    """What happened (the contract's `kind` oneof)."""
    epoch: int = 0
    """The epoch of the log the event is in: a session the service's store lost starts a new log,
    from seq 1 again, in a new epoch. A position in the log is (`epoch`, `seq`); resume a watch
    with both (0 from a service older than epochs)."""
    raw: pb.SessionEvent | None = field(default=None, repr=False, compare=False)

    @property
    def kind(self) -> str:
        """The contract's name of what happened: `snapshot`, `turn_admitted`, `stop_requested`,
        `tool_call`, `interaction`, `turn_settled`, `turn_queued`, `turn_dequeued`,
        `queue_paused`, `queue_resumed`, `turn_steered`, `steer_ended`, `queue_reordered` (''
        for an `UnknownEvent`)."""
        return _KINDS[type(self.body)]


@dataclass(frozen=True)
class Cancelled:
    """The Stop cancelled the expected turn (or, unguarded, the active one, or with
    `QueueAction.CLEAR` on an idle session the queued turns)."""

    cancelled_turn_ids: tuple[str, ...]
    stopping_turn_id: str
    """The turn now STOPPING ('' when it settled at once or had not started)."""
    settled: bool
    """The turn settled CANCELLED at once (force)."""
    before_start: bool
    """The turn was never admitted: it is refused TURN_CANCELLED when it arrives."""
    cancelled_interaction_ids: tuple[str, ...]
    stop_deadline: datetime | None
    """When the service settles the stopping turn CANCELLED if its runner has not."""
    queued: bool = False
    """The expected turn was waiting in the queue: it left it CANCELLED (its runner's wait ends
    with `QueuedTurnCancelled`)."""
    cleared_turn_ids: tuple[str, ...] = ()
    """The queued turns cancelled by `QueueAction.CLEAR`."""
    active_turn_id: str = ""
    """With `before_start` or `queued`: the turn that is active and runs on, untouched by this
    Stop ('' when none is)."""
    raw: pb.CancelTurnResponse.Cancelled | None = field(default=None, repr=False, compare=False)

    @property
    def stopped_running_turn(self) -> bool:
        """Whether this Stop stopped a turn that was running (it is now stopping, or settled at
        once). False when it cancelled a turn that had not started or was waiting in the queue:
        nothing running was stopped, and `active_turn_id` (if any) goes on. What a gateway shows
        its user as "stopped" must follow this, not the answer being `Cancelled`."""
        return bool(self.stopping_turn_id) or self.settled


@dataclass(frozen=True)
class Mismatch:
    """The expected turn already ended and another turn is active: nothing changed."""

    expected_turn_id: str
    current_turn_id: str
    current_phase: TurnPhase
    expected_outcome: TurnOutcome
    raw: pb.CancelTurnResponse.Mismatch | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class Idle:
    """Nothing is active: nothing changed."""

    expected_turn_id: str
    expected_outcome: TurnOutcome
    """How the expected turn ended, when known."""
    last_turn_id: str
    """The session's last settled turn, when known."""
    last_outcome: TurnOutcome
    raw: pb.CancelTurnResponse.Idle | None = field(default=None, repr=False, compare=False)


StopResult: TypeAlias = Cancelled | Mismatch | Idle
"""What a Stop did."""


@dataclass(frozen=True)
class ResumedQueue:
    """The queue after `resume_queue`."""

    admitted_turn_id: str
    """The turn admitted from the queue's head ('' when a turn is still active, the queue is
    empty, or it was not paused)."""
    queue: tuple[QueuedTurn, ...]
    """The turns still waiting, head first."""
    raw: pb.ResumeQueueResponse | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class Steered:
    """The steer reached the running turn, as the event at `seq`."""

    turn_id: str
    steer_id: str
    seq: int
    replayed: bool
    """An earlier call with the same request id (or steer id) sent it."""
    raw: pb.SteerTurnResponse.Steered | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class SteerMismatch:
    """The turn named is not running: nothing changed (a retry answers as things are then)."""

    expected_turn_id: str
    reason: ErrorReason
    """ACTIVE_TURN_MISMATCH (another turn holds the session) or TURN_NOT_ACTIVE (none does, or
    the named turn is stopping, queued, ended or unknown)."""
    current_turn_id: str
    """The turn that holds the session ('' when none does)."""
    current_phase: TurnPhase
    expected_phase: TurnPhase
    """Where the named turn is: STOPPING, QUEUED, SETTLED, or UNSPECIFIED for one never seen."""
    expected_outcome: TurnOutcome
    """How the named turn ended, if it did."""
    raw: pb.SteerTurnResponse.Mismatch | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class SteerQueued:
    """The ENQUEUE fallback made the steer a turn of its own (turn id = steer id)."""

    turn: QueuedTurn
    position: int
    """Its 1-based place; 0 when admitted at once."""
    queue_depth: int
    admitted: bool
    """The session was idle: the turn was admitted at once."""
    replayed: bool
    raw: pb.SteerTurnResponse.Queued | None = field(default=None, repr=False, compare=False)


SteerResult: TypeAlias = Steered | SteerMismatch | SteerQueued
"""What became of a steer."""


@dataclass(frozen=True)
class Steer:
    """A steer a running turn received (`turn.steers`): fold it into the next step, then
    `turn.acknowledge(steer_id)`."""

    steer_id: str
    content: str
    content_type: str
    expires_at: datetime | None
    """When it ends EXPIRED unless acknowledged (None when it was read after a resync)."""


@dataclass(frozen=True)
class SteerAcknowledgement:
    """The steer's end after `turn.acknowledge`."""

    steer_id: str
    status: SteerStatus
    """Its one end: the one given, or the one it had already when `recorded` is False."""
    recorded: bool
    raw: pb.AcknowledgeSteerResponse | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class MovedQueue:
    """The queue after `move_queued_turn`."""

    queue: tuple[QueuedTurn, ...]
    """Head first."""
    queue_version: int
    raw: pb.MoveQueuedTurnResponse | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class SessionToken:
    """A token reaching one session, for a web page (`gateway.mint_session_token`)."""

    token: str = field(repr=False)
    """The bearer token (a JWT): a secret, so repr leaves it out."""
    expires_at: datetime
    """When the service stops accepting it."""
    scopes: tuple[SessionTokenScope, ...]
    """WATCH, and STOP when it may stop the session's turns."""
    raw: pb.MintSessionTokenResponse | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class AdmissionRefusal:
    """The detail of an admission refusal: the turn in the way, and when to try again."""

    active_turn_id: str
    active_phase: TurnPhase
    active_lease_expires_at: datetime | None
    retry_after: float
    """Seconds until the active turn's earliest deadline (lease or stop grace); 0 when none."""
    settled_outcome: TurnOutcome
    """For TURN_ALREADY_SETTLED: how that turn ended."""
