"""One channel to turngate, its stubs and the call policy (deadlines, retries, tracing) shared by
runners, gateways and watchers."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, TypeVar

import grpc

from turngate.client import telemetry
from turngate.client.auth import bearer_interceptors
from turngate.client.hosts import is_loopback
from turngate.client.retry import Backoff, retrying
from turngate.v1 import turngate_pb2 as pb
from turngate.v1 import turngate_pb2_grpc as pb_grpc

log = logging.getLogger("turngate.client")
Req = TypeVar("Req")
Resp = TypeVar("Resp")

# The requests that change a session: their failures may leave the change made (errors.WriteOutcomeUnknown).
WRITES = (
    pb.AdmitTurnRequest,
    pb.HeartbeatRequest,
    pb.RecordToolCallRequest,
    pb.RecordInteractionRequest,
    pb.CompleteTurnRequest,
    pb.CancelTurnRequest,
    pb.ResolveInteractionRequest,
    pb.ResumeQueueRequest,
    pb.ClearQueueRequest,
    pb.SteerTurnRequest,
    pb.AcknowledgeSteerRequest,
    pb.MoveQueuedTurnRequest,
)
# A runner must get a heartbeat through within its lease: reconnect within ~2 s of the service
# coming back, not gRPC's default of up to 2 minutes. `channel_options` may override these. Not
# `grpc.min_reconnect_backoff_ms`: gRPC's core takes it for the least time a connection attempt is
# given (20 s by default), and a server slower than that to answer a connection failed every call
# UNAVAILABLE (docs/decisions.md, "Python SDK").
RECONNECT_OPTIONS: dict[str, Any] = {
    "grpc.initial_reconnect_backoff_ms": 100,
    "grpc.max_reconnect_backoff_ms": 2000,
}


def open_channel(
    target: str,
    *,
    credentials: grpc.ChannelCredentials | None,
    token: str | None,
    options: Sequence[tuple[str, Any]],
    interceptors: Sequence[grpc.aio.ClientInterceptor],
    tracer_provider: telemetry.TracerProvider | None,
) -> grpc.aio.Channel:
    """A channel whose calls carry the current trace context (W3C traceparent) and are traced as
    client spans, children of the current span; `interceptors` run inside those spans. With a
    `token`, every call carries it as a bearer token, added after `interceptors` have run (so
    they never see it). Without OpenTelemetry installed, calls are neither traced nor carry a
    traceparent (`telemetry`)."""
    traced: list[grpc.aio.ClientInterceptor] = [
        *telemetry.client_interceptors(tracer_provider),
        *interceptors,
        *(bearer_interceptors(token) if token is not None else ()),
    ]
    merged = list({**RECONNECT_OPTIONS, **dict(options)}.items())
    if credentials is None:
        if token is not None and not is_local(target):
            log.warning(
                "the bearer token goes to %s in plaintext: pass credentials=tls_credentials(...) "
                "unless a TLS proxy on this host carries it",
                target,
            )
        return grpc.aio.insecure_channel(target, options=merged, interceptors=traced)
    return grpc.aio.secure_channel(target, credentials, options=merged, interceptors=traced)


def is_local(target: str) -> bool:
    """Whether a gRPC target (`host:port`, `[::1]:port`, `dns:///host:port`, `unix:path`) stays on
    this host."""
    if target.startswith(("unix:", "unix-abstract:")):
        return True
    host = target.removeprefix("dns:///").removeprefix("ipv4:").removeprefix("ipv6:").rsplit(":", 1)[0]
    return is_loopback(host.strip("[]"))


class Connection:
    """What every part of the SDK calls through: the channel's stubs and the call policy."""

    def __init__(
        self,
        channel: grpc.aio.Channel,
        project_id: str,
        *,
        backoff: Backoff,
        call_timeout: float,
        retry_for: float,
        tracer: telemetry.Tracer,
    ) -> None:
        self.channel = channel
        self.project_id = project_id
        self.backoff = backoff
        self.call_timeout = call_timeout
        self.retry_for = retry_for
        self.tracer = tracer
        self.admission: pb_grpc.AdmissionServiceAsyncStub = pb_grpc.AdmissionServiceStub(channel)
        self.control: pb_grpc.ControlServiceAsyncStub = pb_grpc.ControlServiceStub(channel)
        self.sessions: pb_grpc.SessionServiceAsyncStub = pb_grpc.SessionServiceStub(channel)

    def session(self, session_id: str) -> pb.SessionRef:
        return pb.SessionRef(project_id=self.project_id, session_id=session_id)

    async def call(
        self,
        rpc: grpc.aio.UnaryUnaryMultiCallable[Req, Resp],
        request: Req,
        *,
        until: float | None = None,
        attempt_timeout: float | None = None,
    ) -> Resp:
        """One unary call with a deadline of `attempt_timeout` per attempt (default `call_timeout`),
        retried on network blips until `until` (event-loop time; default `retry_for` from now).
        Every attempt sends the same request: a write's retry answers what an earlier attempt did."""
        deadline = asyncio.get_running_loop().time() + self.retry_for if until is None else until
        per_attempt = self.call_timeout if attempt_timeout is None else attempt_timeout
        return await retrying(
            lambda: rpc(request, timeout=per_attempt),
            until=deadline,
            backoff=self.backoff,
            what=type(request).__name__.removesuffix("Request"),
            writes=isinstance(request, WRITES),
            request_id=getattr(request, "request_id", ""),
        )
