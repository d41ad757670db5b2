"""Traces across runner and server: the SDK runner's `turngate.turn` span is the ancestor of the
server spans of its RPCs; a turn settled after its runner process was killed, or by a forced Stop,
links back to the span that admitted it; a turn promoted from the queue, by a runner's
CompleteTurn or by the watchdog, links to the span that queued it; spans end when a watch is
cancelled or a call's deadline passes.

Besides the SDK, the runners here are spans of the test's own with the gRPC client interceptor on
a raw channel (`traced`), and a process that sends its span's traceparent itself.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import grpc
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, SpanKind, StatusCode

from tests.support.calls import admit, complete, enqueue, refused, stop
from tests.support.http_calls import http_client, unary
from tests.support.servers import Client, OwnServer
from tests.support.waiting import eventually
from tests.support.watching import STREAM_TIMEOUT_S, collect, watch
from tests.telemetry.recorded import Recorded, children, client_rpc, in_session, in_trace, rpc
from turngate.client import Client as Sdk
from turngate.service.core import Command, Heartbeat, SessionKey
from turngate.service.server import TurngateServer
from turngate.service.telemetry.spans import peer
from turngate.v1 import turngate_pb2 as pb

RUNNER = Path(__file__).with_name("runner_process.py")
APPLY = "turngate.store.apply"
SERVER = SpanKind.SERVER
tracer = trace.get_tracer(__name__)


def attributes(span: ReadableSpan) -> dict[str, object]:
    return dict(span.attributes or {})


def ids(context: SpanContext | None) -> tuple[int, int]:
    assert context is not None
    return context.trace_id, context.span_id


def served(where: Callable[[ReadableSpan], bool]) -> Callable[[ReadableSpan], bool]:
    """Server spans that `where` accepts."""
    return lambda span: span.kind is SERVER and where(span)


def heartbeat_traced(spans: Sequence[ReadableSpan]) -> bool:
    """Whether a Heartbeat has ended on both sides: its server span and the client span it is the
    child of (the SDK heartbeats every third of the lease)."""
    client_name, name = client_rpc("AdmissionService", "Heartbeat"), rpc("AdmissionService", "Heartbeat")
    clients = {ids(s.context) for s in spans if s.name == client_name and s.kind is SpanKind.CLIENT}
    return any(
        s.name == name and s.kind is SERVER and s.parent is not None and ids(s.parent) in clients
        for s in spans
    )


async def test_the_sdk_turn_span_is_the_ancestor_of_the_server_spans_of_its_rpcs(
    traced: tuple[TurngateServer, Client], recorded: Recorded, session: pb.SessionRef
) -> None:
    server, _ = traced
    async with (
        Sdk(f"127.0.0.1:{server.port}", session.project_id) as sdk,
        sdk.runner("r1").turn(session.session_id, "t1", lease_ttl=1.0) as turn,
    ):
        await eventually(lambda: heartbeat_traced(recorded.spans.get_finished_spans()))
    spans = recorded.spans.get_finished_spans()
    by_id = {ids(span.context): span for span in spans}
    [turn_span] = [span for span in spans if span.name == "turngate.turn"]
    served_spans = {
        method: [
            span for span in spans if span.name == rpc("AdmissionService", method) and span.kind is SERVER
        ]
        for method in ("AdmitTurn", "Heartbeat", "CompleteTurn")
    }
    for server_span in (span for each in served_spans.values() for span in each):
        client_span = by_id[ids(server_span.parent)]
        assert (client_span.name, client_span.kind) == ("/" + server_span.name, SpanKind.CLIENT)
        assert ids(client_span.parent) == ids(turn_span.context)
        [apply] = children(spans, server_span)
        [decide] = children(spans, apply)
        assert (apply.name, decide.name) == (APPLY, "turngate.decide")
        assert attributes(apply) | {
            "turngate.project_id": session.project_id,
            "turngate.session_id": session.session_id,
            "turngate.turn_id": "t1",
            "turngate.generation": turn.generation,
        } == attributes(apply)
    [admitted], [completed] = served_spans["AdmitTurn"], served_spans["CompleteTurn"]
    assert served_spans["Heartbeat"]
    [settling] = children(spans, completed)
    assert (attributes(settling)["turngate.outcome"], attributes(settling)["turngate.settled_by"]) == (
        "COMPLETED",
        "RUNNER",
    )
    assert attributes(settling)["turngate.trace_id"] == trace.format_trace_id(ids(turn_span.context)[0])
    # The traceparent stored with the turn is that of the client span of AdmitTurn.
    assert [ids(link.context) for link in settling.links] == [ids(admitted.parent)]


async def test_a_refusal_is_on_the_apply_span_and_its_code_on_the_server_span(
    traced: tuple[TurngateServer, Client], recorded: Recorded, session: pb.SessionRef
) -> None:
    _, client = traced
    await admit(client, session, "t1")
    assert (await refused(admit(client, session, "t2"))).code == grpc.StatusCode.ABORTED
    apply = await recorded.one(APPLY, lambda span: attributes(span).get("turngate.turn_id") == "t2")
    assert attributes(apply)["turngate.refusal"] == "SESSION_TURN_IN_USE"
    # The server span ends once the handler has returned, which may be after the client saw the status.
    server_span = await recorded.one(
        rpc("AdmissionService", "AdmitTurn"), lambda span: ids(span.context) == ids(apply.parent)
    )
    assert attributes(server_span)["rpc.grpc.status_code"] == grpc.StatusCode.ABORTED.value[0]
    assert server_span.status.status_code is StatusCode.UNSET  # a refusal is an answer, not a server error


async def test_server_spans_have_the_current_semantic_convention_names(
    traced: tuple[TurngateServer, Client], recorded: Recorded, session: pb.SessionRef
) -> None:
    _, client = traced
    await admit(client, session, "t1")
    server_span = await recorded.one(rpc("AdmissionService", "AdmitTurn"), lambda span: span.kind is SERVER)
    found = attributes(server_span)
    named = ("rpc.system", "rpc.service", "rpc.method", "rpc.grpc.status_code")
    assert {key: found[key] for key in named} == {
        "rpc.system": "grpc",
        "rpc.service": "turngate.v1.AdmissionService",
        "rpc.method": "AdmitTurn",
        "rpc.grpc.status_code": 0,
    }
    assert found["network.peer.address"] == "127.0.0.1"
    assert isinstance(found["network.peer.port"], int)
    assert str(found["user_agent.original"]).startswith("grpc-python")
    assert not [key for key in found if key.startswith("net.") or key == "rpc.user_agent"]


async def test_an_http_calls_server_span_names_the_browsers_address_not_the_private_socket(
    installed: Recorded, recorded: Recorded, own_server: OwnServer, session: pb.SessionRef
) -> None:
    async with own_server(http_listen="127.0.0.1:0") as (server, _), http_client(server.http_port) as http:
        await unary(http, "/turngate.v1.SessionService/GetSession", pb.GetSessionRequest(session=session))
    server_span = await recorded.one(rpc("SessionService", "GetSession"), lambda span: span.kind is SERVER)
    found = attributes(server_span)
    assert found["network.peer.address"] == "127.0.0.1"
    assert isinstance(found["network.peer.port"], int)


async def test_a_turn_whose_runner_process_was_killed_is_settled_in_a_span_linked_to_its_admission(
    traced: tuple[TurngateServer, Client], recorded: Recorded, session: pb.SessionRef
) -> None:
    server, _ = traced
    runner = await asyncio.create_subprocess_exec(
        sys.executable,
        str(RUNNER),
        f"127.0.0.1:{server.port}",
        session.project_id,
        session.session_id,
        "doomed-turn",
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert runner.stdout is not None
        async with asyncio.timeout(STREAM_TIMEOUT_S):
            trace_id, admitting_span_id = (await runner.stdout.readline()).decode().split()
    finally:
        runner.send_signal(signal.SIGKILL)
        await runner.wait()

    settle = await recorded.one("turngate.watchdog.settle", in_session(session))
    assert settle.parent is None
    assert attributes(settle) | {
        "turngate.turn_id": "doomed-turn",
        "turngate.outcome": "LOST",
        "turngate.settled_by": "WATCHDOG",
        "turngate.trace_id": trace_id,
    } == attributes(settle)
    [link] = settle.links
    assert (trace.format_trace_id(link.context.trace_id), trace.format_span_id(link.context.span_id)) == (
        trace_id,
        admitting_span_id,
    )
    [apply] = children(recorded.spans.get_finished_spans(), settle)
    assert (apply.name, attributes(apply)["turngate.command"]) == (APPLY, "Expire")


async def test_a_forced_stop_settles_in_a_span_linked_to_the_admission(
    traced: tuple[TurngateServer, Client], recorded: Recorded, session: pb.SessionRef
) -> None:
    _, client = traced
    with tracer.start_as_current_span("turngate.turn"):
        await admit(client, session)
    with tracer.start_as_current_span("gateway") as gateway:
        await stop(client, session, "t1", force=True)
    [admitting] = recorded.finished(
        client_rpc("AdmissionService", "AdmitTurn"), lambda span: span.kind is SpanKind.CLIENT
    )
    settled = await recorded.one(APPLY, in_trace(gateway.get_span_context().trace_id))
    assert (attributes(settled)["turngate.outcome"], attributes(settled)["turngate.settled_by"]) == (
        "CANCELLED",
        "GATEWAY",
    )
    assert [ids(link.context) for link in settled.links] == [ids(admitting.context)]


def client_span(recorded: Recorded, method: str, trace_id: int) -> ReadableSpan:
    """The one client span of `method` in the trace."""
    [span] = recorded.finished(
        client_rpc("AdmissionService", method),
        lambda span: span.kind is SpanKind.CLIENT and in_trace(trace_id)(span),
    )
    return span


def promoted_to(span: ReadableSpan, turn_id: str, generation: int) -> dict[str, object]:
    """What a span that promoted `turn_id` says of it, and the attributes of its link to it."""
    promotion = {"turngate.promoted_turn_id": turn_id, "turngate.promoted_generation": generation}
    assert attributes(span) | promotion == attributes(span)
    return {"turngate.turn_id": turn_id, "turngate.generation": generation}


async def test_a_turn_promoted_by_a_complete_turn_starts_in_a_span_linked_to_the_span_that_queued_it(
    traced: tuple[TurngateServer, Client], recorded: Recorded, session: pb.SessionRef
) -> None:
    _, client = traced
    with tracer.start_as_current_span("first runner") as first:
        lease = (await admit(client, session, "t1")).lease
    with tracer.start_as_current_span("waiting runner") as waiting:
        await enqueue(client, session, "t2", runner_id="r1")
    with tracer.start_as_current_span("first runner ends") as ending:
        await complete(client, lease)
    generation = (await admit(client, session, "t2")).lease.generation  # the promoted turn's lease

    promoting = await recorded.one(APPLY, in_trace(ending.get_span_context().trace_id))
    admitting = client_span(recorded, "AdmitTurn", first.get_span_context().trace_id)
    queuing = client_span(recorded, "AdmitTurn", waiting.get_span_context().trace_id)
    assert attributes(promoting)["turngate.command"] == "Complete"
    promoted = promoted_to(promoting, "t2", generation)
    assert [(ids(link.context), dict(link.attributes or {})) for link in promoting.links] == [
        (ids(admitting.context), {}),  # t1's admission: the settlement's link
        (ids(queuing.context), promoted),
    ]


async def test_a_turn_the_watchdog_promotes_starts_in_its_settle_span_linked_to_the_span_that_queued_it(
    traced: tuple[TurngateServer, Client], recorded: Recorded, session: pb.SessionRef
) -> None:
    """t1's runner is gone: a Stop that lets the queue CONTINUE, then its lease (1 s) runs out, and
    the watchdog settles it LOST and admits t2 in the same write."""
    _, client = traced
    await admit(client, session, "t1", lease_ttl=1.0)
    with tracer.start_as_current_span("waiting runner") as waiting:
        await enqueue(client, session, "t2", runner_id="r1")
    await stop(client, session, "t1", queue=pb.QUEUE_ACTION_CONTINUE)

    settle = await recorded.one("turngate.watchdog.settle", in_session(session))
    generation = (await admit(client, session, "t2")).lease.generation
    queuing = client_span(recorded, "AdmitTurn", waiting.get_span_context().trace_id)
    assert attributes(settle) | {"turngate.turn_id": "t1", "turngate.outcome": "LOST"} == attributes(settle)
    promoted = promoted_to(settle, "t2", generation)
    assert (ids(settle.links[-1].context), dict(settle.links[-1].attributes or {})) == (
        ids(queuing.context),
        promoted,
    )


async def test_the_span_of_a_cancelled_watch_ends(
    traced: tuple[TurngateServer, Client], recorded: Recorded, session: pb.SessionRef
) -> None:
    server, client = traced
    with tracer.start_as_current_span("watcher") as watcher:
        stream = watch(client, session)
        await collect(stream, 1)
        stream.cancel()
    await recorded.one(
        rpc("SessionService", "WatchSession"), served(in_trace(watcher.get_span_context().trace_id))
    )
    assert server.hub.watchers == 0


async def test_the_spans_of_a_heartbeat_past_its_deadline_end(
    traced: tuple[TurngateServer, Client], recorded: Recorded, session: pb.SessionRef
) -> None:
    server, client = traced
    lease = (await admit(client, session)).lease
    release_write = asyncio.Event()

    async def held_heartbeats(_key: SessionKey, command: Command) -> None:
        if isinstance(command, Heartbeat):
            await release_write.wait()

    server.store.before_write = held_heartbeats
    try:
        with tracer.start_as_current_span("runner") as runner, pytest.raises(grpc.aio.AioRpcError) as late:
            await client.admission.Heartbeat(pb.HeartbeatRequest(lease=lease), timeout=0.05)
        assert late.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        in_runner = in_trace(runner.get_span_context().trace_id)
        # The write is still held: both spans must have ended with the call, not with the write.
        server_span = await recorded.one(rpc("AdmissionService", "Heartbeat"), served(in_runner))
        apply = await recorded.one(APPLY, in_runner)
        assert ids(apply.parent) == ids(server_span.context)
    finally:
        release_write.set()
        server.store.before_write = None


def test_the_peer_of_a_server_span_is_parsed_from_grpcs_peer_string() -> None:
    assert peer("ipv4:127.0.0.1:5000") == ("127.0.0.1", 5000)
    assert peer("ipv6:[::1]:5000") == ("::1", 5000)
    assert peer("ipv6:%5B::1%5D:5000") == ("::1", 5000)
    assert peer("unix:/tmp/turngate.sock") is None
    assert peer("ipv4:garbage") is None
