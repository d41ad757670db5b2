"""Core values to contract messages. Times are store-clock µs; enums map by value."""

from __future__ import annotations

from typing import assert_never

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from turngate.service import core
from turngate.service.auth.principals import Scope
from turngate.service.auth.session_tokens import Minted
from turngate.service.core import SessionKey
from turngate.service.ports.history import (
    InteractionView,
    ProjectActivity,
    SessionActivity,
    SteerView,
    ToolCallView,
    TurnView,
    interaction_view,
    tool_call_view,
    turn_view,
)
from turngate.v1 import turngate_pb2 as pb

_US = 1_000_000


def timestamp(us: int | None) -> Timestamp | None:
    return None if us is None else Timestamp(seconds=us // _US, nanos=us % _US * 1000)


def duration(us: int) -> Duration:
    return Duration(seconds=us // _US, nanos=us % _US * 1000)


def session_ref(key: SessionKey) -> pb.SessionRef:
    return pb.SessionRef(project_id=key.project_id, session_id=key.session_id)


def trace_id(traceparent: str) -> str:
    """The trace id of a W3C traceparent (`00-<trace id>-<span id>-<flags>`), or ''."""
    parts = traceparent.split("-")
    return parts[1] if len(parts) == 4 and len(parts[1]) == 32 else ""


def turn_phase(phase: core.TurnPhase | None) -> pb.TurnPhase.ValueType:
    return pb.TurnPhase.ValueType(phase or 0)


def outcome(value: core.TurnOutcome | None) -> pb.TurnOutcome.ValueType:
    return pb.TurnOutcome.ValueType(value or 0)


def tool_call(view: ToolCallView) -> pb.ToolCall:
    return pb.ToolCall(
        call_id=view.call_id,
        name=view.name,
        status=pb.ToolCallStatus.ValueType(view.status),
        error=view.error,
        opened_at=timestamp(view.opened_at),
        closed_at=timestamp(view.closed_at),
    )


def interaction(view: InteractionView) -> pb.Interaction:
    return pb.Interaction(
        interaction_id=view.interaction_id,
        kind=view.kind,
        status=pb.InteractionStatus.ValueType(view.status),
        resolution=view.resolution,
        opened_at=timestamp(view.opened_at),
        closed_at=timestamp(view.closed_at),
    )


def steer_record(view: SteerView) -> pb.SteerRecord:
    return pb.SteerRecord(
        steer_id=view.steer_id,
        status=steer_status(view.status),
        sent_at=timestamp(view.sent_at),
        ended_at=timestamp(view.ended_at),
        content=view.content,
        content_type=view.content_type,
        requeued=view.requeued,
    )


def turn_record(view: TurnView, *, with_calls: bool = True) -> pb.TurnRecord:
    """A turn as history or the live document has it (snapshots, events, GetTurn, ListTurns)."""
    record = pb.TurnRecord(
        turn_id=view.turn_id,
        runner_id=view.runner_id,
        generation=view.generation,
        phase=turn_phase(view.phase),
        outcome=outcome(view.outcome),
        settled_by=pb.SettledBy.ValueType(view.settled_by or 0),
        stop_requested=view.stop_requested,
        admitted_at=timestamp(view.admitted_at or None),
        settled_at=timestamp(view.settled_at),
        error=view.error,
        lease_expires_at=timestamp(view.lease_expires_at)
        if view.admitted_at and not view.settled_at
        else None,
        stop_reason=view.stop_reason,
        stop_deadline=None if view.settled_at else timestamp(view.stop_deadline),
        queued_at=timestamp(view.queued_at),
        waited=None if view.waited is None else duration(view.waited),
        trace_id=trace_id(view.traceparent),
    )
    if with_calls:
        record.tool_calls.extend(tool_call(call) for call in view.tool_calls)
        record.interactions.extend(interaction(it) for it in view.interactions)
        record.steers.extend(steer_record(steer) for steer in view.steers)
    return record


def steer_input(value: core.SteerInput | None) -> pb.SteerInput | None:
    if value is None:
        return None
    return pb.SteerInput(steer_id=value.steer_id, content=value.content, content_type=value.content_type)


def steer_status(value: core.SteerStatus) -> pb.SteerStatus.ValueType:
    return pb.SteerStatus.ValueType(value)


def queued_turn(turn: core.QueuedTurn, position: int) -> pb.QueuedTurn:
    return pb.QueuedTurn(
        turn_id=turn.turn_id,
        runner_id=turn.runner_id,
        position=position,
        queued_at=timestamp(turn.queued_at),
        expires_at=timestamp(turn.expires_at),
        steer=steer_input(turn.steer),
    )


def queue(turns: tuple[core.QueuedTurn, ...]) -> list[pb.QueuedTurn]:
    return [queued_turn(turn, position) for position, turn in enumerate(turns, start=1)]


def active_turn(turn: core.ActiveTurn) -> pb.TurnRecord:
    """The active turn as a snapshot shows it: without its calls, with the steers its runner has not
    answered (which are pending is the core's to say: `pending_steers`)."""
    record = turn_record(turn_view(turn), with_calls=False)
    record.pending_steer_ids.extend(turn.pending_steers())
    return record


def snapshot(key: SessionKey, state: core.Session, resync: bool = False) -> pb.SessionSnapshot:
    last = state.last_settled
    paused_by = state.queue_paused_by
    return pb.SessionSnapshot(
        session=session_ref(key),
        seq=state.head,
        phase=pb.SessionPhase.ValueType(state.phase),
        active=active_turn(state.active) if state.active else None,
        last_settled=turn_record(turn_view(last)) if last else None,
        resync=resync,
        epoch=state.epoch,
        queue=queue(state.queue),
        queue_paused=paused_by is not None,
        queue_paused_by=paused_by.turn_id if paused_by else "",
        queue_pause=queue_paused(paused_by) if paused_by else None,
        queue_version=state.queue_version,
    )


def session_summary(activity: SessionActivity, state: core.Session) -> pb.SessionSummary:
    """A session of ListSessions: its state (`state`, as GetSession shows it) and last activity."""
    return pb.SessionSummary(
        snapshot=snapshot(activity.key, state), last_activity_at=timestamp(activity.last_activity_at)
    )


def project_summary(project: ProjectActivity) -> pb.ProjectSummary:
    return pb.ProjectSummary(
        project_id=project.project_id, last_activity_at=timestamp(project.last_activity_at)
    )


def queue_paused(pause: core.QueuePause | core.QueuePaused) -> pb.QueuePaused:
    """What paused a queue, as the snapshot and the queue_paused event say it."""
    return pb.QueuePaused(
        turn_id=pause.turn_id,
        outcome=outcome(pause.outcome),
        stop_requested=pause.stop_requested,
        stop_reason=pause.stop_reason,
    )


def snapshot_event(key: SessionKey, state: core.Session, now: int, resync: bool) -> pb.SessionEvent:
    return pb.SessionEvent(
        seq=state.head,
        time=timestamp(now),
        session=session_ref(key),
        snapshot=snapshot(key, state, resync),
        epoch=state.epoch,
    )


def event(key: SessionKey, value: core.Event) -> pb.SessionEvent:
    out = pb.SessionEvent(
        seq=value.seq, time=timestamp(value.time), session=session_ref(key), epoch=value.epoch
    )
    match value.body:
        case core.TurnAdmitted() as b:
            waited = duration(b.waited) if b.from_queue else None
            out.turn_admitted.CopyFrom(
                pb.TurnAdmitted(
                    turn=pb.TurnRecord(
                        turn_id=b.turn_id,
                        runner_id=b.runner_id,
                        generation=b.generation,
                        phase=pb.TURN_PHASE_RUNNING,
                        admitted_at=timestamp(b.admitted_at),
                        lease_expires_at=timestamp(b.lease_expires_at),
                        queued_at=timestamp(b.queued_at),
                        waited=waited,
                        trace_id=trace_id(b.traceparent),
                    ),
                    from_queue=b.from_queue,
                    waited=waited,
                    steer=steer_input(b.steer),
                )
            )
        case core.StopRequested() as b:
            out.stop_requested.CopyFrom(
                pb.StopRequested(
                    turn_id=b.turn_id,
                    generation=b.generation,
                    reason=b.reason,
                    deadline=timestamp(b.deadline),
                    before_start=b.before_start,
                    force=b.force,
                )
            )
        case core.ToolCallChanged() as b:
            out.tool_call.CopyFrom(
                pb.ToolCallChanged(
                    turn_id=b.turn_id,
                    generation=b.generation,
                    tool_call=tool_call(tool_call_view(b.call_id, b.call, b.error)),
                )
            )
        case core.InteractionChanged() as b:
            out.interaction.CopyFrom(
                pb.InteractionChanged(
                    turn_id=b.turn_id,
                    generation=b.generation,
                    interaction=interaction(interaction_view(b.interaction_id, b.interaction, b.resolution)),
                )
            )
        case core.TurnSettled() as b:
            out.turn_settled.CopyFrom(
                pb.TurnSettled(
                    turn=turn_record(turn_view(b.turn)),
                    interrupted_tool_call_ids=b.interrupted_tool_call_ids,
                    cancelled_interaction_ids=b.cancelled_interaction_ids,
                    trace_id=trace_id(b.traceparent),
                    unconsumed_steer_ids=b.unconsumed_steer_ids,
                )
            )
        case core.TurnQueued() as b:
            out.turn_queued.CopyFrom(
                pb.TurnQueued(
                    turn=pb.QueuedTurn(
                        turn_id=b.turn_id,
                        runner_id=b.runner_id,
                        position=b.position,
                        queued_at=timestamp(b.queued_at),
                        expires_at=timestamp(b.expires_at),
                        steer=steer_input(b.steer),
                    ),
                    position=b.position,
                )
            )
        case core.TurnDequeued() as b:
            out.turn_dequeued.CopyFrom(
                pb.TurnDequeued(
                    turn_id=b.turn_id,
                    outcome=outcome(b.outcome),
                    reason=b.reason,
                    cleared=b.cleared,
                    runner_id=b.runner_id,
                    waited=duration(value.time - b.queued_at),
                )
            )
        case core.QueuePaused() as b:
            out.queue_paused.CopyFrom(queue_paused(b))
        case core.QueueResumed() as b:
            out.queue_resumed.CopyFrom(pb.QueueResumed(turn_id=b.turn_id))
        case core.QueueReordered() as b:
            out.queue_reordered.CopyFrom(
                pb.QueueReordered(turn_ids=b.turn_ids, moved_turn_id=b.moved_turn_id)
            )
        case core.TurnSteered() as b:
            out.turn_steered.CopyFrom(
                pb.TurnSteered(
                    turn_id=b.turn_id,
                    generation=b.generation,
                    steer=pb.SteerInput(steer_id=b.steer_id, content=b.content, content_type=b.content_type),
                    expires_at=timestamp(b.expires_at),
                )
            )
        case core.SteerEnded() as b:
            out.steer_ended.CopyFrom(
                pb.SteerEnded(
                    turn_id=b.turn_id,
                    generation=b.generation,
                    steer_id=b.steer_id,
                    status=steer_status(b.status),
                    requeued=b.requeued,
                )
            )
        case _:
            assert_never(value.body)
    return out


def admitted(key: SessionKey, reply: core.Admitted | core.Queued) -> pb.AdmitTurnResponse:
    if isinstance(reply, core.Queued):
        return pb.AdmitTurnResponse(
            replayed=reply.replayed,
            queued=queued_turn(reply.turn, reply.position),
            queue_depth=reply.depth,
        )
    return pb.AdmitTurnResponse(
        lease=pb.TurnLease(session=session_ref(key), turn_id=reply.turn_id, generation=reply.generation),
        lease_expires_at=timestamp(reply.lease_expires_at),
        heartbeat_interval=duration(reply.heartbeat_interval),
        replayed=reply.replayed,
        steer=steer_input(reply.steer),
    )


def heartbeat(reply: core.HeartbeatReply) -> pb.HeartbeatResponse:
    return pb.HeartbeatResponse(
        directive=pb.Directive.ValueType(reply.directive),
        lease_expires_at=timestamp(reply.lease_expires_at),
        stop_deadline=timestamp(reply.stop_deadline),
        stop_reason=reply.stop_reason,
        settled_outcome=outcome(reply.settled_outcome),
    )


def tool_call_recorded(reply: core.ToolCallReply) -> pb.RecordToolCallResponse:
    return pb.RecordToolCallResponse(
        tool_call=tool_call(tool_call_view(reply.call_id, reply.call, reply.error)), recorded=reply.recorded
    )


def interaction_recorded(reply: core.InteractionReply) -> pb.RecordInteractionResponse:
    return pb.RecordInteractionResponse(
        interaction=interaction(interaction_view(reply.interaction_id, reply.interaction, reply.resolution)),
        recorded=reply.recorded,
    )


def interaction_resolved(reply: core.InteractionReply) -> pb.ResolveInteractionResponse:
    return pb.ResolveInteractionResponse(
        interaction=interaction(interaction_view(reply.interaction_id, reply.interaction, reply.resolution)),
        turn_id=reply.turn_id,
    )


def completed(reply: core.CompleteReply) -> pb.CompleteTurnResponse:
    return pb.CompleteTurnResponse(turn=turn_record(turn_view(reply.turn)), recorded=reply.recorded)


def cancelled(reply: core.CancelReply) -> pb.CancelTurnResponse:
    match reply:
        case core.Cancelled():
            return pb.CancelTurnResponse(
                cancelled=pb.CancelTurnResponse.Cancelled(
                    cancelled_turn_ids=reply.cancelled_turn_ids,
                    stopping_turn_id=reply.stopping_turn_id,
                    settled=reply.settled,
                    before_start=reply.before_start,
                    cancelled_interaction_ids=reply.cancelled_interaction_ids,
                    stop_deadline=timestamp(reply.stop_deadline),
                    queued=reply.queued,
                    cleared_turn_ids=reply.cleared_turn_ids,
                    active_turn_id=reply.active_turn_id,
                )
            )
        case core.Mismatch():
            return pb.CancelTurnResponse(
                mismatch=pb.CancelTurnResponse.Mismatch(
                    expected_turn_id=reply.expected_turn_id,
                    current_turn_id=reply.current_turn_id,
                    current_phase=turn_phase(reply.current_phase),
                    expected_outcome=outcome(reply.expected_outcome),
                )
            )
        case core.Idle():
            return pb.CancelTurnResponse(
                idle=pb.CancelTurnResponse.Idle(
                    expected_turn_id=reply.expected_turn_id,
                    expected_outcome=outcome(reply.expected_outcome),
                    last_turn_id=reply.last_turn_id,
                    last_outcome=outcome(reply.last_outcome),
                )
            )
        case _:
            assert_never(reply)


def resumed(reply: core.Resumed) -> pb.ResumeQueueResponse:
    return pb.ResumeQueueResponse(admitted_turn_id=reply.admitted_turn_id, queue=queue(reply.queue))


def queue_cleared(reply: core.QueueCleared) -> pb.ClearQueueResponse:
    return pb.ClearQueueResponse(cleared_turn_ids=reply.cleared_turn_ids, active_turn_id=reply.active_turn_id)


def queue_moved(reply: core.QueueMoved) -> pb.MoveQueuedTurnResponse:
    return pb.MoveQueuedTurnResponse(queue=queue(reply.queue), queue_version=reply.queue_version)


def steered(reply: core.SteerReply) -> pb.SteerTurnResponse:
    match reply:
        case core.Steered():
            return pb.SteerTurnResponse(
                steered=pb.SteerTurnResponse.Steered(
                    turn_id=reply.turn_id, steer_id=reply.steer_id, seq=reply.seq, replayed=reply.replayed
                )
            )
        case core.SteerMismatch():
            return pb.SteerTurnResponse(
                mismatch=pb.SteerTurnResponse.Mismatch(
                    expected_turn_id=reply.expected_turn_id,
                    reason=pb.ErrorReason.ValueType(reply.reason),
                    current_turn_id=reply.current_turn_id,
                    current_phase=turn_phase(reply.current_phase),
                    expected_phase=turn_phase(reply.expected_phase),
                    expected_outcome=outcome(reply.expected_outcome),
                )
            )
        case core.SteerQueued():
            return pb.SteerTurnResponse(
                queued=pb.SteerTurnResponse.Queued(
                    turn=queued_turn(reply.turn, reply.position),
                    position=reply.position,
                    queue_depth=reply.depth,
                    admitted=reply.admitted,
                    replayed=reply.replayed,
                )
            )
        case _:
            assert_never(reply)


def steer_acknowledged(reply: core.SteerAcknowledged) -> pb.AcknowledgeSteerResponse:
    return pb.AcknowledgeSteerResponse(
        steer_id=reply.steer_id, status=steer_status(reply.status), recorded=reply.recorded
    )


_SCOPES = {Scope.WATCH: pb.SESSION_TOKEN_SCOPE_WATCH, Scope.STOP: pb.SESSION_TOKEN_SCOPE_STOP}


def session_token(minted: Minted) -> pb.MintSessionTokenResponse:
    expires_at = Timestamp()
    expires_at.FromDatetime(minted.expires_at)
    return pb.MintSessionTokenResponse(
        token=minted.token,
        expires_at=expires_at,
        scopes=sorted(_SCOPES[scope] for scope in minted.scopes),
    )
