"""An OTLP/gRPC endpoint that accepts traces and metrics and drops them, counting what it got.

Run: `python bench/otlp_sink.py PORT`; on SIGTERM it prints the spans and metric export requests
it received, then exits.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2 as metrics_pb
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc as metrics_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as trace_pb
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc as trace_grpc

from floor_server import serve_until_terminated

received = {"spans": 0, "metric exports": 0}


class Traces(trace_grpc.TraceServiceServicer):
    async def Export(self, request: trace_pb.ExportTraceServiceRequest, _: Any) -> Any:
        received["spans"] += sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
        return trace_pb.ExportTraceServiceResponse()


class Metrics(metrics_grpc.MetricsServiceServicer):
    async def Export(self, _request: metrics_pb.ExportMetricsServiceRequest, _: Any) -> Any:
        received["metric exports"] += 1
        return metrics_pb.ExportMetricsServiceResponse()


async def serve(port: int) -> None:
    server = grpc.aio.server()
    trace_grpc.add_TraceServiceServicer_to_server(Traces(), server)  # type: ignore[no-untyped-call]
    metrics_grpc.add_MetricsServiceServicer_to_server(Metrics(), server)  # type: ignore[no-untyped-call]
    await serve_until_terminated(server, port)
    print(", ".join(f"{what}: {count}" for what, count in received.items()), flush=True)


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1])))
