"""An OTLP/gRPC collector that keeps what it is sent, for tests of what turngate exports."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2 as metrics_pb
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc as metrics_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as trace_pb
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc as trace_grpc
from opentelemetry.proto.resource.v1.resource_pb2 import Resource


class Named(Protocol):
    name: str


class _Traces(trace_grpc.TraceServiceServicer):
    def __init__(self, received: list[trace_pb.ExportTraceServiceRequest]) -> None:
        self._received = received

    async def Export(self, request: trace_pb.ExportTraceServiceRequest, _: Any) -> Any:
        self._received.append(request)
        return trace_pb.ExportTraceServiceResponse()


class _Metrics(metrics_grpc.MetricsServiceServicer):
    def __init__(self, received: list[metrics_pb.ExportMetricsServiceRequest]) -> None:
        self._received = received

    async def Export(self, request: metrics_pb.ExportMetricsServiceRequest, _: Any) -> Any:
        self._received.append(request)
        return metrics_pb.ExportMetricsServiceResponse()


@dataclass
class Collector:
    port: int = 0
    traces: list[trace_pb.ExportTraceServiceRequest] = field(default_factory=list)
    metrics: list[metrics_pb.ExportMetricsServiceRequest] = field(default_factory=list)

    def names(self, service_name: str) -> set[str]:
        """The names of the spans and metrics that `service_name` exported."""
        exported: list[tuple[Resource, Iterable[Named]]] = [
            *((r.resource, s.spans) for q in self.traces for r in q.resource_spans for s in r.scope_spans),
            *(
                (r.resource, s.metrics)
                for q in self.metrics
                for r in q.resource_metrics
                for s in r.scope_metrics
            ),
        ]
        return {
            item.name for resource, items in exported if _service(resource) == service_name for item in items
        }

    def versions(self, service_name: str) -> set[str]:
        """The `service.version` of each resource `service_name` exported traces or metrics from."""
        resources = [
            *(r.resource for q in self.traces for r in q.resource_spans),
            *(r.resource for q in self.metrics for r in q.resource_metrics),
        ]
        return {_attribute(r, "service.version") for r in resources if _service(r) == service_name}


def _service(resource: Resource) -> str:
    return _attribute(resource, "service.name")


def _attribute(resource: Resource, key: str) -> str:
    return {a.key: a.value.string_value for a in resource.attributes}.get(key, "")


@asynccontextmanager
async def collecting() -> AsyncIterator[Collector]:
    """A collector listening on a free local port for the block."""
    collector = Collector()
    server = grpc.aio.server()
    trace_grpc.add_TraceServiceServicer_to_server(_Traces(collector.traces), server)  # type: ignore[no-untyped-call]
    metrics_grpc.add_MetricsServiceServicer_to_server(_Metrics(collector.metrics), server)  # type: ignore[no-untyped-call]
    collector.port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield collector
    finally:
        await server.stop(None)
