"""The commands the store tests send, with the defaults they share."""

from __future__ import annotations

from tests.support.stores import wait_past
from turngate.service.core import (
    AdmissionMode,
    Admit,
    Admitted,
    Cancel,
    Complete,
    QueueAction,
    Queued,
    RecordToolCall,
    SessionKey,
    ToolCallStatus,
    TurnOutcome,
)
from turngate.service.ports.store import Store

SECOND = 1_000_000
LEASE = 20 * SECOND
QUEUE_WAIT = 60 * SECOND
KEY = SessionKey("project", "session")


def stop(
    turn_id: str, *, force: bool = False, grace: int = 30 * SECOND, queue: QueueAction = QueueAction.PAUSE
) -> Cancel:
    return Cancel(turn_id, "user pressed stop", force, "", grace, 600 * SECOND, queue)


def open_call(turn_id: str, generation: int, call_id: str) -> RecordToolCall:
    return RecordToolCall(turn_id, generation, call_id, "tool", ToolCallStatus.OPEN)


def enqueue(turn_id: str, *, wait: int = QUEUE_WAIT, traceparent: str = "") -> Admit:
    """An admission that waits in the session's queue (for at most `wait` µs) while it is busy."""
    return Admit(turn_id, "runner", LEASE, traceparent, mode=AdmissionMode.ENQUEUE, max_queue_wait=wait)


async def admit(store: Store, key: SessionKey, turn_id: str, lease: int = LEASE) -> Admitted:
    reply = (await store.apply(key, Admit(turn_id, "runner", lease))).reply
    assert isinstance(reply, Admitted)
    return reply


# The turn ids of `play_a_queue`.
QUEUE_HISTORY = ("q1", "q2", "q3", "q4", "q5")


async def play_a_queue(store: Store, key: SessionKey, traceparent: str = "") -> None:
    """On an idle session, turns that wait and leave the queue each way: q2 to q5 wait behind q1; a
    Stop cancels q3; q4 expires; q1's end promotes q2 (the write that settles q1 also expires q4);
    a Stop of q2 that says CLEAR clears q5; q2's runner then ends it CANCELLED."""
    first = await admit(store, key, "q1")
    for turn_id in ("q2", "q3"):
        await store.apply(key, enqueue(turn_id, traceparent=traceparent))
    expiring = (await store.apply(key, enqueue("q4", wait=SECOND // 4))).reply
    assert isinstance(expiring, Queued)
    await store.apply(key, enqueue("q5"))
    await store.apply(key, stop("q3"))
    await wait_past(store, expiring.turn.expires_at)
    await store.apply(key, Complete("q1", first.generation, TurnOutcome.COMPLETED))
    promoted = (await store.load(key)).active
    assert promoted is not None
    assert promoted.turn_id == "q2"
    await store.apply(key, stop("q2", queue=QueueAction.CLEAR))
    await store.apply(key, Complete("q2", promoted.generation, TurnOutcome.CANCELLED))
