"""The runner's trace: one `turngate.turn` span encloses the turn's calls, and its context is what
the service records with the turn (W3C traceparent propagated)."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.sdk.conftest import PROJECT
from tests.support.backoff import FAST
from tests.support.calls import events_after, settlements
from tests.support.servers import Client as Raw
from tests.support.waiting import eventually
from turngate.client import Client, SessionBusy
from turngate.v1 import turngate_pb2 as pb


def calls_under(spans: tuple[ReadableSpan, ...], parent: ReadableSpan) -> set[str]:
    """The methods of the client spans whose parent is `parent`."""
    assert parent.context is not None
    return {
        s.name.rsplit("/", 1)[-1] for s in spans if s.parent and s.parent.span_id == parent.context.span_id
    }


def heartbeat_sent(spans: tuple[ReadableSpan, ...]) -> bool:
    """Whether a Heartbeat call has ended (its client span)."""
    return any(s.name.rsplit("/", 1)[-1] == "Heartbeat" for s in spans)


async def test_the_turn_span_is_the_parent_of_the_turns_calls_and_its_trace_reaches_the_service(
    target: str, raw: Raw, ref: pb.SessionRef
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    async with (
        Client(target, PROJECT, backoff=FAST, tracer_provider=provider) as client,
        client.runner("r1").turn(ref.session_id, "t1", lease_ttl=1.0) as turn,
    ):
        with pytest.raises(SessionBusy):
            async with client.runner("r2").turn(ref.session_id, "t2"):
                pass
        await eventually(lambda: heartbeat_sent(exporter.get_finished_spans()))

    spans = exporter.get_finished_spans()
    [refused, turn_span] = [s for s in spans if s.name == "turngate.turn"]
    assert turn_span.context is not None
    assert dict(turn_span.attributes or {}) == {
        "turngate.project_id": PROJECT,
        "turngate.session_id": ref.session_id,
        "turngate.turn_id": "t1",
        "turngate.generation": turn.generation,
        "turngate.outcome": "TURN_OUTCOME_COMPLETED",
        "turngate.settled_by": "SETTLED_BY_RUNNER",
    }
    assert (refused.attributes or {})["turngate.refusal"] == "SESSION_TURN_IN_USE"
    assert calls_under(spans, turn_span) == {
        "AdmitTurn",
        "Heartbeat",
        "CompleteTurn",
        "WatchSession",
        "turngate.turn",
    }
    assert calls_under(spans, refused) == {"AdmitTurn"}

    [settled] = settlements(await events_after(raw, ref, 1))
    assert settled.trace_id == format(turn_span.context.trace_id, "032x")
