"""One request over a bare HTTP/2 connection (the `h2` library), for headers no HTTP/2 client
sends: values that are not printable ASCII (UTF-8, control characters, bytes that are not UTF-8).
A gRPC call (to the gRPC port), or any POST (to the HTTP listener, over h2c). A fresh connection
per request; a request body of at most one DATA frame."""

from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass

from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import (
    ConnectionTerminated,
    DataReceived,
    ResponseReceived,
    StreamEnded,
    StreamReset,
    TrailersReceived,
)

MAX_BODY = 16_000  # one DATA frame within the default maximum frame size
# Headers as bytes, sent as they are: no validation or normalization of what is being fuzzed.
_CONFIG = H2Configuration(
    client_side=True,
    header_encoding=None,
    validate_outbound_headers=False,
    normalize_outbound_headers=False,
    validate_inbound_headers=False,
)


@dataclass(frozen=True)
class H2Answer:
    """The answer's headers and trailers (grpc-status among them) and body, or how the stream
    ended without them (`reset`: an HTTP/2 error code from RST_STREAM or GOAWAY)."""

    headers: dict[bytes, bytes]
    reset: int | None = None
    body: bytes = b""


async def call(port: int, path: str, body: bytes, metadata: list[tuple[bytes, bytes]]) -> H2Answer:
    """Calls `path` (a unary RPC) on 127.0.0.1:`port` with `body` (cut to MAX_BODY bytes); the
    caller bounds how long it may take."""
    body = body[:MAX_BODY]
    grpc_headers = [(b"content-type", b"application/grpc"), (b"te", b"trailers"), *metadata]
    return await exchange(port, path, grpc_headers, b"\x00" + struct.pack(">I", len(body)) + body)


async def exchange(port: int, path: str, headers: list[tuple[bytes, bytes]], body: bytes) -> H2Answer:
    """One POST of `body` (at most MAX_BODY bytes) to `path` on 127.0.0.1:`port` over a fresh
    HTTP/2 connection without TLS (prior knowledge), with `headers` as they are; the caller
    bounds how long it may take."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    connection = H2Connection(config=_CONFIG)
    connection.initiate_connection()
    stream = connection.get_next_available_stream_id()
    pseudo = [
        (b":method", b"POST"),
        (b":scheme", b"http"),
        (b":path", path.encode()),
        (b":authority", b"127.0.0.1"),
    ]
    connection.send_headers(stream, [*pseudo, *headers])
    connection.send_data(stream, body, end_stream=True)
    answered: dict[bytes, bytes] = {}
    received_body = bytearray()
    try:
        while True:
            writer.write(connection.data_to_send())
            await writer.drain()
            received = await reader.read(65_536)
            if not received:
                return H2Answer(answered, body=bytes(received_body))
            for event in connection.receive_data(received):
                match event:
                    case ResponseReceived() | TrailersReceived() if event.stream_id == stream:
                        answered.update((bytes(name), bytes(value)) for name, value in event.headers or ())
                    case DataReceived():
                        connection.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                        if event.stream_id == stream:
                            received_body += event.data or b""
                    case StreamReset() if event.stream_id == stream:
                        return H2Answer(answered, event.error_code, bytes(received_body))
                    case ConnectionTerminated():
                        return H2Answer(answered, event.error_code, bytes(received_body))
                    case StreamEnded() if event.stream_id == stream:
                        return H2Answer(answered, body=bytes(received_body))
    finally:
        writer.close()
        await writer.wait_closed()
