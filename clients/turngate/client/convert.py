"""The one place where the contract's messages become the SDK's Python values (`models`,
`enums`), and Python's time types become protobuf's for requests.

Times: a Timestamp is an aware UTC datetime (None when unset, for the fields the contract leaves
unset until something happens; the epoch for the ones it always sets, should a message lack
one); a Duration is float seconds. Enums: unknown numbers read as UNSPECIFIED (`enums`). Every
value keeps the message it was built from as `raw`.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Literal, assert_never

from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from turngate.client.enums import (
    ErrorReason,
    InteractionStatus,
    SessionPhase,
    SessionTokenScope,
    SettledBy,
    SteerStatus,
    ToolCallStatus,
    TurnOutcome,
    TurnPhase,
)
from turngate.client.models import (
    AdmissionRefusal,
    Cancelled,
    Event,
    EventBody,
    Idle,
    Interaction,
    InteractionChanged,
    Mismatch,
    MovedQueue,
    ProjectSummary,
    QueuedTurn,
    QueuePaused,
    QueueReordered,
    QueueResumed,
    ResumedQueue,
    SessionRef,
    SessionSnapshot,
    SessionSummary,
    SessionToken,
    Steer,
    SteerAcknowledgement,
    Steered,
    SteerEnded,
    SteerInput,
    SteerMismatch,
    SteerQueued,
    SteerRecord,
    SteerResult,
    StopRequested,
    StopResult,
    ToolCall,
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
from turngate.v1 import turngate_pb2 as pb

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# Times.


def seconds(value: Duration) -> float:
    return value.ToNanoseconds() / 1e9


def duration(value: float) -> Duration:
    result = Duration()
    result.FromNanoseconds(round(value * 1e9))
    return result


def instant(message: Message, field: str) -> datetime | None:
    """`message.field` (a Timestamp) as an aware UTC datetime; None when unset."""
    if not message.HasField(field):
        return None
    value: Timestamp = getattr(message, field)
    return value.ToDatetime(tzinfo=UTC)


def _always(message: Message, field: str) -> datetime:
    """A Timestamp the contract always sets; the epoch if a message lacks it."""
    return instant(message, field) or _EPOCH


def _span(message: Message, field: str) -> float | None:
    """`message.field` (a Duration) in seconds; None when unset."""
    if not message.HasField(field):
        return None
    return seconds(getattr(message, field))


# Records.


def session_ref(message: pb.SessionRef) -> SessionRef:
    return SessionRef(message.project_id, message.session_id, raw=message)


def lease(message: pb.TurnLease) -> TurnLease:
    return TurnLease(session_ref(message.session), message.turn_id, message.generation, raw=message)


def tool_call(message: pb.ToolCall) -> ToolCall:
    return ToolCall(
        call_id=message.call_id,
        name=message.name,
        status=ToolCallStatus(message.status),
        error=message.error,
        opened_at=_always(message, "opened_at"),
        closed_at=instant(message, "closed_at"),
        raw=message,
    )


def interaction(message: pb.Interaction) -> Interaction:
    return Interaction(
        interaction_id=message.interaction_id,
        kind=message.kind,
        status=InteractionStatus(message.status),
        resolution=message.resolution,
        opened_at=_always(message, "opened_at"),
        closed_at=instant(message, "closed_at"),
        raw=message,
    )


def steer_input(message: pb.SteerInput) -> SteerInput:
    return SteerInput(message.steer_id, message.content, message.content_type, raw=message)


def steer_of(message: pb.TurnAdmitted | pb.QueuedTurn | pb.AdmitTurnResponse) -> SteerInput | None:
    """The input of a turn a steer became; None for any other turn."""
    return steer_input(message.steer) if message.HasField("steer") else None


def steer_record(message: pb.SteerRecord) -> SteerRecord:
    return SteerRecord(
        steer_id=message.steer_id,
        status=SteerStatus(message.status),
        sent_at=_always(message, "sent_at"),
        ended_at=instant(message, "ended_at"),
        content=message.content,
        content_type=message.content_type,
        requeued=message.requeued,
        raw=message,
    )


def turn_record(message: pb.TurnRecord) -> TurnRecord:
    return TurnRecord(
        turn_id=message.turn_id,
        runner_id=message.runner_id,
        generation=message.generation,
        phase=TurnPhase(message.phase),
        outcome=TurnOutcome(message.outcome),
        settled_by=SettledBy(message.settled_by),
        stop_requested=message.stop_requested,
        admitted_at=_always(message, "admitted_at"),
        settled_at=instant(message, "settled_at"),
        error=message.error,
        tool_calls=tuple(tool_call(call) for call in message.tool_calls),
        interactions=tuple(interaction(item) for item in message.interactions),
        lease_expires_at=instant(message, "lease_expires_at"),
        stop_reason=message.stop_reason,
        stop_deadline=instant(message, "stop_deadline"),
        queued_at=instant(message, "queued_at"),
        waited=_span(message, "waited"),
        trace_id=message.trace_id,
        steers=tuple(steer_record(steer) for steer in message.steers),
        pending_steer_ids=tuple(message.pending_steer_ids),
        raw=message,
    )


def queued_turn(message: pb.QueuedTurn) -> QueuedTurn:
    return QueuedTurn(
        turn_id=message.turn_id,
        runner_id=message.runner_id,
        position=message.position,
        queued_at=_always(message, "queued_at"),
        expires_at=_always(message, "expires_at"),
        steer=steer_of(message),
        raw=message,
    )


def moved(turn: QueuedTurn, position: int) -> QueuedTurn:
    """`turn` at another place in the queue (its `raw` moved too)."""
    message = pb.QueuedTurn()
    if turn.raw is not None:
        message.CopyFrom(turn.raw)
    message.position = position
    return replace(turn, position=position, raw=message)


def _optional_turn(
    message: pb.SessionSnapshot, field: Literal["active", "last_settled"]
) -> TurnRecord | None:
    """A snapshot's `active` or `last_settled`: None when there is none."""
    record: pb.TurnRecord = getattr(message, field)
    return turn_record(record) if message.HasField(field) and record.turn_id else None


