"""Every RPC of the contract as a Connect endpoint (the connectrpc library speaks Connect and
gRPC-Web) that forwards the call to this process's own gRPC server over a private Unix socket.
Authentication, roles, projects, limits, deadlines and error details are the gRPC path's by
construction: the HTTP side decodes and encodes, it decides nothing (docs/decisions.md, HTTP
listener)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from connectrpc.code import Code
from connectrpc.errors import ConnectError, ErrorDetail
from connectrpc.method import IdempotencyLevel, MethodInfo, StreamType
from connectrpc.request import RequestContext
from connectrpc.server import Endpoint
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from google.rpc import status_pb2
from protobuf.wkt import Any as DetailAny

from turngate.service.peers import FORWARDED_FOR, grpc_peer
from turngate.v1 import turngate_pb2 as pb

# The request headers that travel on as gRPC metadata: the caller's credentials and trace context.
FORWARDED_HEADERS = ("authorization", "traceparent", "tracestate")
_DETAILS = "grpc-status-details-bin"

Context = RequestContext[Any, Any]


def endpoints(channel: grpc.aio.Channel) -> dict[str, Any]:
    """Path ("/turngate.v1.SessionService/WatchSession") → its endpoint, for every RPC."""
    return {
        f"/{service.full_name}/{method.name}": _endpoint(channel, method)
        for service in pb.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    }


def method_info(method: MethodDescriptor) -> MethodInfo[Any, Any]:
    """What connectrpc needs to know of an RPC of the contract."""
    return MethodInfo(
        name=method.name,
        service_name=method.containing_service.full_name,
        input=GetMessageClass(method.input_type),
        output=GetMessageClass(method.output_type),
        idempotency_level=IdempotencyLevel.UNKNOWN,
        stream_type=StreamType.SERVER_STREAM if method.server_streaming else StreamType.UNARY,
    )


def _endpoint(channel: grpc.aio.Channel, method: MethodDescriptor) -> Any:
    info = method_info(method)
    path = f"/{info.service_name}/{info.name}"
    if method.server_streaming:
        return Endpoint.server_stream(
            info, _streaming(channel.unary_stream(path, _serialize, info.output.FromString))
        )
    return Endpoint.unary(info, _unary(channel.unary_unary(path, _serialize, info.output.FromString)))


def _serialize(message: Message) -> bytes:
    return message.SerializeToString()


def _unary(call: grpc.aio.UnaryUnaryMultiCallable[Any, Any]) -> Callable[[Any, Context], Awaitable[Any]]:
    async def forward(request: Message, context: Context) -> Message:
        try:
            response: Message = await call(request, metadata=_metadata(context), timeout=_timeout(context))
            return response
        except grpc.aio.AioRpcError as error:
            raise connect_error(error) from None

    return forward


def _streaming(
    call: grpc.aio.UnaryStreamMultiCallable[Any, Any],
) -> Callable[[Any, Context], AsyncIterator[Any]]:
    async def forward(request: Message, context: Context) -> AsyncIterator[Message]:
        responses = call(request, metadata=_metadata(context), timeout=_timeout(context))
        try:
            async for response in responses:
                yield response
        except grpc.aio.AioRpcError as error:
            raise connect_error(error) from None
        finally:
            # The browser went away (or the stream ended): the gRPC call ends with it.
            responses.cancel()

    return forward


def _metadata(context: Context) -> list[tuple[str, str]]:
    headers = context.request_headers
    forwarded = [(name, value) for name in FORWARDED_HEADERS for value in headers.getall(name)]
    client = context.client_address
    # The gRPC side sees the private socket as the peer: it is told whose call this is.
    return forwarded if client is None else [*forwarded, (FORWARDED_FOR, grpc_peer(client))]


def _timeout(context: Context) -> float | None:
    timeout_ms = context.timeout_ms
    return None if timeout_ms is None else timeout_ms / 1000


def connect_error(error: grpc.aio.AioRpcError) -> ConnectError:
    """The gRPC status as a Connect error, with the same details (google.rpc.Status's)."""
    code = error.code()
    connect_code = Code.CANCELED if code == grpc.StatusCode.CANCELLED else Code[code.name]
    return ConnectError(connect_code, error.details() or "", _details(error.trailing_metadata()))


def _details(trailers: grpc.aio.Metadata | None) -> list[ErrorDetail]:
    for key, value in trailers or ():
        if key == _DETAILS and isinstance(value, bytes):
            status = status_pb2.Status.FromString(value)
            return [
                ErrorDetail(DetailAny(type_url=item.type_url, value=item.value)) for item in status.details
            ]
    return []
