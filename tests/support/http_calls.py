"""Calls to a turngate HTTP listener through connectrpc's own client (an independent
implementation of the Connect and gRPC-Web protocols), in the protocol and codec asked for."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import grpc
from connectrpc.client import ConnectClient
from connectrpc.code import Code
from connectrpc.compat import google_protobuf_binary_codec, google_protobuf_json_codec
from connectrpc.errors import ConnectError
from connectrpc.protocol import ProtocolType
from google.protobuf.message import Message

from turngate.service.web.bridge import method_info
from turngate.v1 import turngate_pb2 as pb

# (protocol, codec) pairs a browser may use.
WIRES = {
    "connect-json": (ProtocolType.CONNECT, "json"),
    "connect-proto": (ProtocolType.CONNECT, "proto"),
    "grpc-web-proto": (ProtocolType.GRPC_WEB, "proto"),
    "grpc-web-json": (ProtocolType.GRPC_WEB, "json"),
}


@asynccontextmanager
async def http_client(port: int, wire: str = "connect-json") -> AsyncIterator[ConnectClient]:
    protocol, codec = WIRES[wire]
    async with ConnectClient(
        f"http://127.0.0.1:{port}",
        protocol=protocol,
        codec=google_protobuf_json_codec() if codec == "json" else google_protobuf_binary_codec(),
        send_compression=None,
    ) as client:
        yield client


def method(path: str) -> Any:
    """The MethodInfo of "/turngate.v1.SessionService/GetSession" (or "GetSession")."""
    name = path.rsplit("/", 1)[-1]
    for service in pb.DESCRIPTOR.services_by_name.values():
        if name in service.methods_by_name:
            return method_info(service.methods_by_name[name])
    raise KeyError(path)


def headers(authorization: str | None) -> Mapping[str, str]:
    return {} if authorization is None else {"authorization": authorization}


async def unary(client: ConnectClient, path: str, request: Message, authorization: str | None = None) -> Any:
    return await client.execute_unary(
        request=request, method=method(path), headers=headers(authorization), timeout_ms=5000
    )


def stream(
    client: ConnectClient,
    path: str,
    request: Message,
    authorization: str | None = None,
    timeout_ms: int | None = None,
) -> AsyncIterator[Any]:
    return client.execute_server_stream(
        request=request, method=method(path), headers=headers(authorization), timeout_ms=timeout_ms
    )


def status(error: ConnectError) -> grpc.StatusCode:
    """The gRPC status code of a Connect error's code."""
    return grpc.StatusCode.CANCELLED if error.code is Code.CANCELED else grpc.StatusCode[error.code.name]


async def code_of(
    port: int, wire: str, authorization: str | None, path: str, request: Message
) -> grpc.StatusCode:
    """The status of one call (OK also for a stream whose first message arrived)."""
    async with http_client(port, wire) as client:
        try:
            if path.endswith("/WatchSession"):
                responses = stream(client, path, request, authorization, timeout_ms=5000)
                await anext(aiter(responses))
                await responses.aclose()  # type: ignore[attr-defined]
            else:
                await unary(client, path, request, authorization)
        except ConnectError as error:
            return status(error)
    return grpc.StatusCode.OK
