"""Two kinds of unavailability, on every store (docs/design.md §3.2): a failure before the write
left ("not applied": StoreUnavailable, nothing changed) and one after it left, its reply lost
("outcome unknown": WriteOutcomeUnknown, the write may have taken effect). The reply is lost by
the stores' `after_write` seam, which fails the apply where a lost connection would: after the
script was sent (Redis) or the COMMIT returned (SQL). Every mutating command is then sent again,
as a caller does after WRITE_OUTCOME_UNKNOWN, and answers what the first call did.

Real faults that lose replies (a WAIT that cannot be met, a frozen Redis, a PostgreSQL connection
cut after its COMMIT, a node demoted under a WAIT) are in tests/faults/test_outcome_unknown.py.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest

from tests.support.commands import KEY, LEASE, SECOND, admit, enqueue
from tests.support.seams import losing_a_reply, refusing_before_writing
from tests.support.stores import ContractStore
from turngate.service.core import (
    AcknowledgeSteer,
    Admit,
    Admitted,
    Cancel,
    Cancelled,
    ClearQueue,
    Command,
    Complete,
    CompleteReply,
    Directive,
    Event,
    Heartbeat,
    HeartbeatReply,
    InteractionReply,
    InteractionStatus,
    MoveQueuedTurn,
    QueueCleared,
    QueueMoved,
    RecordInteraction,
    RecordToolCall,
    Reply,
    ResolveInteraction,
    Resumed,
    ResumeQueue,
    SessionKey,
    SettledBy,
    SteerAcknowledged,
    Steered,
    SteerStatus,
    SteerTurn,
    ToolCallReply,
    ToolCallStatus,
    TurnOutcome,
)
from turngate.service.core.model import Session
from turngate.service.ports.store import StoreUnavailable, WriteOutcomeUnknown

MEMORY = 600 * SECOND


@dataclass(frozen=True)
class Retried:
    """A mutating command whose first call's reply is lost: `prepare` brings the session to where
    it applies, `command` makes it, and `answered` checks the retry's reply against the session as
    the first call left it."""

    name: str
    prepare: Callable[[ContractStore], Awaitable[Admitted]]
    command: Callable[[Admitted], Command]
    answered: Callable[[Reply, Session, Admitted], None]


async def running(store: ContractStore) -> Admitted:
    return await admit(store, KEY, "t1")


async def asking(store: ContractStore) -> Admitted:
    lease = await running(store)
    await store.apply(KEY, RecordInteraction("t1", lease.generation, "i1", "approval"))
    return lease


async def paused(store: ContractStore) -> Admitted:
    lease = await running(store)
    await store.apply(KEY, enqueue("t2"))
    await store.apply(KEY, Complete("t1", lease.generation, TurnOutcome.FAILED))
    return lease


async def waiting(store: ContractStore) -> Admitted:
    lease = await running(store)
    await store.apply(KEY, enqueue("t2"))
    return lease


async def steered_once(store: ContractStore) -> Admitted:
    lease = await running(store)
    await store.apply(KEY, SteerTurn("t1", "s1", "also check the tests"))
    return lease


async def queued_two(store: ContractStore) -> Admitted:
    lease = await waiting(store)
    await store.apply(KEY, enqueue("t3"))
    return lease


def admitted_again(reply: Reply, state: Session, _: Admitted) -> None:
    assert isinstance(reply, Admitted)
    assert reply.replayed, "replayed: an earlier call admitted it"
    assert state.active is not None
    assert (reply.turn_id, reply.generation) == (state.active.turn_id, state.active.generation)


def continued(reply: Reply, state: Session, _: Admitted) -> None:
    assert isinstance(reply, HeartbeatReply)
    assert reply.directive is Directive.CONTINUE
    assert state.active is not None


def call_recorded(reply: Reply, state: Session, _: Admitted) -> None:
    assert isinstance(reply, ToolCallReply)
    assert not reply.recorded, "not recorded again: an earlier call did"
    assert reply.call.status is ToolCallStatus.SUCCEEDED


def interaction_recorded(reply: Reply, state: Session, _: Admitted) -> None:
    assert isinstance(reply, InteractionReply)
    assert not reply.recorded
    assert reply.interaction.status is InteractionStatus.PENDING


def resolved(reply: Reply, state: Session, _: Admitted) -> None:
    assert isinstance(reply, InteractionReply)
    assert reply.interaction.status is InteractionStatus.RESOLVED
    assert reply.resolution == "approved"


def settled(reply: Reply, state: Session, lease: Admitted) -> None:
    assert isinstance(reply, CompleteReply)
    assert not reply.recorded
    assert (reply.turn.outcome, reply.turn.settled_by) == (TurnOutcome.COMPLETED, SettledBy.RUNNER)
    assert reply.turn.generation == lease.generation


def stopping(reply: Reply, state: Session, _: Admitted) -> None:
    assert isinstance(reply, Cancelled)
    assert reply.stopping_turn_id == "t1"


def resumed(reply: Reply, state: Session, _: Admitted) -> None:
    assert isinstance(reply, Resumed)
    assert reply.admitted_turn_id == "t2", "the turn the first call admitted"
    assert state.active is not None
    assert state.active.turn_id == "t2"


def cleared(reply: Reply, state: Session, _: Admitted) -> None:
    assert reply == QueueCleared(("t2",), "t1"), "what the first call cleared"
    assert state.queue == ()


def steered(reply: Reply, state: Session, _: Admitted) -> None:
    assert isinstance(reply, Steered)
    assert (reply.turn_id, reply.steer_id, reply.replayed) == ("t1", "s1", True)
    assert state.active is not None
    assert list(state.active.pending_steers()) == ["s1"], "steered once"


def steer_acknowledged(reply: Reply, state: Session, _: Admitted) -> None:
    assert reply == SteerAcknowledged("s1", SteerStatus.CONSUMED, recorded=False)


def moved(reply: Reply, state: Session, _: Admitted) -> None:
    assert isinstance(reply, QueueMoved)
    assert [turn.turn_id for turn in reply.queue] == ["t3", "t2"], "the queue the first call made"
    assert reply.queue_version == state.queue_version


RETRIED = [
    Retried("admit", lambda _: fresh(), lambda _: Admit("t1", "runner", LEASE), admitted_again),
    # A lease of its own length: the store's clock may not have moved since the admission (Redis's
    # estimate never runs back), and the heartbeat must still change what it writes.
    Retried("heartbeat", running, lambda lease: Heartbeat("t1", lease.generation, 2 * LEASE), continued),
    Retried(
        "record_tool_call",
        running,
        lambda lease: RecordToolCall("t1", lease.generation, "c1", "tool", ToolCallStatus.SUCCEEDED),
        call_recorded,
    ),
    Retried(
        "record_interaction",
        running,
        lambda lease: RecordInteraction("t1", lease.generation, "i1", "approval"),
        interaction_recorded,
    ),
    Retried(
        "resolve_interaction",
        asking,
        lambda _: ResolveInteraction("i1", "approved", "req-1", MEMORY),
        resolved,
    ),
    Retried(
        "complete", running, lambda lease: Complete("t1", lease.generation, TurnOutcome.COMPLETED), settled
    ),
    Retried(
        "cancel",
        running,
        lambda _: Cancel("t1", "user pressed stop", False, "req-1", 30 * SECOND, MEMORY),
        stopping,
    ),
    Retried("resume_queue", paused, lambda _: ResumeQueue("req-1", MEMORY), resumed),
    Retried("clear_queue", waiting, lambda _: ClearQueue("start over", "req-1", MEMORY), cleared),
    Retried("steer", running, lambda _: SteerTurn("t1", "s1", "go", request_id="req-1"), steered),
    Retried(
        "acknowledge_steer",
        steered_once,
        lambda lease: AcknowledgeSteer("t1", lease.generation, "s1", SteerStatus.CONSUMED),
        steer_acknowledged,
    ),
    Retried("move_queued_turn", queued_two, lambda _: MoveQueuedTurn("t3", request_id="req-1"), moved),
]


async def fresh() -> Admitted:
    """No preparation: the session is new (the lease is never read)."""
    return Admitted("", 0, 0, 0, replayed=False)


async def log_of(store: ContractStore, key: SessionKey) -> list[Event]:
    return await store.events_after(key, 0, 10_000)


@pytest.mark.parametrize("case", RETRIED, ids=[case.name for case in RETRIED])
async def test_a_write_whose_reply_is_lost_is_outcome_unknown_and_its_retry_answers_what_it_did(
    any_store: ContractStore, case: Retried
) -> None:
    lease = await case.prepare(any_store)
    before, logged = await any_store.load(KEY), await log_of(any_store, KEY)
    any_store.after_write = losing_a_reply(KEY)

    with pytest.raises(WriteOutcomeUnknown):
        await any_store.apply(KEY, case.command(lease))

    assert await any_store.load(KEY) != before, "the write took effect although its reply was lost"
    written = await log_of(any_store, KEY)
    assert written[: len(logged)] == logged
    retry = await any_store.apply(KEY, case.command(lease))
    assert retry.events == (), "the retry adds nothing to the history (a heartbeat extends the lease)"
    case.answered(retry.reply, await any_store.load(KEY), lease)
    assert await log_of(any_store, KEY) == written


@pytest.mark.parametrize("case", RETRIED, ids=[case.name for case in RETRIED])
async def test_a_write_that_fails_before_it_leaves_is_not_applied_and_changes_nothing(
    any_store: ContractStore, case: Retried
) -> None:
    lease = await case.prepare(any_store)
    before, logged = await any_store.load(KEY), await log_of(any_store, KEY)

    any_store.before_write = refusing_before_writing(KEY)
    with pytest.raises(StoreUnavailable) as failed:
        await any_store.apply(KEY, case.command(lease))

    assert not isinstance(failed.value, WriteOutcomeUnknown), "nothing was sent: nothing was changed"
    assert await any_store.load(KEY) == before
    assert await log_of(any_store, KEY) == logged


async def test_a_lost_reply_of_a_decision_that_changes_nothing_is_not_applied(
    any_store: ContractStore,
) -> None:
    lease = await running(any_store)
    await any_store.apply(KEY, Complete("t1", lease.generation, TurnOutcome.COMPLETED))
    any_store.after_write = losing_a_reply(KEY)

    repeated = await any_store.apply(KEY, Complete("t1", lease.generation, TurnOutcome.COMPLETED))

    assert not repeated.changed, "a decision that changes nothing sends no write: there is no reply to lose"
    assert isinstance(repeated.reply, CompleteReply)
