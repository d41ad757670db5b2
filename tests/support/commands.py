"""The commands the store tests send, with the defaults they share."""

from __future__ import annotations

from tests.support.stores import wait_past
from turngate.service.core import (
    AcknowledgeSteer,
    AdmissionMode,
    Admit,
    Admitted,
    Cancel,
    Complete,
    Expire,
    QueueAction,
    Queued,
    RecordToolCall,
    SessionKey,
    SteerFallback,
    SteerStatus,
    SteerTurn,
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


# The turn ids of `play_steers`: s1's unconsumed steer "c" requeued becomes turn c; "e", sent to
# s1 once it settled with the ENQUEUE fallback, becomes turn e, left running with steer "f" pending.
STEERED_TURNS = ("s1", "c", "e")


async def play_steers(store: Store, key: SessionKey) -> None:
    """On an idle session, steers that end each way (S2): s1 is steered "a" (consumed), "b"
    (declined), "c" (with requeue) and "d"; its end finds c and d unconsumed, and c, requeued, is
    promoted as turn c; c's steer "x" expires; then "e" names the settled s1 with the ENQUEUE
    fallback (S7) and runs as turn e, steered "f", which stays pending."""
    s1 = await admit(store, key, "s1")
    for steer_id in ("a", "b", "c", "d"):
        await store.apply(key, SteerTurn("s1", steer_id, f"say {steer_id}", requeue=steer_id == "c"))
    await store.apply(key, AcknowledgeSteer("s1", s1.generation, "a", SteerStatus.CONSUMED))
    await store.apply(key, AcknowledgeSteer("s1", s1.generation, "b", SteerStatus.DECLINED))
    await store.apply(key, Complete("s1", s1.generation, TurnOutcome.COMPLETED))
    c = (await store.load(key)).active
    assert c is not None
    assert c.turn_id == "c"
    await store.apply(key, SteerTurn("c", "x", '{"say": "x"}', "application/json", steer_wait=SECOND // 4))
    x = (await store.load(key)).active
    assert x is not None
    await wait_past(store, x.steers["x"].expires_at)
    await store.apply(key, Expire())
    await store.apply(key, Complete("c", c.generation, TurnOutcome.COMPLETED))
    await store.apply(key, SteerTurn("s1", "e", "say e", fallback=SteerFallback.ENQUEUE))
    await store.apply(key, SteerTurn("e", "f", "say f"))
