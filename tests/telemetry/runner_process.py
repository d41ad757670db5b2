"""A runner process: admits a turn inside a span of its own (its context sent as the traceparent),
prints that span's trace id and span id, then waits to be killed.

`python runner_process.py HOST:PORT PROJECT SESSION TURN` (the lease is 1 s).
"""

from __future__ import annotations

import sys
import time

import grpc
from google.protobuf.duration_pb2 import Duration
from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import TracerProvider

from turngate.v1 import turngate_pb2 as pb
from turngate.v1 import turngate_pb2_grpc as pb_grpc


def main(target: str, project_id: str, session_id: str, turn_id: str) -> None:
    tracer = TracerProvider().get_tracer("runner")
    with tracer.start_as_current_span("turngate.turn") as span, grpc.insecure_channel(target) as channel:
        traceparent: dict[str, str] = {}
        propagate.inject(traceparent)
        request = pb.AdmitTurnRequest(
            session=pb.SessionRef(project_id=project_id, session_id=session_id),
            turn_id=turn_id,
            runner_id="doomed",
            lease_ttl=Duration(seconds=1),
        )
        pb_grpc.AdmissionServiceStub(channel).AdmitTurn(
            request, metadata=tuple(traceparent.items()), timeout=10
        )
        context = span.get_span_context()
        print(trace.format_trace_id(context.trace_id), trace.format_span_id(context.span_id), flush=True)
        time.sleep(600)


if __name__ == "__main__":
    main(*sys.argv[1:])
