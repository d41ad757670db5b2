"""A turn, from admission to its one outcome: the lease kept by heartbeats, Stop and steers
delivered by push (Stop also by directive), tool calls, interactions and acknowledged steers
recorded, fenced writes never retried."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TypeVar, assert_never

import grpc

from turngate.client import admission, convert, errors, reads, telemetry
from turngate.client.admission import Admission, OnQueued
from turngate.client.connection import Connection
from turngate.client.enums import InteractionStatus, TurnOutcome
from turngate.client.models import (
    Event,
    Interaction,
    InteractionChanged,
    QueuePaused,
    QueueReordered,
    QueueResumed,
    SessionSnapshot,
    SteerAcknowledgement,
    SteerEnded,
    SteerInput,
    StopRequested,
    ToolCallChanged,
    TurnAdmitted,
    TurnDequeued,
    TurnLease,
    TurnQueued,
    TurnRecord,
    TurnSettled,
    TurnSteered,
    UnknownEvent,
)
from turngate.client.steers import Steers
from turngate.client.tasks import cancel_all
from turngate.client.watch import Watch
from turngate.v1 import turngate_pb2 as pb

log = logging.getLogger("turngate.client")
Req = TypeVar("Req")
Resp = TypeVar("Resp")
MAX_ERROR_BYTES = 1024


def _why(error: errors.TurngateError) -> str:
    """The error's reason (`SESSION_TURN_IN_USE`), or its gRPC code when it has none."""
    return error.reason.name if error.reason else error.code.name


def _described(error: errors.TurngateError) -> str:
    """`REASON: message` (the gRPC code when there is no reason), for logs and `stop_reason`."""
    return f"{_why(error)}: {error}"


def error_text(error: BaseException) -> str:
    """`Type: message`, cut to the contract's 1 KiB of UTF-8."""
    text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return text.encode()[:MAX_ERROR_BYTES].decode(errors="ignore")


