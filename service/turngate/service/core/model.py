"""The session document: what decide() reads and returns. Immutable; times are store-clock µs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from turngate.service.core.enums import SessionPhase, TurnPhase
from turngate.service.core.records import Interaction, SettledTurn, StopRequest, ToolCall
from turngate.service.core.replies import CancelReply


@dataclass(frozen=True, slots=True, order=True)
class SessionKey:
    """Which session a document is: every key, row and event is scoped by project (I11)."""

    project_id: str
    session_id: str


@dataclass(frozen=True, slots=True)
class ActiveTurn:
    """The turn holding the session. `traceparent` is the admitting request's W3C trace context;
    `principal` the authenticated caller that admitted it, the only one that may write to it."""

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

    def deadline(self) -> int:
        """The earliest instant at which the clock settles this turn."""
        if self.stop is None:
            return self.lease_expires_at
        return min(self.lease_expires_at, self.stop.deadline)


@dataclass(frozen=True, slots=True)
class RequestMemo:
    """The answer first given to a CancelTurn request_id, replayed on retries until expires_at."""

    reply: CancelReply
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
    """

    next_seq: int = 1
    generation: int = 0
    active: ActiveTurn | None = None
    tombstones: Mapping[str, int] = field(default_factory=dict)
    recent: tuple[SettledTurn, ...] = ()
    requests: Mapping[str, RequestMemo] = field(default_factory=dict)
    epoch: int = NO_EPOCH

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
        return self.recent[-1] if self.recent else None

    def settled(self, turn_id: str) -> SettledTurn | None:
        """The remembered settlement of turn_id."""
        return next((t for t in reversed(self.recent) if t.turn_id == turn_id), None)

    def deadline(self) -> int | None:
        """When the watchdog must next look at this session (None: nothing to expire)."""
        return None if self.active is None else self.active.deadline()
