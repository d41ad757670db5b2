"""One structured line per state change, with the trace and span ids of the span it happened in:
logfmt fields after the usual text line, or one JSON object (TURNGATE_LOG_FORMAT=json)."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import trace

from tests.support.calls import admit, complete
from tests.support.collector import collecting
from tests.support.processes import spawn_server
from tests.support.servers import Client
from tests.telemetry.recorded import Recorded, in_trace
from turngate.service.server import TurngateServer
from turngate.service.telemetry.logs import JsonFormatter, TextFormatter
from turngate.v1 import turngate_pb2 as pb

tracer = trace.get_tracer(__name__)


@pytest.fixture
def written() -> Iterator[tuple[io.StringIO, logging.Handler]]:
    """What `turngate.events` writes at INFO, through a handler whose formatter the test sets."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    events = logging.getLogger("turngate.events")
    level = events.level
    events.addHandler(handler)
    events.setLevel(logging.INFO)
    try:
        yield out, handler
    finally:
        events.removeHandler(handler)
        events.setLevel(level)


async def turn_in_a_span(client: Client, session: pb.SessionRef) -> int:
    """Admits and completes a turn inside a span; the span's trace id."""
    with tracer.start_as_current_span("turngate.turn") as turn:
        await complete(client, (await admit(client, session)).lease)
    return turn.get_span_context().trace_id


async def test_each_state_change_is_one_text_line_with_logfmt_fields_and_span_ids(
    traced: tuple[TurngateServer, Client],
    recorded: Recorded,
    session: pb.SessionRef,
    written: tuple[io.StringIO, logging.Handler],
) -> None:
    out, handler = written
    handler.setFormatter(TextFormatter())
    trace_id = await turn_in_a_span(traced[1], session)
    admitted, settled = out.getvalue().splitlines()
    applies = recorded.finished("turngate.store.apply", in_trace(trace_id))
    prefix = f"project_id=p-telemetry session_id={session.session_id}"
    span_ids = [trace.format_span_id(span.context.span_id) for span in applies if span.context]
    assert f" INFO turngate.events: turn_admitted {prefix} seq=1 turn_id=t1 generation=" in admitted
    assert " runner_id=r1 " in admitted
    assert f" INFO turngate.events: turn_settled {prefix} seq=2 turn_id=t1 generation=" in settled
    assert " outcome=COMPLETED settled_by=RUNNER " in settled
    for line, span_id in zip((admitted, settled), span_ids, strict=True):
        assert line.endswith(f" trace_id={trace.format_trace_id(trace_id)} span_id={span_id}")


async def test_each_state_change_is_one_json_object(
    traced: tuple[TurngateServer, Client],
    session: pb.SessionRef,
    written: tuple[io.StringIO, logging.Handler],
) -> None:
    out, handler = written
    handler.setFormatter(JsonFormatter())
    trace_id = await turn_in_a_span(traced[1], session)
    admitted, settled = (json.loads(line) for line in out.getvalue().splitlines())
    assert {key: admitted[key] for key in ("level", "logger", "message", "seq", "turn_id", "trace_id")} == {
        "level": "INFO",
        "logger": "turngate.events",
        "message": "turn_admitted",
        "seq": 1,
        "turn_id": "t1",
        "trace_id": trace.format_trace_id(trace_id),
    }
    assert (settled["message"], settled["outcome"], settled["settled_by"]) == (
        "turn_settled",
        "COMPLETED",
        "RUNNER",
    )
    assert settled["generation"] == admitted["generation"]


async def test_a_steer_and_its_end_are_one_line_each(
    traced: tuple[TurngateServer, Client],
    session: pb.SessionRef,
    written: tuple[io.StringIO, logging.Handler],
) -> None:
    out, handler = written
    handler.setFormatter(TextFormatter())
    client = traced[1]
    lease = (await admit(client, session)).lease
    await client.control.SteerTurn(
        pb.SteerTurnRequest(session=session, expected_turn_id="t1", steer_id="s1", content="go")
    )
    await client.admission.AcknowledgeSteer(
        pb.AcknowledgeSteerRequest(lease=lease, steer_id="s1", status=pb.STEER_STATUS_CONSUMED)
    )
    _, steered, ended = out.getvalue().splitlines()
    assert f"turn_steered project_id=p-telemetry session_id={session.session_id} seq=2 turn_id=t1 " in steered
    assert f" generation={lease.generation} steer_id=s1" in steered
    assert " steer_ended " in ended
    assert f" generation={lease.generation} steer_id=s1 status=CONSUMED requeued=false" in ended


async def test_serve_writes_every_line_as_json_with_turngate_log_format_json(
    tmp_path: Path, session: pb.SessionRef
) -> None:
    async with spawn_server(tmp_path, env={"TURNGATE_LOG_FORMAT": "json"}) as served:
        await admit(served.client, session)
    [log] = await asyncio.to_thread(lambda: [path.read_text() for path in tmp_path.glob("serve-*.log")])
    lines = [json.loads(line) for line in log.splitlines()]
    assert any(line["message"].startswith("turngate listening on") for line in lines)
    [admitted] = [line for line in lines if line["message"] == "turn_admitted"]
    assert admitted["session_id"] == session.session_id
    assert "trace_id" not in admitted  # no OTEL_* variables: no spans


async def test_serve_writes_an_event_from_its_writer_thread_with_the_ids_of_the_span_it_was_made_in(
    tmp_path: Path, session: pb.SessionRef
) -> None:
    """`serve` formats and writes records on a thread of their own: an event's line still carries
    its fields, and the trace of the call that made it (here, the caller's traceparent)."""
    trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    async with collecting() as collector:
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.port}",
            "TURNGATE_LOG_FORMAT": "json",
        }
        async with spawn_server(tmp_path, env=env) as served:
            request = pb.AdmitTurnRequest(session=session, turn_id="t1", runner_id="r1")
            traceparent = (("traceparent", f"00-{trace_id}-{parent_id}-01"),)
            await served.client.admission.AdmitTurn(request, metadata=traceparent)
    [log] = await asyncio.to_thread(lambda: [path.read_text() for path in tmp_path.glob("serve-*.log")])
    [admitted] = [
        entry for line in log.splitlines() if (entry := json.loads(line))["message"] == "turn_admitted"
    ]
    assert (admitted["session_id"], admitted["seq"], admitted["turn_id"]) == (session.session_id, 1, "t1")
    assert admitted["trace_id"] == trace_id
    assert admitted["span_id"] != parent_id  # the server's own span in that trace