class Turn:
    """An admitted turn, inside `async with runner.turn(session_id, turn_id) as turn:`.

    * `stop_requested` (asyncio.Event) is set as soon as a Stop of this turn is accepted: pushed
      by the turn's own watch of its session (milliseconds), or by a heartbeat's STOP directive,
      whichever comes first; `stop_reason` is the reason given. It is also set when the turn
      is abandoned: either way, wind down.
    * `abandoned` (asyncio.Event) is set when the turn is no longer this runner's: settled by
      the watchdog (lease expired) or a forced Stop, a heartbeat answered ABANDON, a write was
      fenced (TURN_NOT_ACTIVE), a heartbeat or write was refused UNAUTHENTICATED or
      PERMISSION_DENIED (the token was revoked, or `TurnHeldByOtherPrincipal`: the turn was
      admitted to another principal), or the lease ran out while the service could not be
      reached. None of these is retried: from then on nothing more is written for it (the
      service settles it LOST when its lease runs out), and `stop_reason` says why.
    * `steers` yields each steer sent to the turn (`gateway.steer`), pushed by its watch: fold
      it into the next step, then `acknowledge(steer_id)` it (or `consumed=False` to decline it).
      `steer` is the input of a turn a steer became.
    * `outcome` and `settled` are the turn's one outcome and its settled record, once known.
    """

    lease: TurnLease
    """The turn and its fencing token, as admitted."""
    session_id: str
    turn_id: str
    generation: int
    """The fencing token: greater than any earlier turn's of the session."""
    runner_id: str
    replayed: bool
    """The turn was already active for this runner: the same lease was returned (so it is for a
    turn promoted from the queue, whose lease was picked up by admitting it again)."""
    waited: float | None
    """Seconds the turn waited in the session's queue before it was admitted; None when it did not
    wait."""
    heartbeat_interval: float
    """Seconds between heartbeats: a third of the lease, as the service recommends."""
    stop_requested: asyncio.Event
    stop_reason: str
    abandoned: asyncio.Event
    steers: Steers
    """The steers received, as they arrive, until a Stop."""
    steer: SteerInput | None
    """For a turn a steer became (requeued unconsumed, or queued by the ENQUEUE fallback): the
    input it is to run (AdmitTurn answers it with the lease); None for any other turn."""
    outcome: TurnOutcome | None
    """The turn's one outcome, once known."""
    settled: TurnRecord | None
    """The settled record, once known."""

    def __init__(self, connection: Connection, runner_id: str, admitted: Admission) -> None:
        answer = admitted.answer
        self._connection = connection
        self._lease_message = answer.lease
        self.lease = convert.lease(answer.lease)
        self.session_id = self.lease.session.session_id
        self.turn_id = self.lease.turn_id
        self.generation = self.lease.generation
        self.runner_id = runner_id
        self.replayed = answer.replayed
        self.waited = admitted.waited
        self.heartbeat_interval = convert.seconds(answer.heartbeat_interval)
        self.stop_requested = asyncio.Event()
        self.stop_reason = ""
        self.abandoned = asyncio.Event()
        self.steers = Steers()
        self.steer = admitted.steer
        self.outcome = None
        self.settled = None
        self._lease = 3 * self.heartbeat_interval
        # When the lease ends at the earliest (it started after the request was sent).
        self._lease_until = admitted.sent_at + self._lease
        self._over = ""  # why nothing more may be written for the turn, once that is so
        self._waiting: dict[str, asyncio.Future[str]] = {}
        # Why the turn's watch ended for good (e.g. PERMISSION_DENIED: a principal without the
        # watcher role): answers to interactions cannot arrive.
        self._unwatched: errors.TurngateError | None = None

    # --- what the runner's code calls --------------------------------------------------------

    def tool_call(self, call_id: str, name: str) -> AbstractAsyncContextManager[None]:
        """`async with turn.tool_call(call_id, name):` records the call OPEN, then SUCCEEDED, or
        FAILED with the exception's text when one escapes (re-raised). Cancelled
        (asyncio.CancelledError), it is left open: the turn's settlement closes it INTERRUPTED.
        Once the turn is over, nothing is recorded."""
        return self._tool_call(call_id, name)

    @asynccontextmanager
    async def _tool_call(self, call_id: str, name: str) -> AsyncIterator[None]:
        await self._record_call(call_id, name, pb.TOOL_CALL_STATUS_OPEN)
        try:
            yield
        except asyncio.CancelledError:
            raise
        except BaseException as error:
            await self._record_call(call_id, name, pb.TOOL_CALL_STATUS_FAILED, error_text(error))
            raise
        await self._record_call(call_id, name, pb.TOOL_CALL_STATUS_SUCCEEDED)

    async def interaction(self, interaction_id: str, kind: str) -> str:
        """Puts a question (e.g. kind `approval`) to a person and waits for the answer, pushed by
        the turn's watch: returns the resolution. Raises `InteractionCancelled` when a Stop
        withdraws it (or the turn was already stopping), `TurnEnded` when the turn is over, and
        the watch's error, asking nothing, when the turn's watch was refused (the answer could
        never arrive)."""
        if self._unwatched is not None:
            raise self._unwatched
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._waiting[interaction_id] = future
        try:
            request = pb.RecordInteractionRequest(
                lease=self._lease_message, interaction_id=interaction_id, kind=kind
            )
            recorded = await self._write(self._connection.admission.RecordInteraction, request)
            if recorded is None:
                raise errors.TurnEnded(self._over, outcome=self.outcome)
            self._on_interaction(convert.interaction(recorded.interaction))
            return await future
        finally:
            if self._waiting.get(interaction_id) is future:
                del self._waiting[interaction_id]

    async def acknowledge(self, steer_id: str, *, consumed: bool = True) -> SteerAcknowledgement | None:
        """Tells the service the runner took the steer into the turn (CONSUMED) or, with
        `consumed=False`, chose not to (DECLINED); its sender and watchers see `steer_ended`. A
        steer that had ended already (its expiry came first) answers that end with `recorded`
        False. Raises `SteerNotFound` for an id that names no steer of the turn; None, recording
        nothing, once the turn is over."""
        request = pb.AcknowledgeSteerRequest(
            lease=self._lease_message,
            steer_id=steer_id,
            status=pb.STEER_STATUS_CONSUMED if consumed else pb.STEER_STATUS_DECLINED,
        )
        answer = await self._write(self._connection.admission.AcknowledgeSteer, request)
        return convert.steer_acknowledgement(answer) if answer is not None else None

    # --- writes ------------------------------------------------------------------------------

    async def _record_call(
        self, call_id: str, name: str, status: pb.ToolCallStatus.ValueType, error: str = ""
    ) -> None:
        request = pb.RecordToolCallRequest(
            lease=self._lease_message, call_id=call_id, name=name, status=status, error=error
        )
        await self._write(self._connection.admission.RecordToolCall, request)

    async def _write(self, rpc: grpc.aio.UnaryUnaryMultiCallable[Req, Resp], request: Req) -> Resp | None:
        """A runner write, retried on blips while the lease lasts; None, having written nothing
        more, once the turn is over. A fenced write is not retried: the turn is abandoned."""
        if self._over:
            return None
        try:
            return await self._connection.call(rpc, request, until=self._lease_until)
        except errors.TurnNotActive:
            self._abandon("a write was fenced: the lease is no longer the active turn's")
        except (errors.NotAuthenticated, errors.PermissionDenied) as error:
            self._abandon(f"a write was refused ({_described(error)})")
        except errors.ServiceUnavailable as error:
            self._abandon(f"the lease ran out while the service could not be reached ({error})")
        return None

    async def _finish(self, error: BaseException | None) -> None:
        """Reports the outcome once: CANCELLED when cancelled or stopped, FAILED when an
        exception escaped, else COMPLETED. Nothing when the turn was abandoned."""
        if isinstance(error, asyncio.CancelledError) or (error is None and self.stop_requested.is_set()):
            outcome, text = pb.TURN_OUTCOME_CANCELLED, ""
        elif error is None:
            outcome, text = pb.TURN_OUTCOME_COMPLETED, ""
        else:
            outcome, text = pb.TURN_OUTCOME_FAILED, error_text(error)
        request = pb.CompleteTurnRequest(lease=self._lease_message, outcome=outcome, error=text)
        reply = await self._write(self._connection.admission.CompleteTurn, request)
        self._over = self._over or "the turn has ended"
        if reply is not None:
            self._settle(convert.turn_record(reply.turn))

    # --- what the service tells the turn -----------------------------------------------------

    def _stop(self, reason: str) -> None:
        if not self.stop_requested.is_set():
            self.stop_reason = reason
            self.stop_requested.set()
            self.steers._end()

    def _abandon(self, why: str, outcome: TurnOutcome | None = None) -> None:
        if self.abandoned.is_set():
            return
        log.warning("turn %s of session %s abandoned: %s", self.turn_id, self.session_id, why)
        self._over = why
        self.outcome = self.outcome or outcome
        self.abandoned.set()
        self._stop(f"abandoned: {why}")
        self._unanswered(errors.TurnEnded(why, outcome=self.outcome))

    def _unanswered(self, error: errors.TurngateError) -> None:
        """Interactions still waiting get `error`: their answers will not arrive."""
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(error)

    def _settle(self, record: TurnRecord) -> None:
        self.settled = record
        self.outcome = record.outcome

    def _on_interaction(self, interaction: Interaction) -> None:
        future = self._waiting.get(interaction.interaction_id)
        if future is None or future.done():
            return
        match interaction.status:
            case InteractionStatus.RESOLVED:
                future.set_result(interaction.resolution)
            case InteractionStatus.CANCELLED:
                future.set_exception(errors.InteractionCancelled(interaction.interaction_id))
            case InteractionStatus.PENDING | InteractionStatus.UNSPECIFIED:
                pass
            case _:
                assert_never(interaction.status)

    def _on_event(self, event: Event) -> None:
        """A live event of this turn's session (its snapshots go to `_on_snapshot`)."""
        match event.body:
            case StopRequested(generation=generation, reason=reason) if generation == self.generation:
                self._stop(reason)
            case InteractionChanged(generation=generation, interaction=interaction) if (
                generation == self.generation
            ):
                self._on_interaction(interaction)
            case TurnSettled(turn=record) if record.generation == self.generation:
                self._settle(record)
                self._abandon(f"settled {record.outcome.proto_name} by {record.settled_by.proto_name}")
            case TurnSteered(generation=generation) as steered if generation == self.generation:
                self.steers._push(convert.received_steer(steered))
            case (
                StopRequested()
                | InteractionChanged()
                | TurnSettled()
                | TurnSteered()
                | SteerEnded()
                | QueueReordered()
                | TurnAdmitted()
                | ToolCallChanged()
                | SessionSnapshot()
                | TurnQueued()
                | TurnDequeued()
                | QueuePaused()
                | QueueResumed()
                | UnknownEvent()
            ):
                pass  # another turn's, or nothing a runner acts on
            case _:
                assert_never(event.body)

    async def _on_snapshot(self, snapshot: SessionSnapshot) -> None:
        """The state when the watch (re)started: a Stop accepted before, steers sent before, or a
        settlement."""
        active = snapshot.active
        pending: tuple[str, ...] = ()
        if active is not None and (active.turn_id, active.generation) == (self.turn_id, self.generation):
            if active.stop_requested:
                self._stop(active.stop_reason)
            pending = active.pending_steer_ids
        else:
            last = snapshot.last_settled
            if last is not None and last.generation == self.generation:
                self._settle(last)
            self._abandon("the turn is no longer the session's active turn")
        if self._waiting or self.steers._unseen(pending):
            # Events before the snapshot are not replayed: read the answers and steers instead.
            turn = await reads.get_turn(self._connection, self.session_id, self.turn_id)
            for interaction in turn.interactions:
                self._on_interaction(interaction)
            for steer in turn.steers:
                if steer.steer_id in pending:
                    self.steers._push(convert.pending_steer(steer))

    # --- background: heartbeats and the turn's own watch -------------------------------------

    async def _heartbeats(self) -> None:
        loop = asyncio.get_running_loop()
        request = pb.HeartbeatRequest(lease=self._lease_message)
        # A replayed admission did not extend the lease: renew it at once.
        delay = 0.0 if self.replayed else self.heartbeat_interval
        while True:
            await asyncio.sleep(delay)
            if self.abandoned.is_set():  # e.g. by a refused write: the lease is not ours to keep
                return
            delay = self.heartbeat_interval
            sent_at = loop.time()
            try:
                reply = await self._connection.call(
                    self._connection.admission.Heartbeat,
                    request,
                    until=self._lease_until,
                    attempt_timeout=self._lease / 4,
                )
            except errors.TurngateError as error:
                self._abandon(f"the lease could not be kept ({_described(error)})")
                return
            if reply.directive == pb.DIRECTIVE_ABANDON:
                outcome = TurnOutcome(reply.settled_outcome)
                self._abandon("a heartbeat was answered ABANDON", outcome or None)
                return
            self._lease_until = sent_at + self._lease
            if reply.directive == pb.DIRECTIVE_STOP:
                self._stop(reply.stop_reason)

    async def _follow(self, ready: asyncio.Event) -> None:
        """The turn's own events, pushed: Stop, answers to interactions, settlement by others.
        `ready` is set once the watch is live, or has ended."""
        try:
            async with Watch(self._connection, self.session_id, turn_id=self.turn_id) as events:
                async for event in events:
                    if isinstance(event.body, SessionSnapshot):
                        await self._on_snapshot(event.body)
                        ready.set()
                    else:
                        self._on_event(event)
                    if self.abandoned.is_set():
                        return
        except errors.TurngateError as error:
            self._unwatched = error
            self._unanswered(error)
            log.warning(
                "the watch of turn %s ended (%s); Stop now arrives by heartbeat, interactions cannot "
                "be answered",
                self.turn_id,
                _described(error),
            )
        finally:
            ready.set()

    @asynccontextmanager
    async def _running(self) -> AsyncIterator[None]:
        """Heartbeats and the turn's watch run while the runner's code does; they always end.
        The code starts once the watch is live (or after `call_timeout` without it)."""
        ready = asyncio.Event()
        tasks = [asyncio.create_task(self._heartbeats()), asyncio.create_task(self._follow(ready))]
        try:
            try:
                async with asyncio.timeout(self._connection.call_timeout):
                    await ready.wait()
            except TimeoutError:
                log.warning("the watch of turn %s is not live yet; Stop arrives by heartbeat", self.turn_id)
            yield
        finally:
            for error in await cancel_all(tasks):
                log.error("a background task of turn %s failed", self.turn_id, exc_info=error)


@asynccontextmanager
async def run_turn(
    connection: Connection, request: pb.AdmitTurnRequest, on_queued: OnQueued | None
) -> AsyncIterator[Turn]:
    """Admits (waiting in the queue if it must), runs the body inside the `turngate.turn` span,
    and reports the outcome once."""
    attributes = {
        telemetry.PROJECT_ID: connection.project_id,
        telemetry.SESSION_ID: request.session.session_id,
        telemetry.TURN_ID: request.turn_id,
    }
    with connection.tracer.span(telemetry.TURN_SPAN, attributes) as span:
        try:
            turn = Turn(connection, request.runner_id, await admission.admit(connection, request, on_queued))
        except errors.TurngateError as refused:
            span.set_attribute(telemetry.REFUSAL, _why(refused))
            raise
        span.set_attribute(telemetry.GENERATION, turn.generation)
        try:
            async with turn._running():
                yield turn
        except BaseException as error:
            await turn._finish(error)
            raise
        else:
            await turn._finish(None)
        finally:
            if turn.outcome:
                span.set_attribute(telemetry.OUTCOME, turn.outcome.proto_name)
            if turn.settled is not None:
                span.set_attribute(telemetry.SETTLED_BY, turn.settled.settled_by.proto_name)
