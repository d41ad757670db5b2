"""What turn history answers, whichever store keeps it: turns with their tool calls,
interactions and steers (`TurnView`), read by `TurnHistory`; `turn_view` builds one from the live
document. And which sessions and projects it holds, by their last activity (`SessionDirectory`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, assert_never

from turngate.service.core import (
    ActiveTurn,
    Interaction,
    InteractionStatus,
    QueuedTurn,
    Session,
    SessionKey,
    SettledBy,
    SettledTurn,
    Steer,
    SteerStatus,
    ToolCall,
    ToolCallStatus,
    TurnOutcome,
    TurnPhase,
)


@dataclass(frozen=True, slots=True)
class ToolCallView:
    call_id: str
    name: str
    status: ToolCallStatus
    error: str
    opened_at: int
    closed_at: int | None


@dataclass(frozen=True, slots=True)
class InteractionView:
    interaction_id: str
    kind: str
    status: InteractionStatus
    resolution: str
    opened_at: int
    closed_at: int | None


@dataclass(frozen=True, slots=True)
class SteerView:
    """A steer of a turn: its content stays in history after it ended (S2)."""

    steer_id: str
    status: SteerStatus
    sent_at: int
    ended_at: int | None
    content: str
    content_type: str
    requeued: bool


@dataclass(frozen=True, slots=True)
class TurnView:
    """One turn as the ledger recorded it; `lease_expires_at` is the lease given at admission.
    `queued_at` is when it joined the queue (None: it never waited); a turn that left the queue
    without running has `admitted_at` 0, and one still waiting in it (phase QUEUED, from the
    session document) also has generation 0 and no lease (`lease_expires_at` 0)."""

    turn_id: str
    runner_id: str
    generation: int
    phase: TurnPhase
    outcome: TurnOutcome | None
    settled_by: SettledBy | None
    stop_requested: bool
    stop_reason: str
    stop_requested_at: int | None
    stop_deadline: int | None
    admitted_at: int
    settled_at: int | None
    lease_expires_at: int
    error: str
    traceparent: str
    tool_calls: tuple[ToolCallView, ...] = ()
    interactions: tuple[InteractionView, ...] = ()
    queued_at: int | None = None
    steers: tuple[SteerView, ...] = ()

    @property
    def waited(self) -> int | None:
        """How long it waited in the queue: until admitted, or until it left the queue."""
        end = self.admitted_at or self.settled_at
        return None if self.queued_at is None or end is None else end - self.queued_at


class TurnHistory(Protocol):
    """Reads of the ledger; a failing database raises StoreUnavailable."""

    async def get_turn(self, key: SessionKey, turn_id: str) -> TurnView | None:
        """The latest generation of `turn_id` in the session, its calls, interactions and steers in
        order."""
        ...

    async def list_turns(self, key: SessionKey, before_generation: int | None, limit: int) -> list[TurnView]:
        """Up to `limit` turns, newest first, older than `before_generation` if given; without calls,
        interactions or steers."""
        ...


@dataclass(frozen=True, slots=True)
class SessionActivity:
    """A session history holds events of: when the newest was written, and its last turn that ran
    and settled, while history holds that turn."""

    key: SessionKey
    last_activity_at: int
    last_settled: TurnView | None


@dataclass(frozen=True, slots=True)
class ProjectActivity:
    """A project history holds sessions of, and when the newest event of any of them was written."""

    project_id: str
    last_activity_at: int


class SessionDirectory(Protocol):
    """Which sessions and projects history holds events of; a failing database raises StoreUnavailable."""

    async def sessions(
        self, project_id: str, before: tuple[int, str] | None, limit: int
    ) -> list[SessionActivity]:
        """Up to `limit` of the project's sessions ordered by (last activity, session id), newest
        first, before `before` (a previous page's last pair)."""
        ...

    async def projects(
        self, after: str | None, limit: int, among: frozenset[str] | None
    ) -> list[ProjectActivity]:
        """Up to `limit` projects that have sessions, in id order, after `after`; of `among` only,
        when given."""
        ...


class SessionHistory(TurnHistory, Protocol):
    """The reads of a session's state and turns that SessionService answers from."""

    async def session(self, key: SessionKey) -> Session:
        """The session's document, remembering its settled turns even once the store has let it go."""
        ...

    async def listed(self, found: Sequence[SessionActivity]) -> list[Session]:
        """The documents of the sessions `found`, as `session` answers each (of the turns it
        remembers, at least the last settled one)."""
        ...


def turn_view(turn: ActiveTurn | SettledTurn | QueuedTurn, recorded: TurnView | None = None) -> TurnView:
    """A turn as the session document has it. Error texts, resolutions and the content of steers
    that ended live only in the ledger: an active turn's come from `recorded`, its ledger row, if
    there is one (else they are empty)."""
    match turn:
        case QueuedTurn():
            return TurnView(
                turn_id=turn.turn_id,
                runner_id=turn.runner_id,
                generation=0,
                phase=TurnPhase.QUEUED,
                outcome=None,
                settled_by=None,
                stop_requested=False,
                stop_reason="",
                stop_requested_at=None,
                stop_deadline=None,
                admitted_at=0,
                settled_at=None,
                lease_expires_at=0,
                error="",
                traceparent=turn.traceparent,
                queued_at=turn.queued_at,
            )
        case SettledTurn():
            return TurnView(
                turn_id=turn.turn_id,
                runner_id=turn.runner_id,
                generation=turn.generation,
                phase=TurnPhase.SETTLED,
                outcome=turn.outcome,
                settled_by=turn.settled_by,
                stop_requested=turn.stop_requested,
                stop_reason=turn.stop_reason,
                stop_requested_at=None,
                stop_deadline=None,
                admitted_at=turn.admitted_at,
                settled_at=turn.settled_at,
                lease_expires_at=turn.settled_at,
                error=turn.error,
                traceparent="",
                queued_at=turn.queued_at or None,
            )
        case ActiveTurn():
            errors = {call.call_id: call.error for call in recorded.tool_calls} if recorded else {}
            answers = {it.interaction_id: it.resolution for it in recorded.interactions} if recorded else {}
            sent = {steer.steer_id: steer for steer in recorded.steers} if recorded else {}
            stop = turn.stop
            return TurnView(
                turn_id=turn.turn_id,
                runner_id=turn.runner_id,
                generation=turn.generation,
                phase=turn.phase,
                outcome=None,
                settled_by=None,
                stop_requested=stop is not None,
                stop_reason=stop.reason if stop else "",
                stop_requested_at=stop.requested_at if stop else None,
                stop_deadline=stop.deadline if stop else None,
                admitted_at=turn.admitted_at,
                settled_at=None,
                lease_expires_at=turn.lease_expires_at,
                error="",
                traceparent=turn.traceparent,
                tool_calls=tuple(
                    tool_call_view(call_id, call, errors.get(call_id, ""))
                    for call_id, call in turn.tool_calls.items()
                ),
                interactions=tuple(
                    interaction_view(iid, it, answers.get(iid, "")) for iid, it in turn.interactions.items()
                ),
                queued_at=turn.queued_at or None,
                steers=tuple(steer_view(sid, steer, sent.get(sid)) for sid, steer in turn.steers.items()),
            )
        case _:
            assert_never(turn)


def tool_call_view(call_id: str, call: ToolCall, error: str = "") -> ToolCallView:
    return ToolCallView(call_id, call.name, call.status, error, call.opened_at, call.closed_at)


def interaction_view(interaction_id: str, it: Interaction, resolution: str = "") -> InteractionView:
    return InteractionView(interaction_id, it.kind, it.status, resolution, it.opened_at, it.closed_at)


def steer_view(steer_id: str, steer: Steer, recorded: SteerView | None = None) -> SteerView:
    """A steer as the document has it: its content while it is pending, then as `recorded`, its
    ledger row, has it (empty without one). Not requeued: that happens only as its turn settles."""
    if steer.input is not None:
        content, content_type = steer.input.content, steer.input.content_type
    elif recorded is not None:
        content, content_type = recorded.content, recorded.content_type
    else:
        content, content_type = "", ""
    return SteerView(steer_id, steer.status, steer.sent_at, steer.ended_at, content, content_type, False)
