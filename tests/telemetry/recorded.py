"""What the test process's telemetry recorded: finished spans and metric points, and how to read them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util.types import AttributeValue

from tests.support.waiting import eventually
from turngate.v1 import turngate_pb2 as pb

# Attributes of one metric point, as a hashable set.
Labels = frozenset[tuple[str, AttributeValue]]


def labels(**attributes: AttributeValue) -> Labels:
    """turngate's metric attributes: `result="admitted"` is `turngate.result`."""
    return frozenset((f"turngate.{name}", value) for name, value in attributes.items())


def rpc(service: str, method: str) -> str:
    """The name of the server span of an RPC (no leading slash: the current conventions)."""
    return f"turngate.v1.{service}/{method}"


def client_rpc(service: str, method: str) -> str:
    """The name of the client span of an RPC (opentelemetry-instrumentation-grpc's: the full path)."""
    return "/" + rpc(service, method)


@dataclass
class Recorded:
    """The exporter and reader installed as the process's providers."""

    spans: InMemorySpanExporter
    reader: InMemoryMetricReader

    def finished(
        self, name: str, where: Callable[[ReadableSpan], bool] = lambda _: True
    ) -> list[ReadableSpan]:
        return [span for span in self.spans.get_finished_spans() if span.name == name and where(span)]

    async def one(self, name: str, where: Callable[[ReadableSpan], bool] = lambda _: True) -> ReadableSpan:
        """The one finished span called `name` that `where` accepts, once it has ended."""
        await eventually(lambda: len(self.finished(name, where)) > 0)
        [span] = self.finished(name, where)
        return span

    def points(self, name: str) -> dict[Labels, object]:
        """The data points of metric `name` now, by their attributes (none if it reports nothing)."""
        data = self.reader.get_metrics_data()
        found: dict[Labels, object] = {}
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        for point in metric.data.data_points:
                            found[frozenset((point.attributes or {}).items())] = point
        return found

    def value(self, name: str, at: Labels = frozenset(), of: str = "value") -> float:
        """The `value` of a counter's or gauge's point with those attributes, or the `count` or
        `sum` of a histogram's; 0 while there is no such point."""
        point = self.points(name).get(at)
        return 0 if point is None else float(getattr(point, of))


def in_session(session: pb.SessionRef) -> Callable[[ReadableSpan], bool]:
    """Spans about `session` (turngate's own carry it)."""
    return lambda span: (span.attributes or {}).get("turngate.session_id") == session.session_id


def in_trace(trace_id: int) -> Callable[[ReadableSpan], bool]:
    return lambda span: span.context is not None and span.context.trace_id == trace_id


def children(spans: Sequence[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    assert parent.context is not None
    return [
        span for span in spans if span.parent is not None and span.parent.span_id == parent.context.span_id
    ]
