"""The commands the store tests send, with the defaults they share."""

from __future__ import annotations

from turngate.service.core import (
    AdmissionMode,
    Admit,
    Admitted,
    Cancel,
    QueueAction,
    RecordToolCall,
    SessionKey,
    ToolCallStatus,
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
