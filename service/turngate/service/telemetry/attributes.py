"""What spans, metrics and log lines say about a session and its events, under names they share."""

from __future__ import annotations

from typing import assert_never

from turngate.service.core import (
    Event,
    InteractionChanged,
    QueuePaused,
    QueueReordered,
    QueueResumed,
    SessionKey,
    SteerEnded,
    StopRequested,
    ToolCallChanged,
    TurnAdmitted,
    TurnDequeued,
    TurnQueued,
    TurnSettled,
    TurnSteered,
)

# Span and metric attributes are these fields' names under this prefix (turngate.turn_id, …).
PREFIX = "turngate."
Fields = dict[str, str | int | bool]


def session_fields(key: SessionKey) -> Fields:
    return {"project_id": key.project_id, "session_id": key.session_id}


def event_fields(event: Event) -> Fields:
    """What `event` says about its turn: the turn, its generation, and what changed."""
    fields: Fields = {"turn_id": event.turn_id}
    match event.body:
        case TurnAdmitted() as body:
            fields.update(generation=body.generation, runner_id=body.runner_id)
        case StopRequested() as body:
            fields.update(generation=body.generation, force=body.force, before_start=body.before_start)
        case ToolCallChanged() as body:
            fields.update(generation=body.generation, call_id=body.call_id, status=body.call.status.name)
        case InteractionChanged() as body:
            fields.update(
                generation=body.generation,
                interaction_id=body.interaction_id,
                status=body.interaction.status.name,
            )
        case TurnSettled() as body:
            turn = body.turn
            fields.update(
                generation=turn.generation, outcome=turn.outcome.name, settled_by=turn.settled_by.name
            )
        case TurnQueued() as body:
            fields.update(runner_id=body.runner_id, position=body.position)
            if body.steer is not None:
                fields.update(steer_id=body.steer.steer_id)
        case TurnDequeued() as body:
            fields.update(generation=body.generation, outcome=body.outcome.name, cleared=body.cleared)
        case QueuePaused() as body:
            fields.update(outcome=body.outcome.name)
        case QueueResumed() | QueueReordered():
            pass
        case TurnSteered() as body:
            fields.update(generation=body.generation, steer_id=body.steer_id)
        case SteerEnded() as body:
            fields.update(
                generation=body.generation,
                steer_id=body.steer_id,
                status=body.status.name,
                requeued=body.requeued,
            )
        case _:
            assert_never(event.body)
    return fields


def prefixed(fields: Fields) -> Fields:
    """`fields` as span attributes."""
    return {PREFIX + name: value for name, value in fields.items()}
