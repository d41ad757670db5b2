"""Core values to contract messages. Times are store-clock µs; enums map by value."""

from __future__ import annotations

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from turngate.service import core
from turngate.service.ledger.views import TurnView
from turngate.service.store.base import SessionKey
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


def tool_call(call_id: str, call: core.ToolCall, error: str = "") -> pb.ToolCall:
    return pb.ToolCall(
        call_id=call_id,
        name=call.name,
        status=pb.ToolCallStatus.ValueType(call.status),
        error=error,
        opened_at=timestamp(call.opened_at),
        closed_at=timestamp(call.closed_at),
    )


def interaction(interaction_id: str, value: core.Interaction, resolution: str = "") -> pb.Interaction:
    return pb.Interaction(
        interaction_id=interaction_id,
        kind=value.kind,
        status=pb.InteractionStatus.ValueType(value.status),
        resolution=resolution,
        opened_at=timestamp(value.opened_at),
        closed_at=timestamp(value.closed_at),
    )


def active_turn(turn: core.ActiveTurn) -> pb.TurnRecord:
    stop = turn.stop
    return pb.TurnRecord(
        turn_id=turn.turn_id,
        runner_id=turn.runner_id,
        generation=turn.generation,
        phase=turn_phase(turn.phase),
        stop_requested=stop is not None,
        admitted_at=timestamp(turn.admitted_at),
        lease_expires_at=timestamp(turn.lease_expires_at),
        stop_reason=stop.reason if stop else "",
        stop_deadline=timestamp(stop.deadline) if stop else None,
    )


def settled_turn(turn: core.SettledTurn) -> pb.TurnRecord:
    return pb.TurnRecord(
        turn_id=turn.turn_id,
        runner_id=turn.runner_id,
        generation=turn.generation,
        phase=pb.TURN_PHASE_SETTLED,
        outcome=outcome(turn.outcome),
        settled_by=pb.SettledBy.ValueType(turn.settled_by),
        stop_requested=turn.stop_requested,
        admitted_at=timestamp(turn.admitted_at),
        settled_at=timestamp(turn.settled_at),
        error=turn.error,
        stop_reason=turn.stop_reason,
    )


def snapshot(key: SessionKey, state: core.Session, resync: bool = False) -> pb.SessionSnapshot:
    last = state.last_settled
    return pb.SessionSnapshot(
        session=session_ref(key),
        seq=state.head,
        phase=pb.SessionPhase.ValueType(state.phase),
        active=active_turn(state.active) if state.active else None,
        last_settled=settled_turn(last) if last else None,
        resync=resync,
    )


def snapshot_event(key: SessionKey, state: core.Session, now: int, resync: bool) -> pb.SessionEvent:
    return pb.SessionEvent(
        seq=state.head, time=timestamp(now), session=session_ref(key), snapshot=snapshot(key, state, resync)
    )


def event(key: SessionKey, value: core.Event) -> pb.SessionEvent:
    out = pb.SessionEvent(seq=value.seq, time=timestamp(value.time), session=session_ref(key))
    match value.body:
        case core.TurnAdmitted() as b:
            out.turn_admitted.turn.CopyFrom(
                pb.TurnRecord(
                    turn_id=b.turn_id,
                    runner_id=b.runner_id,
                    generation=b.generation,
                    phase=pb.TURN_PHASE_RUNNING,
                    admitted_at=timestamp(b.admitted_at),
                    lease_expires_at=timestamp(b.lease_expires_at),
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
                    tool_call=tool_call(b.call_id, b.call, b.error),
                )
            )
        case core.InteractionChanged() as b:
            out.interaction.CopyFrom(
                pb.InteractionChanged(
                    turn_id=b.turn_id,
                    generation=b.generation,
                    interaction=interaction(b.interaction_id, b.interaction, b.resolution),
                )
            )
        case core.TurnSettled() as b:
            out.turn_settled.CopyFrom(
                pb.TurnSettled(
                    turn=settled_turn(b.turn),
                    interrupted_tool_call_ids=b.interrupted_tool_call_ids,
                    cancelled_interaction_ids=b.cancelled_interaction_ids,
                    trace_id=trace_id(b.traceparent),
                )
            )
    return out


def admitted(key: SessionKey, reply: core.Admitted) -> pb.AdmitTurnResponse:
    return pb.AdmitTurnResponse(
        lease=pb.TurnLease(session=session_ref(key), turn_id=reply.turn_id, generation=reply.generation),
        lease_expires_at=timestamp(reply.lease_expires_at),
        heartbeat_interval=duration(reply.heartbeat_interval),
        replayed=reply.replayed,
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
        tool_call=tool_call(reply.call_id, reply.call, reply.error), recorded=reply.recorded
    )


def interaction_recorded(reply: core.InteractionReply) -> pb.RecordInteractionResponse:
    return pb.RecordInteractionResponse(
        interaction=interaction(reply.interaction_id, reply.interaction, reply.resolution),
        recorded=reply.recorded,
    )


def interaction_resolved(reply: core.InteractionReply) -> pb.ResolveInteractionResponse:
    return pb.ResolveInteractionResponse(
        interaction=interaction(reply.interaction_id, reply.interaction, reply.resolution),
        turn_id=reply.turn_id,
    )


def completed(reply: core.CompleteReply) -> pb.CompleteTurnResponse:
    return pb.CompleteTurnResponse(turn=settled_turn(reply.turn), recorded=reply.recorded)


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


def turn_view(view: TurnView, *, with_calls: bool = True) -> pb.TurnRecord:
    """A turn as the ledger recorded it (GetTurn, ListTurns)."""
    record = pb.TurnRecord(
        turn_id=view.turn_id,
        runner_id=view.runner_id,
        generation=view.generation,
        phase=turn_phase(view.phase),
        outcome=outcome(view.outcome),
        settled_by=pb.SettledBy.ValueType(view.settled_by or 0),
        stop_requested=view.stop_requested,
        admitted_at=timestamp(view.admitted_at),
        settled_at=timestamp(view.settled_at),
        error=view.error,
        lease_expires_at=None if view.settled_at else timestamp(view.lease_expires_at),
        stop_reason=view.stop_reason,
        stop_deadline=None if view.settled_at else timestamp(view.stop_deadline),
    )
    if with_calls:
        record.tool_calls.extend(
            pb.ToolCall(
                call_id=c.call_id,
                name=c.name,
                status=pb.ToolCallStatus.ValueType(c.status),
                error=c.error,
                opened_at=timestamp(c.opened_at),
                closed_at=timestamp(c.closed_at),
            )
            for c in view.tool_calls
        )
        record.interactions.extend(
            pb.Interaction(
                interaction_id=i.interaction_id,
                kind=i.kind,
                status=pb.InteractionStatus.ValueType(i.status),
                resolution=i.resolution,
                opened_at=timestamp(i.opened_at),
                closed_at=timestamp(i.closed_at),
            )
            for i in view.interactions
        )
    return record
