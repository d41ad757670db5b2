"""The runner-side span of a turn and its attributes (DESIGN.md §4)."""

from __future__ import annotations

from opentelemetry import trace

TRACER_NAME = "turngate.client"
TURN_SPAN = "turngate.turn"
PROJECT_ID = "turngate.project_id"
SESSION_ID = "turngate.session_id"
TURN_ID = "turngate.turn_id"
GENERATION = "turngate.generation"
OUTCOME = "turngate.outcome"
SETTLED_BY = "turngate.settled_by"
REFUSAL = "turngate.refusal"


def tracer(provider: trace.TracerProvider | None) -> trace.Tracer:
    """The SDK's tracer, from `provider` or the global one (a no-op until one is configured)."""
    return trace.get_tracer(TRACER_NAME, tracer_provider=provider)
