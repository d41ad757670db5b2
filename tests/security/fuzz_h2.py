"""One gRPC call over a bare HTTP/2 connection (the `h2` library), for metadata grpc's own client
refuses to send: header values that are not printable ASCII (UTF-8, control characters, bytes
that are not UTF-8). A fresh connection per call; a request body of at most one DATA frame."""

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
    """The answer's headers and trailers (grpc-status among them), or how the stream ended
    without them (`reset`: an HTTP/2 error code from RST_STREAM or GOAWAY)."""

    headers: dict[bytes, bytes]
    reset: int | None = None


async def call(port: int, path: str, body: bytes, metadata: list[tuple[bytes, bytes]]) -> H2Answer:
    """Calls `path` (a unary RPC) on 127.0.0.1:`port` with `body` (cut to MAX_BODY bytes); the
    caller bounds how long it may take."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    connection = H2Connection(config=_CONFIG)
    connection.initiate_connection()
    stream = connection.get_next_available_stream_id()
    connection.send_headers(
        stream,
        [
            (b":method", b"POST"),
            (b":scheme", b"http"),
            (b":path", path.encode()),
            (b":authority", b"127.0.0.1"),
            (b"content-type", b"application/grpc"),
            (b"te", b"trailers"),
            *metadata,
        ],
    )
    body = body[:MAX_BODY]
    connection.send_data(stream, b"\x00" + struct.pack(">I", len(body)) + body, end_stream=True)
    headers: dict[bytes, bytes] = {}
    try:
        while True:
            writer.write(connection.data_to_send())
            await writer.drain()
            received = await reader.read(65_536)
            if not received:
                return H2Answer(headers)
            for event in connection.receive_data(received):
                match event:
                    case ResponseReceived() | TrailersReceived() if event.stream_id == stream:
                        headers.update((bytes(name), bytes(value)) for name, value in event.headers or ())
                    case DataReceived():
                        connection.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                    case StreamReset() if event.stream_id == stream:
                        return H2Answer(headers, event.error_code)
                    case ConnectionTerminated():
                        return H2Answer(headers, event.error_code)
                    case StreamEnded() if event.stream_id == stream:
                        return H2Answer(headers)
    finally:
        writer.close()
        await writer.wait_closed()