def snapshot(message: pb.SessionSnapshot) -> SessionSnapshot:
    return SessionSnapshot(
        session=session_ref(message.session),
        seq=message.seq,
        phase=SessionPhase(message.phase),
        active=_optional_turn(message, "active"),
        last_settled=_optional_turn(message, "last_settled"),
        resync=message.resync,
        epoch=message.epoch,
        queue=tuple(queued_turn(turn) for turn in message.queue),
        queue_paused=message.queue_paused,
        queue_paused_by=message.queue_paused_by,
        queue_pause=queue_paused(message.queue_pause) if message.HasField("queue_pause") else None,
        queue_version=message.queue_version,
        raw=message,
    )


def session_summary(message: pb.SessionSummary) -> SessionSummary:
    return SessionSummary(snapshot(message.snapshot), _always(message, "last_activity_at"), raw=message)


def project_summary(message: pb.ProjectSummary) -> ProjectSummary:
    return ProjectSummary(message.project_id, _always(message, "last_activity_at"), raw=message)


def queue_paused(message: pb.QueuePaused) -> QueuePaused:
    return QueuePaused(
        message.turn_id,
        TurnOutcome(message.outcome),
        message.stop_requested,
        message.stop_reason,
        raw=message,
    )


# Events.


def _body(message: pb.SessionEvent) -> EventBody:
    match kind := message.WhichOneof("kind"):
        case "snapshot":
            return snapshot(message.snapshot)
        case "turn_admitted":
            admitted = message.turn_admitted
            return TurnAdmitted(
                turn_record(admitted.turn),
                from_queue=admitted.from_queue,
                waited=_span(admitted, "waited"),
                steer=steer_of(admitted),
                raw=admitted,
            )
        case "stop_requested":
            stop = message.stop_requested
            return StopRequested(
                turn_id=stop.turn_id,
                generation=stop.generation,
                reason=stop.reason,
                deadline=instant(stop, "deadline"),
                before_start=stop.before_start,
                force=stop.force,
                raw=stop,
            )
        case "tool_call":
            call = message.tool_call
            return ToolCallChanged(call.turn_id, call.generation, tool_call(call.tool_call), raw=call)
        case "interaction":
            changed = message.interaction
            return InteractionChanged(
                changed.turn_id, changed.generation, interaction(changed.interaction), raw=changed
            )
        case "turn_settled":
            settled = message.turn_settled
            return TurnSettled(
                turn=turn_record(settled.turn),
                interrupted_tool_call_ids=tuple(settled.interrupted_tool_call_ids),
                cancelled_interaction_ids=tuple(settled.cancelled_interaction_ids),
                trace_id=settled.trace_id,
                unconsumed_steer_ids=tuple(settled.unconsumed_steer_ids),
                raw=settled,
            )
        case "turn_queued":
            joined = message.turn_queued
            return TurnQueued(queued_turn(joined.turn), joined.position, raw=joined)
        case "turn_dequeued":
            left = message.turn_dequeued
            return TurnDequeued(
                turn_id=left.turn_id,
                runner_id=left.runner_id,
                outcome=TurnOutcome(left.outcome),
                reason=left.reason,
                cleared=left.cleared,
                waited=seconds(left.waited),
                raw=left,
            )
        case "queue_paused":
            return queue_paused(message.queue_paused)
        case "queue_resumed":
            resumed = message.queue_resumed
            return QueueResumed(resumed.turn_id, raw=resumed)
        case "turn_steered":
            steered = message.turn_steered
            return TurnSteered(
                turn_id=steered.turn_id,
                generation=steered.generation,
                steer=steer_input(steered.steer),
                expires_at=instant(steered, "expires_at"),
                raw=steered,
            )
        case "steer_ended":
            ended = message.steer_ended
            return SteerEnded(
                turn_id=ended.turn_id,
                generation=ended.generation,
                steer_id=ended.steer_id,
                status=SteerStatus(ended.status),
                requeued=ended.requeued,
                raw=ended,
            )
        case "queue_reordered":
            reordered = message.queue_reordered
            return QueueReordered(tuple(reordered.turn_ids), reordered.moved_turn_id, raw=reordered)
        case None:  # a kind added to the contract after this SDK was built
            return UnknownEvent()
        case _:
            assert_never(kind)


