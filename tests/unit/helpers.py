"""Builders for the core's unit tests: commands with defaults, a timeline that threads the session
document and the store clock through decide(), and sessions already in a given shape."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from tests.support.memory_store import T0 as T0
from turngate.service.core import (
    ActiveTurn,
    AdmissionMode,
    Admit,
    Admitted,
    Cancel,
    Command,
    Complete,
    Decision,
    ErrorReason,
    Event,
    EventBody,
    Heartbeat,
    RecordInteraction,
    RecordToolCall,
    Refusal,
    ResolveInteraction,
    Session,
    ToolCallStatus,
    TurnOutcome,
    TurnSettled,
    decide,
    limits,
)

SECOND = 1_000_000  # the core counts µs
LEASE_TTL = 20 * SECOND
STOP_GRACE = 30 * SECOND
TOMBSTONE_TTL = 600 * SECOND
WAIT = limits.DEFAULT_MAX_QUEUE_WAIT


class Lease(NamedTuple):
    """What a runner presents on every write."""

    turn_id: str
    generation: int


def admit(turn_id: str = "t1", runner_id: str = "r1", lease_ttl: int = LEASE_TTL) -> Admit:
    return Admit(turn_id, runner_id, lease_ttl, traceparent=f"00-{turn_id}-trace")


def enqueue(
    turn_id: str, runner_id: str = "", *, wait: int = WAIT, depth: int = 16, ttl: int = LEASE_TTL
) -> Admit:
    """An admission that waits in the session's queue while it is busy (§7)."""
    return Admit(
        turn_id,
        runner_id or f"r-{turn_id}",
        ttl,
        traceparent=f"00-{turn_id}-trace",
        mode=AdmissionMode.ENQUEUE,
        max_queue_wait=wait,
        max_queue_depth=depth,
    )


def cancel(
    expected_turn_id: str = "",
    *,
    force: bool = False,
    request_id: str = "",
    reason: str = "user pressed stop",
    stop_grace: int = STOP_GRACE,
    tombstone_ttl: int = TOMBSTONE_TTL,
) -> Cancel:
    return Cancel(expected_turn_id, reason, force, request_id, stop_grace, tombstone_ttl)


def heartbeat(lease: Lease, lease_ttl: int | None = None) -> Heartbeat:
    return Heartbeat(lease.turn_id, lease.generation, lease_ttl)


def tool_call(
    lease: Lease,
    call_id: str = "c1",
    status: ToolCallStatus = ToolCallStatus.OPEN,
    *,
    name: str = "shell",
    error: str = "",
) -> RecordToolCall:
    return RecordToolCall(lease.turn_id, lease.generation, call_id, name, status, error)


def interaction(lease: Lease, interaction_id: str = "i1", kind: str = "approval") -> RecordInteraction:
    return RecordInteraction(lease.turn_id, lease.generation, interaction_id, kind)


def resolve(
    interaction_id: str = "i1", resolution: str = "approved", *, request_id: str = ""
) -> ResolveInteraction:
    return ResolveInteraction(interaction_id, resolution, request_id, TOMBSTONE_TTL)


def complete(lease: Lease, outcome: TurnOutcome = TurnOutcome.COMPLETED, error: str = "") -> Complete:
    return Complete(lease.turn_id, lease.generation, outcome, error)


def stale(lease: Lease) -> Lease:
    """The same turn with a fencing token it was never given."""
    return lease._replace(generation=lease.generation - 1)


@dataclass
class Timeline:
    """One session's document and clock as a store would thread them, with the full event log."""

    state: Session = field(default_factory=Session)
    now: int = T0
    log: list[Event] = field(default_factory=list)

    def do(self, command: Command, *, after: int = 0) -> Decision:
        """Decides `command` `after` µs later than the previous one and keeps what was decided."""
        self.now += after
        decision = decide(self.state, command, self.now)
        self.state = decision.state
        self.log.extend(decision.events)
        return decision

    def admit(
        self, turn_id: str = "t1", runner_id: str = "r1", lease_ttl: int = LEASE_TTL, *, after: int = 0
    ) -> Lease:
        reply = self.do(admit(turn_id, runner_id, lease_ttl), after=after).reply
        assert isinstance(reply, Admitted), reply
        return Lease(turn_id, reply.generation)

    @property
    def active(self) -> ActiveTurn:
        return active_of(self.state)


def active_of(state: Session) -> ActiveTurn:
    assert state.active is not None, "the session has no active turn"
    return state.active


def running(
    turn_id: str = "t1", *, open_calls: Iterable[str] = (), pending: Iterable[str] = ()
) -> tuple[Timeline, Lease]:
    """A session whose turn `turn_id` runs, with the given tool calls open and interactions pending."""
    timeline = Timeline()
    lease = timeline.admit(turn_id)
    for call_id in open_calls:
        timeline.do(tool_call(lease, call_id), after=1)
    for interaction_id in pending:
        timeline.do(interaction(lease, interaction_id), after=1)
    return timeline, lease


def stopping(
    turn_id: str = "t1", *, open_calls: Iterable[str] = (), pending: Iterable[str] = ()
) -> tuple[Timeline, Lease]:
    """Like `running`, then stopped (not forced): the turn is STOPPING until it settles."""
    timeline, lease = running(turn_id, open_calls=open_calls, pending=pending)
    timeline.do(cancel(turn_id), after=1)
    return timeline, lease


def bodies(decision: Decision) -> list[EventBody]:
    return [event.body for event in decision.events]


def kinds(decision: Decision) -> list[str]:
    return [event.body.kind for event in decision.events]


def assert_unchanged(decision: Decision, before: Session) -> None:
    """Nothing is written: no events, and the very same document."""
    assert decision.changed is False
    assert decision.events == ()
    assert decision.state is before


def assert_refused(decision: Decision, before: Session, reason: ErrorReason) -> Refusal:
    """Refused with `reason`, and nothing changed."""
    assert isinstance(decision.reply, Refusal), decision.reply
    assert decision.reply.reason is reason
    assert_unchanged(decision, before)
    return decision.reply


def interrupt(turn_id: str, expected: str = "", *, depth: int = 16) -> Admit:
    return Admit(
        turn_id,
        f"r-{turn_id}",
        LEASE_TTL,
        mode=AdmissionMode.INTERRUPT,
        expected_active_turn_id=expected,
        max_queue_depth=depth,
        stop_grace=STOP_GRACE,
    )


def shape(decision: Decision) -> tuple[object, ...]:
    """What a decision answered and recorded, without the times it stamped."""
    reply = decision.reply
    settled = [
        (e.body.turn.outcome, e.body.turn.settled_by)
        for e in decision.events
        if isinstance(e.body, TurnSettled)
    ]
    return (
        type(reply),
        getattr(reply, "reason", None),
        getattr(reply, "directive", None),
        getattr(reply, "recorded", None),
        decision.changed,
        [event.body.kind for event in decision.events],
        settled,
    )
