"""The gateway's calls: forward a user's Stop (typed answers), steers and answers to interactions,
stop a turn for sure (`stop_and_wait`), resume, clear or reorder a session's queue, and mint the
session tokens its web pages hold."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import assert_never

from turngate.client import convert, reads
from turngate.client.connection import Connection
from turngate.client.enums import QueueAction, SteerFallback
from turngate.client.models import (
    Cancelled,
    Event,
    Idle,
    Interaction,
    InteractionChanged,
    Mismatch,
    MovedQueue,
    QueuePaused,
    QueueReordered,
    QueueResumed,
    ResumedQueue,
    SessionSnapshot,
    SessionToken,
    SteerEnded,
    SteerResult,
    StopRequested,
    StopResult,
    ToolCallChanged,
    TurnAdmitted,
    TurnDequeued,
    TurnQueued,
    TurnRecord,
    TurnSettled,
    TurnSteered,
    UnknownEvent,
)
from turngate.client.watch import Watch
from turngate.v1 import turngate_pb2 as pb

__all__ = ["Cancelled", "Gateway", "Idle", "Mismatch", "StopResult"]

log = logging.getLogger("turngate.client")


class Gateway:
    """What the API in front of users calls: `client.gateway()`."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    async def stop(
        self,
        session_id: str,
        *,
        expected_turn_id: str = "",
        force: bool = False,
        request_id: str | None = None,
        reason: str = "",
        queue: QueueAction = QueueAction.PAUSE,
    ) -> StopResult:
        """Stops `expected_turn_id` (empty: whatever is active). Without `request_id` one is
        made, so that retries after a network blip are idempotent: a retry with the same id
        gets the first answer back and changes nothing.

        A turn waiting in the session's queue is removed from it, and only it (`Cancelled` with
        `queued`). `queue` says what the session's queue does after the stopped turn: PAUSE
        (nothing starts until `resume_queue`), CONTINUE (its head is admitted when the turn
        ends) or CLEAR (every queued turn is cancelled now: `cleared_turn_ids`)."""
        request = pb.CancelTurnRequest(
            session=self._connection.session(session_id),
            expected_turn_id=expected_turn_id,
            reason=reason,
            force=force,
            request_id=request_id or uuid.uuid4().hex,
            queue=pb.QueueAction.ValueType(queue),
        )
        return convert.stop_result(await self._connection.call(self._connection.control.CancelTurn, request))

    async def resume_queue(self, session_id: str, *, request_id: str | None = None) -> ResumedQueue:
        """Un-pauses the session's queue: its head is admitted at once if no turn is active
        (`admitted_turn_id`). Resuming a queue that is not paused changes nothing. Without
        `request_id` one is made, so that a retry answers the turn the first attempt admitted."""
        request = pb.ResumeQueueRequest(
            session=self._connection.session(session_id), request_id=request_id or uuid.uuid4().hex
        )
        return convert.resumed_queue(
            await self._connection.call(self._connection.control.ResumeQueue, request)
        )

    async def clear_queue(
        self, session_id: str, *, reason: str = "", request_id: str | None = None
    ) -> Cancelled | None:
        """Cancels every turn waiting in the session's queue, in one write (ClearQueue), leaving the
        active turn running; None when none waited. Each cancelled turn's wait ends with
        `QueuedTurnCleared`. The answer reads as a Stop naming the queue's last turn with
        `QueueAction.CLEAR` reads: that turn in `cancelled_turn_ids` (with `queued`), the others in
        `cleared_turn_ids`, the turn that runs on in `active_turn_id`. Without `request_id` one is
        made, so that a retry answers what the first attempt cleared."""
        request = pb.ClearQueueRequest(
            session=self._connection.session(session_id),
            reason=reason,
            request_id=request_id or uuid.uuid4().hex,
        )
        answer = await self._connection.call(self._connection.control.ClearQueue, request)
        if not answer.cleared_turn_ids:
            return None
        *others, last = answer.cleared_turn_ids
        return Cancelled(
            cancelled_turn_ids=(last,),
            stopping_turn_id="",
            settled=False,
            before_start=False,
            cancelled_interaction_ids=(),
            stop_deadline=None,
            queued=True,
            cleared_turn_ids=tuple(others),
            active_turn_id=answer.active_turn_id,
        )

    async def steer(
        self,
        session_id: str,
        expected_turn_id: str,
        content: str,
        *,
        steer_id: str | None = None,
        content_type: str = "text/plain",
        fallback: SteerFallback = SteerFallback.REJECT,
        requeue_unconsumed: bool = False,
        request_id: str | None = None,
    ) -> SteerResult:
        """Hands `content` to the running turn `expected_turn_id` as input for its next step:
        `Steered` (it reached the turn; its runner acknowledges it, watchers see `steer_ended`),
        `SteerMismatch` (that turn is not running: nothing changed) or, with
        `fallback=SteerFallback.ENQUEUE`, `SteerQueued` (it became a turn of its own, turn id =
        `steer_id`, for that turn's runner). With `requeue_unconsumed`, a steer still pending when
        its turn ends joins the queue's head as a turn of its own. Without `steer_id` one is made;
        without `request_id` the steer id is sent as one, so a retry with the same `request_id` or,
        without one, the same `steer_id` answers what the first call did (retries after a network
        blip are idempotent)."""
        steer_id = steer_id or uuid.uuid4().hex
        request = pb.SteerTurnRequest(
            session=self._connection.session(session_id),
            expected_turn_id=expected_turn_id,
            steer_id=steer_id,
            content=content,
            content_type=content_type,
            request_id=request_id or steer_id,
            fallback=pb.SteerFallback.ValueType(fallback),
            requeue_unconsumed=requeue_unconsumed,
        )
        return convert.steer_result(await self._connection.call(self._connection.control.SteerTurn, request))

    async def move_queued_turn(
        self,
        session_id: str,
        turn_id: str,
        *,
        after: str | None = None,
        expected_queue_version: int | None = None,
        request_id: str | None = None,
    ) -> MovedQueue:
        """Moves a turn waiting in the queue to its head (`after` None) or right after the queued
        turn `after`. With `expected_queue_version` (`SessionSnapshot.queue_version`), refused
        `QueueVersionMismatch` unless the queue is still at it, so two editors never undo each
        other unseen; a turn not queued is refused `TurnNotQueued`. Without `request_id` one is
        made, so that a retry answers the first move."""
        request = pb.MoveQueuedTurnRequest(
            session=self._connection.session(session_id),
            turn_id=turn_id,
            after_turn_id=after or "",
            expected_queue_version=expected_queue_version,
            request_id=request_id or uuid.uuid4().hex,
        )
        return convert.moved_queue(
            await self._connection.call(self._connection.control.MoveQueuedTurn, request)
        )

    async def resolve_interaction(
        self, session_id: str, interaction_id: str, resolution: str, *, request_id: str | None = None
    ) -> Interaction:
        """Answers a pending interaction of the session's active turn; the first answer wins
        (a later one raises `InteractionNotPending`). Without `request_id` one is made, so that
        retries after a network blip or a lost reply answer what the first attempt did: the
        interaction it resolved (with the same id again, for the service's tombstone TTL, so too)."""
        request = pb.ResolveInteractionRequest(
            session=self._connection.session(session_id),
            interaction_id=interaction_id,
            resolution=resolution,
            request_id=request_id or uuid.uuid4().hex,
        )
        answer = await self._connection.call(self._connection.control.ResolveInteraction, request)
        return convert.interaction(answer.interaction)

    async def mint_session_token(
        self, session_id: str, *, ttl: float | None = None, allow_stop: bool = False
    ) -> SessionToken:
        """A short-lived token that reaches only this session, to watch it (WatchSession,
        GetSession, GetTurn, ListTurns) and, with `allow_stop`, to stop its turns (CancelTurn):
        what a web page may hold as its bearer token. `ttl` in seconds (the service's default,
        15 minutes, when None; at most an hour). Raises `TurngateError` with code
        FAILED_PRECONDITION when the service has no signing keys (TURNGATE_SESSION_TOKEN_KEYS)."""
        request = pb.MintSessionTokenRequest(
            session=self._connection.session(session_id),
            ttl=convert.duration(ttl) if ttl is not None else None,
            allow_stop=allow_stop,
        )
        return convert.session_token(
            await self._connection.call(self._connection.control.MintSessionToken, request)
        )

    async def stop_and_wait(
        self,
        session_id: str,
        expected_turn_id: str,
        *,
        force_after: float,
        reason: str = "",
        request_id: str | None = None,
        queue: QueueAction = QueueAction.PAUSE,
    ) -> TurnRecord | None:
        """Stops the turn and returns its settled record, also when its runner never reacts.

        Watches the turn first (so its settlement cannot be missed), sends the Stop (retried
        with the same `request_id` on network errors; `queue` as for `stop`), waits up to
        `force_after` seconds for the turn's `turn_settled` event, then escalates to
        `force=True`, which settles it at once. Returns None when the turn had never been
        admitted, or was waiting in the queue (it is now refused when it arrives).
        """
        if not expected_turn_id:
            raise ValueError("stop_and_wait needs the turn to stop")
        async with Watch(self._connection, session_id, turn_id=expected_turn_id) as events:
            await anext(events)  # the snapshot: the watch is live before the Stop
            answer = await self.stop(
                session_id,
                expected_turn_id=expected_turn_id,
                reason=reason,
                request_id=request_id,
                queue=queue,
            )
            if isinstance(answer, Cancelled):
                if answer.before_start or answer.queued:
                    return None
                try:
                    async with asyncio.timeout(force_after):
                        settled = await _settlement(events, expected_turn_id)
                except TimeoutError:
                    log.warning(
                        "turn %s did not settle within %.1fs of its Stop: forcing",
                        expected_turn_id,
                        force_after,
                    )
                    await self.stop(session_id, expected_turn_id=expected_turn_id, reason=reason, force=True)
                else:
                    if settled is not None:
                        return settled
        # Settled: before this Stop (Mismatch, Idle), by the forced Stop, or seen by a resync.
        return await reads.get_turn(self._connection, session_id, expected_turn_id)


async def _settlement(events: Watch, turn_id: str) -> TurnRecord | None:
    """The turn's settled record, from its watch; None when a resync snapshot shows it is no
    longer active (its settlement was among the events skipped)."""
    while True:
        event: Event = await anext(events)
        match event.body:
            case TurnSettled(turn=turn):
                return turn
            case SessionSnapshot(active=active) if active is None or active.turn_id != turn_id:
                return None
            case (
                SessionSnapshot()
                | TurnAdmitted()
                | StopRequested()
                | ToolCallChanged()
                | InteractionChanged()
                | TurnQueued()
                | TurnDequeued()
                | QueuePaused()
                | QueueResumed()
                | TurnSteered()
                | SteerEnded()
                | QueueReordered()
                | UnknownEvent()
            ):
                pass
            case _:
                assert_never(event.body)
