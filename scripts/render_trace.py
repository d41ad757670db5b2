"""Prints the spans of a turn the watchdog settled after its runner died, as in docs/telemetry.md.

Runs a turngate server in this process with an in-memory span exporter, and a runner that admits a
turn inside its `turngate.turn` span (the gRPC client interceptor propagating it), heartbeats,
opens a tool call, then dies without a word: its lease (1 s) expires and the watchdog settles the
turn LOST. Every finished span is then printed, trace by trace, as a tree, with its links.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Iterator, Sequence

import grpc
from google.protobuf.duration_pb2 import Duration
from opentelemetry import trace
from opentelemetry.instrumentation.grpc import aio_client_interceptors
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from turngate.service.config import Settings
from turngate.service.server import TurngateServer
from turngate.v1 import turngate_pb2 as pb
from turngate.v1 import turngate_pb2_grpc as pb_grpc

SESSION = pb.SessionRef(project_id="demo", session_id="chat-42")
# Shown for every span that has them; the rest of the attributes only where they say something.
SHOWN = ("rpc.grpc.status_code",)
HIDDEN = ("rpc.system", "rpc.service", "rpc.method", "net.peer.ip", "net.peer.port", "net.peer.name")


async def runner_dies(target: str) -> None:
    """Admits a turn, heartbeats, opens a tool call, then is never heard of again."""
    tracer = trace.get_tracer("runner")
    interceptors = aio_client_interceptors()  # type: ignore[no-untyped-call]
    async with grpc.aio.insecure_channel(target, interceptors=interceptors) as channel:
        admission = pb_grpc.AdmissionServiceStub(channel)
        with tracer.start_as_current_span("turngate.turn"):
            request = pb.AdmitTurnRequest(session=SESSION, turn_id="turn-1", runner_id="runner-a")
            request.lease_ttl.CopyFrom(Duration(seconds=1))
            lease = (await admission.AdmitTurn(request)).lease
            await admission.Heartbeat(pb.HeartbeatRequest(lease=lease))
            await admission.RecordToolCall(
                pb.RecordToolCallRequest(
                    lease=lease, call_id="call-1", name="search", status=pb.TOOL_CALL_STATUS_OPEN
                )
            )


class _Settled(SpanProcessor):
    """Tells when the watchdog's settle span has ended."""

    def __init__(self) -> None:
        self.seen = asyncio.Event()

    def on_end(self, span: ReadableSpan) -> None:
        if span.name == "turngate.watchdog.settle":
            self.seen.set()


async def record(settled: _Settled) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(listen="127.0.0.1:0", store=f"sqlite+aiosqlite:///{tmp}/turngate.db")
        async with TurngateServer(settings) as server:
            await runner_dies(f"127.0.0.1:{server.port}")
            async with asyncio.timeout(10):
                await settled.seen.wait()


def render(spans: Sequence[ReadableSpan]) -> Iterator[str]:
    traces: dict[int, list[ReadableSpan]] = {}
    for span in sorted(spans, key=lambda span: span.start_time or 0):
        assert span.context is not None
        traces.setdefault(span.context.trace_id, []).append(span)
    names = {_ids(span.context): f"{span.name}{_kind(span)}" for span in spans}
    first = min(span.start_time or 0 for span in spans)
    for trace_id, members in traces.items():
        yield f"trace {trace.format_trace_id(trace_id)}"
        yield from _tree(members, None, "", names, first)
        yield ""


def _tree(
    spans: list[ReadableSpan], parent: int | None, indent: str, names: dict[tuple[int, int], str], first: int
) -> Iterator[str]:
    level = [span for span in spans if (span.parent.span_id if span.parent else None) == parent]
    for i, span in enumerate(level):
        last = i == len(level) - 1
        branch = "" if parent is None else ("└─ " if last else "├─ ")
        start = ((span.start_time or 0) - first) / 1e6
        took = ((span.end_time or 0) - (span.start_time or 0)) / 1e6
        attributes = " ".join(
            f"{key}=" + str(value)
            for key, value in (span.attributes or {}).items()
            if key not in HIDDEN and (key in SHOWN or key.startswith("turngate."))
        )
        timing = f"+{start:.1f} ms, {took:.1f} ms"
        yield f"{indent}{branch}{span.name}{_kind(span)}  {timing}  {attributes}".rstrip()
        below = indent + ("" if parent is None else ("   " if last else "│  "))
        for link in span.links:
            target = names.get(_ids(link.context), "not recorded here")
            yield f"{below}   ↪ link: span {trace.format_span_id(link.context.span_id)} of trace"
            yield f"{below}     {trace.format_trace_id(link.context.trace_id)}: {target}"
        assert span.context is not None
        yield from _tree(spans, span.context.span_id, below, names, first)


def _kind(span: ReadableSpan) -> str:
    return "" if span.kind is trace.SpanKind.INTERNAL else f" [{span.kind.name.lower()}]"


def _ids(context: trace.SpanContext | None) -> tuple[int, int]:
    assert context is not None
    return context.trace_id, context.span_id


def main() -> None:
    spans, settled = InMemorySpanExporter(), _Settled()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    provider.add_span_processor(settled)
    trace.set_tracer_provider(provider)
    asyncio.run(record(settled))
    print("\n".join(render(spans.get_finished_spans())))


if __name__ == "__main__":
    main()
