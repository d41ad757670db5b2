"""Admitting a turn: AdmitTurn and, with ENQUEUE or INTERRUPT, the wait in the session's queue
until the turn is admitted, learned by push from a watch of the session.

Before asking, the session's head is read; a turn that is queued watches the session from
there, so every event its answer led to is replayed in order (its own `turn_queued`, a promotion,
a Stop that cancelled or cleared it, its expiry) and none is missed, however soon it came. Once
promoted, the same AdmitTurn is sent again: it answers the lease, and tells the service the
turn's runner is there (a promoted turn nobody claims is let go of when its lease ends).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TypeAlias

from turngate.client import convert, errors, reads
from turngate.client.connection import Connection
from turngate.client.enums import AdmissionMode
from turngate.client.models import (
    QueuedTurn,
    QueueReordered,
    SessionSnapshot,
    SteerInput,
    TurnAdmitted,
    TurnDequeued,
    TurnQueued,
)
from turngate.client.watch import Watch
from turngate.v1 import turngate_pb2 as pb

# The modes in which a turn may wait in the queue.
_WAITING = frozenset({pb.ADMISSION_MODE_ENQUEUE, pb.ADMISSION_MODE_INTERRUPT})

OnQueued: TypeAlias = Callable[[QueuedTurn], None]
"""Told the turn's place in the queue: when it is queued, then each time its position changes."""


@dataclass(frozen=True)
class Admission:
    """An AdmitTurn answer, when it was sent (event-loop time), how long the turn had waited
    in the queue (None: it did not, or the SDK did not see it), and for a turn a steer became,
    its input."""

    answer: pb.AdmitTurnResponse
    sent_at: float
    waited: float | None = None
    steer: SteerInput | None = None


def admit_request(
    connection: Connection,
    runner_id: str,
    session_id: str,
    turn_id: str,
    *,
    lease_ttl: float | None,
    mode: AdmissionMode,
    expected_active_turn_id: str,
    max_queue_wait: float | None,
) -> pb.AdmitTurnRequest:
    message = pb.AdmitTurnRequest(
        session=connection.session(session_id),
        turn_id=turn_id,
        runner_id=runner_id,
        mode=pb.AdmissionMode.ValueType(mode),
        expected_active_turn_id=expected_active_turn_id,
    )
    if lease_ttl is not None:
        message.lease_ttl.CopyFrom(convert.duration(lease_ttl))
    if max_queue_wait is not None:
        message.max_queue_wait.CopyFrom(convert.duration(max_queue_wait))
    return message


async def admit(
    connection: Connection, request: pb.AdmitTurnRequest, on_queued: OnQueued | None
) -> Admission:
    """The turn's lease: at once, or once it is promoted from the queue. Raises the refusal, or a
    `LeftQueue` when the turn leaves the queue without running."""
    if request.mode not in _WAITING:
        return await _ask(connection, request)
    while True:  # again only for a turn that left the queue unseen and was queued anew
        before = await reads.get_session(connection, request.session.session_id)
        admission = await _ask(connection, request)
        if admission.answer.HasField("queued"):
            queued = convert.queued_turn(admission.answer.queued)
            admission = await _wait(connection, request, before, queued, on_queued)
        if not admission.answer.HasField("queued"):
            return admission


async def _ask(connection: Connection, request: pb.AdmitTurnRequest) -> Admission:
    sent_at = asyncio.get_running_loop().time()
    answer = await connection.call(connection.admission.AdmitTurn, request)
    return Admission(answer, sent_at, steer=convert.steer_of(answer))


async def _wait(
    connection: Connection,
    request: pb.AdmitTurnRequest,
    before: SessionSnapshot,
    queued: QueuedTurn,
    on_queued: OnQueued | None,
) -> Admission:
    """Follows the session from `before` (read before the turn was queued): reports the turn's
    place, and asks again once it is promoted (its lease), or gone from the queue unseen (a resync
    skipped the events: why it cannot run)."""
    turn_id = queued.turn_id
    place = _Place(queued, before.queue, on_queued)
    watch = Watch(connection, request.session.session_id, after_seq=before.seq, epoch=before.epoch)
    async with watch as events:
        while True:
            match (await anext(events)).body:
                case SessionSnapshot(active=active, queue=queue):
                    if active is not None and active.turn_id == turn_id:
                        return await _claim(connection, request, active.waited)
                    if not place.reset(queue):  # neither active nor queued: it left the queue unseen
                        return await _claim(connection, request, None)
                case TurnAdmitted(turn=turn, waited=waited) if turn.turn_id == turn_id:
                    return await _claim(connection, request, waited)
                case TurnDequeued() as left if left.turn_id == turn_id:
                    raise errors.left_queue(left)
                case TurnAdmitted(turn=turn, from_queue=True):
                    place.leaves(turn.turn_id)
                case TurnDequeued(turn_id=left_id):
                    place.leaves(left_id)
                case TurnQueued(turn=joined, position=position):
                    place.joins(joined.turn_id, position)
                case QueueReordered(turn_ids=turn_ids):
                    place.reorder(turn_ids)
                case _:
                    pass


async def _claim(connection: Connection, request: pb.AdmitTurnRequest, waited: float | None) -> Admission:
    """Sends the same AdmitTurn again for a turn no longer waiting: its lease once promoted, or
    why it will not run."""
    try:
        admission = await _ask(connection, request)
    except errors.AdmissionRefused as refused:
        left = errors.unseen_departure(request.turn_id, refused)
        if left is None:
            raise
        raise left from refused
    return replace(admission, waited=waited)


class _Place:
    """The turn's place in the queue, kept from the watch (a snapshot's queue, then the turns
    that join and leave it), reported to `on_queued` whenever it changes."""

    def __init__(self, turn: QueuedTurn, queue: Sequence[QueuedTurn], on_queued: OnQueued | None) -> None:
        self._turn = turn
        self._on_queued = on_queued
        self._queue = [waiting.turn_id for waiting in queue]
        self._reported = 0
        self._report(turn.position)

    def reset(self, queue: Sequence[QueuedTurn]) -> bool:
        """The queue as a snapshot shows it; False when the turn is not in it."""
        self._queue = [turn.turn_id for turn in queue]
        return self._moved()

    def joins(self, turn_id: str, position: int) -> None:
        if turn_id not in self._queue:
            self._queue.insert(position - 1, turn_id)
        self._moved()

    def reorder(self, turn_ids: Sequence[str]) -> None:
        self._queue = list(turn_ids)
        self._moved()

    def leaves(self, turn_id: str) -> None:
        if turn_id in self._queue:
            self._queue.remove(turn_id)
        self._moved()

    def _moved(self) -> bool:
        if self._turn.turn_id not in self._queue:
            return False
        self._report(self._queue.index(self._turn.turn_id) + 1)
        return True

    def _report(self, position: int) -> None:
        if position != self._reported and self._on_queued is not None:
            self._on_queued(convert.moved(self._turn, position))
        self._reported = position
