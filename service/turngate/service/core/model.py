"""The session document: what decide() reads and returns. Immutable; times are store-clock µs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from turngate.service.core.enums import SessionPhase, SteerStatus, TurnPhase
from turngate.service.core.records import (
    Interaction,
    QueuedTurn,
    QueuePause,
    SettledTurn,
    Steer,
    SteerInput,
    StopRequest,
    ToolCall,
)
from turngate.service.core.replies import RememberedReply


@dataclass(frozen=True, slots=True, order=True)
class SessionKey:
    """Which session a document is: every key, row and event is scoped by project (I11)."""

    project_id: str
    session_id: str


@dataclass(frozen=True, slots=True)
class ActiveTurn:
    """The turn holding the session. `traceparent` is the admitting request's W3C trace context;
    `principal` the authenticated caller that admitted it, the only one that may write to it.
    `claimed` is False for a turn promoted from the queue until its runner shows it knows (an
    admission replay or any runner write); `queued_at` is when such a turn was queued (0: never).
    `steers` are the steers sent to it (S1, S2); `steer` is the input of a turn a steer became (S6,
    S7), answered again to its runner's AdmitTurn."""

    turn_id: str
    runner_id: str
    generation: int
    phase: TurnPhase
    admitted_at: int
    lease_ttl: int
    lease_expires_at: int
    stop: StopRequest | None = None
    tool_calls: Mapping[str, ToolCall] = field(default_factory=dict)
    interactions: Mapping[str, Interaction] = field(default_factory=dict)
    traceparent: str = ""
    principal: str = ""
    claimed: bool = True
    queued_at: int = 0
    steers: Mapping[str, Steer] = field(default_factory=dict)
    steer: SteerInput | None = None

    def pending_steers(self) -> dict[str, Steer]:
        """The steers waiting for the runner's acknowledgement (S2), in the order they came."""
        return {sid: s for sid, s in self.steers.items() if s.status is SteerStatus.PENDING}

    def deadline(self) -> int:
        """The earliest instant at which the clock settles this turn."""
        if self.stop is None:
            return self.lease_expires_at
        return min(self.lease_expires_at, self.stop.deadline)


@dataclass(frozen=True, slots=True)
class RequestMemo:
    """The answer first given to a request_id (of CancelTurn, ResolveInteraction or ResumeQueue),
    replayed on retries until expires_at."""

    reply: RememberedReply
    expires_at: int


# The epoch of a document never written: `decide` gives it one on its first write.
NO_EPOCH = 0


@dataclass(frozen=True, slots=True)
class Session:
    """One session's document. `generation` is the last fencing token issued.

    `tombstones` maps turn ids cancelled before they started to when they are forgotten;
    `recent` holds the last few settled turns, oldest first. `epoch` names this run of the
    session's history: the store-clock time of the document's first write, kept for as long as the
    document lives, so a document the store lost and wrote again is told apart from the old one.
    `queue` holds the turns waiting for the session, in admission order (head first);
    `queue_paused_by` says which turn's end paused it (None: not paused). `touched_at` is when it
    was last written (store clock): how long it has been idle (R1). `queue_version` counts the
    writes that changed the queue (who waits, or in which order): the guard of an edit (Q8).
    """

    next_seq: int = 1
    generation: int = 0
    active: ActiveTurn | None = None
    tombstones: Mapping[str, int] = field(default_factory=dict)
    recent: tuple[SettledTurn, ...] = ()
    requests: Mapping[str, RequestMemo] = field(default_factory=dict)
    epoch: int = NO_EPOCH
    queue: tuple[QueuedTurn, ...] = ()
    queue_paused_by: QueuePause | None = None
    touched_at: int = 0
    queue_version: int = 0

    @property
    def queue_paused(self) -> bool:
        return self.queue_paused_by is not None

    def queued(self, turn_id: str) -> tuple[int, QueuedTurn] | None:
        """The 1-based queue position of turn_id and its entry, if it waits."""
        return next(((i + 1, q) for i, q in enumerate(self.queue) if q.turn_id == turn_id), None)

    @property
    def turn_active(self) -> bool:
        """Whether a turn holds the session (running or stopping). Only such a session counts
        among its project's active sessions (`max_active_in_project`, the active-turns gauge):
        turns waiting in the queue hold no lease and take no slot."""
        return self.active is not None

    @property
    def head(self) -> int:
        """The seq of the last event written (0 before any)."""
        return self.next_seq - 1

    @property
    def phase(self) -> SessionPhase:
        if self.active is None:
            return SessionPhase.IDLE
        if self.active.phase is TurnPhase.STOPPING:
            return SessionPhase.STOPPING
        return SessionPhase.RUNNING

    @property
    def last_settled(self) -> SettledTurn | None:
        """The last turn that ran and settled (a queued turn that expired never ran)."""
        return next((t for t in reversed(self.recent) if t.admitted_at), None)

    def settled(self, turn_id: str) -> SettledTurn | None:
        """The remembered settlement of turn_id."""
        return next((t for t in reversed(self.recent) if t.turn_id == turn_id), None)

    def idle_since(self) -> int | None:
        """Since when nothing in the session is live (R1), None while something is: a turn holds
        it or waits in its queue. A tombstone or a request's answer keeps it live until it is
        forgotten."""
        if self.active is not None or self.queue:
            return None
        remembered = (*self.tombstones.values(), *(memo.expires_at for memo in self.requests.values()))
        return max((self.touched_at, *remembered))

    def deadline(self) -> int | None:
        """When the watchdog must next look at this session (None: nothing to expire): the active
        turn's deadline, a pending steer's expiry (S2) or the earliest queued turn's expiry."""
        return min(self.instants(), default=None)

    def instants(self) -> list[int]:
        """Every instant at which the clock changes this session, besides forgetting."""
        instants = [q.expires_at for q in self.queue]
        if self.active is not None:
            instants.append(self.active.deadline())
            instants.extend(s.expires_at for s in self.active.pending_steers().values())
        return instants