def event(message: pb.SessionEvent) -> Event:
    return Event(
        seq=message.seq,
        time=_always(message, "time"),
        session=session_ref(message.session),
        body=_body(message),
        epoch=message.epoch,
        raw=message,
    )


# Answers.


def stop_result(message: pb.CancelTurnResponse) -> StopResult:
    """What a Stop did. ValueError for an answer without an outcome (not the contract)."""
    match outcome := message.WhichOneof("outcome"):
        case "cancelled":
            c = message.cancelled
            return Cancelled(
                cancelled_turn_ids=tuple(c.cancelled_turn_ids),
                stopping_turn_id=c.stopping_turn_id,
                settled=c.settled,
                before_start=c.before_start,
                cancelled_interaction_ids=tuple(c.cancelled_interaction_ids),
                stop_deadline=instant(c, "stop_deadline"),
                queued=c.queued,
                cleared_turn_ids=tuple(c.cleared_turn_ids),
                active_turn_id=c.active_turn_id,
                raw=c,
            )
        case "mismatch":
            m = message.mismatch
            return Mismatch(
                expected_turn_id=m.expected_turn_id,
                current_turn_id=m.current_turn_id,
                current_phase=TurnPhase(m.current_phase),
                expected_outcome=TurnOutcome(m.expected_outcome),
                raw=m,
            )
        case "idle":
            i = message.idle
            return Idle(
                expected_turn_id=i.expected_turn_id,
                expected_outcome=TurnOutcome(i.expected_outcome),
                last_turn_id=i.last_turn_id,
                last_outcome=TurnOutcome(i.last_outcome),
                raw=i,
            )
        case None:  # not the contract (or an outcome added to it after this SDK was built)
            raise ValueError(f"CancelTurnResponse without an outcome: {message}")
        case _:
            assert_never(outcome)


def steer_result(message: pb.SteerTurnResponse) -> SteerResult:
    """What became of a steer. ValueError for an answer without an outcome (not the contract)."""
    match outcome := message.WhichOneof("outcome"):
        case "steered":
            steered = message.steered
            return Steered(steered.turn_id, steered.steer_id, steered.seq, steered.replayed, raw=steered)
        case "mismatch":
            m = message.mismatch
            return SteerMismatch(
                expected_turn_id=m.expected_turn_id,
                reason=ErrorReason.numbered(m.reason),
                current_turn_id=m.current_turn_id,
                current_phase=TurnPhase(m.current_phase),
                expected_phase=TurnPhase(m.expected_phase),
                expected_outcome=TurnOutcome(m.expected_outcome),
                raw=m,
            )
        case "queued":
            q = message.queued
            return SteerQueued(
                turn=queued_turn(q.turn),
                position=q.position,
                queue_depth=q.queue_depth,
                admitted=q.admitted,
                replayed=q.replayed,
                raw=q,
            )
        case None:  # not the contract (or an outcome added to it after this SDK was built)
            raise ValueError(f"SteerTurnResponse without an outcome: {message}")
        case _:
            assert_never(outcome)


def received_steer(event: TurnSteered) -> Steer:
    return Steer(event.steer.steer_id, event.steer.content, event.steer.content_type, event.expires_at)


def pending_steer(record: SteerRecord) -> Steer:
    """A pending steer read from its turn (after a resync): its expiry is not in the record."""
    return Steer(record.steer_id, record.content, record.content_type, None)


def steer_acknowledgement(message: pb.AcknowledgeSteerResponse) -> SteerAcknowledgement:
    return SteerAcknowledgement(message.steer_id, SteerStatus(message.status), message.recorded, raw=message)


def moved_queue(message: pb.MoveQueuedTurnResponse) -> MovedQueue:
    return MovedQueue(tuple(queued_turn(turn) for turn in message.queue), message.queue_version, raw=message)


def resumed_queue(message: pb.ResumeQueueResponse) -> ResumedQueue:
    return ResumedQueue(
        message.admitted_turn_id, tuple(queued_turn(turn) for turn in message.queue), raw=message
    )


def session_token(message: pb.MintSessionTokenResponse) -> SessionToken:
    return SessionToken(
        message.token,
        _always(message, "expires_at"),
        tuple(SessionTokenScope(scope) for scope in message.scopes),
        raw=message,
    )


def admission_refusal(message: pb.AdmissionRefusal) -> AdmissionRefusal:
    return AdmissionRefusal(
        active_turn_id=message.active_turn_id,
        active_phase=TurnPhase(message.active_phase),
        active_lease_expires_at=instant(message, "active_lease_expires_at"),
        retry_after=seconds(message.retry_after),
        settled_outcome=TurnOutcome(message.settled_outcome),
    )
