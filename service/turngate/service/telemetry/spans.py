"""The server span of each RPC, with the current semantic-convention names.

opentelemetry-instrumentation-grpc (0.66b2) names a server span after the full method path with
its leading slash and gives it the deprecated `net.peer.*` and `rpc.user_agent` attributes; it has
no `OTEL_SEMCONV_STABILITY_OPT_IN` switch for gRPC. Its aio interceptor otherwise does what we
want (the caller's traceparent, the status of `abort` and `set_code`, streams), so this subclass
replaces only how a span starts: named `package.Service/Method`, with `rpc.system`, `rpc.service`,
`rpc.method`, `rpc.grpc.status_code`, `network.peer.address`/`network.peer.port` and
`user_agent.original`.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any
from urllib.parse import unquote

import grpc
from opentelemetry import trace
from opentelemetry.instrumentation.grpc._aio_server import OpenTelemetryAioServerInterceptor
from opentelemetry.semconv._incubating.attributes.rpc_attributes import (
    RPC_GRPC_STATUS_CODE,
    RPC_METHOD,
    RPC_SERVICE,
    RPC_SYSTEM,
)
from opentelemetry.semconv.attributes.network_attributes import NETWORK_PEER_ADDRESS, NETWORK_PEER_PORT
from opentelemetry.semconv.attributes.user_agent_attributes import USER_AGENT_ORIGINAL
from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

from turngate.service.peers import caller


def span_name(method: str) -> str:
    """`/turngate.v1.AdmissionService/AdmitTurn` → `turngate.v1.AdmissionService/AdmitTurn`."""
    return method.lstrip("/")


def peer(address: str) -> tuple[str, int] | None:
    """The address and port of a gRPC peer (`ipv4:127.0.0.1:5000`, `ipv6:[::1]:5000`); None for a
    Unix socket or what does not parse."""
    kind, _, rest = address.split(",")[0].partition(":")
    if kind not in ("ipv4", "ipv6"):
        return None
    host, _, port = unquote(rest).rpartition(":")
    if not host or not port.isdigit():
        return None
    return host.removeprefix("[").removesuffix("]"), int(port)


def server_attributes(method: str, metadata: dict[str, Any], peer_address: str) -> dict[str, AttributeValue]:
    """The attributes a server span starts with."""
    attributes: dict[str, AttributeValue] = {
        RPC_SYSTEM: "grpc",
        RPC_GRPC_STATUS_CODE: grpc.StatusCode.OK.value[0],
    }
    service, _, name = span_name(method).partition("/")
    if name:
        attributes[RPC_SERVICE] = service
        attributes[RPC_METHOD] = name
    agent = metadata.get("user-agent")
    if isinstance(agent, str):
        attributes[USER_AGENT_ORIGINAL] = agent
    parsed = peer(peer_address)
    if parsed is not None:
        attributes[NETWORK_PEER_ADDRESS], attributes[NETWORK_PEER_PORT] = parsed
    return attributes


class ServerInterceptor(OpenTelemetryAioServerInterceptor):
    """The library's aio server interceptor, starting spans with the current names."""

    def _start_span(
        self,
        handler_call_details: grpc.HandlerCallDetails,
        context: grpc.aio.ServicerContext[Any, Any],
        set_status_on_exception: bool = False,
    ) -> AbstractContextManager[Span]:
        method: str = handler_call_details.method or ""
        metadata = context.invocation_metadata() or ()
        started: AbstractContextManager[Span] = self._tracer.start_as_current_span(
            name=span_name(method),
            kind=trace.SpanKind.SERVER,
            # A call the HTTP listener forwarded is the browser's, not the private socket's.
            attributes=server_attributes(method, dict(metadata), caller(context.peer(), metadata)),
            set_status_on_exception=set_status_on_exception,
        )
        return started
