"""One gRPC call over a bare HTTP/2 connection, for metadata grpc's own client refuses to send
(header values that are not printable ASCII: UTF-8, control characters, bytes that are not UTF-8).

Deliberately minimal: a fresh connection per call, headers sent as HPACK literals, a request body
of at most one DATA frame, and only the plain literal headers of the answer decoded (enough for
grpc-status and grpc-message, which gRPC servers send that way on a new connection).
"""

from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass

_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_DATA, _HEADERS, _RST_STREAM, _SETTINGS, _PING, _GOAWAY = 0, 1, 3, 4, 6, 7
_END_STREAM, _ACK, _END_HEADERS = 0x1, 0x1, 0x4
MAX_BODY = 16_000  # one DATA frame within the default maximum frame size
_STREAM = 1


@dataclass(frozen=True)
class H2Answer:
    """The literal headers of the answer (grpc-status among them), or how the stream ended
    without one (`reset`: an HTTP/2 error code from RST_STREAM or GOAWAY)."""

    headers: dict[bytes, bytes]
    reset: int | None = None


def _integer(value: int, prefix_bits: int, first: int = 0) -> bytes:
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = bytearray([first | limit])
    value -= limit
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _literal(name: bytes, value: bytes) -> bytes:
    """A header field as a literal without indexing, name and value as they are (no Huffman)."""
    return b"\x00" + _integer(len(name), 7) + name + _integer(len(value), 7) + value


def _frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def _read_integer(block: bytes, at: int, prefix_bits: int) -> tuple[int, int]:
    limit = (1 << prefix_bits) - 1
    value = block[at] & limit
    at += 1
    if value < limit:
        return value, at
    shift = 0
    while True:
        byte = block[at]
        at += 1
        value += (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def _read_string(block: bytes, at: int) -> tuple[bytes | None, int]:
    huffman = bool(block[at] & 0x80)
    size, at = _read_integer(block, at, 7)
    return (None if huffman else block[at : at + size]), at + size


def literal_headers(block: bytes) -> dict[bytes, bytes]:
    """The header fields of an HPACK block sent with literal names and plain values; indexed
    fields and Huffman-coded strings are skipped."""
    found: dict[bytes, bytes] = {}
    at = 0
    while at < len(block):
        first = block[at]
        if first & 0x80:  # indexed field
            _, at = _read_integer(block, at, 7)
            continue
        if first & 0xE0 == 0x20:  # dynamic table size update
            _, at = _read_integer(block, at, 5)
            continue
        index, at = _read_integer(block, at, 6 if first & 0x40 else 4)
        name: bytes | None = None
        if index == 0:
            name, at = _read_string(block, at)
        value, at = _read_string(block, at)
        if name is not None and value is not None:
            found[name] = value
    return found


async def call(port: int, path: str, body: bytes, metadata: list[tuple[bytes, bytes]]) -> H2Answer:
    """Calls `path` (a unary RPC) on 127.0.0.1:`port` with `body` (cut to MAX_BODY bytes); the
    caller bounds how long it may take."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        body = body[:MAX_BODY]
        fields = [
            (b":method", b"POST"),
            (b":scheme", b"http"),
            (b":path", path.encode()),
            (b":authority", b"127.0.0.1"),
            (b"content-type", b"application/grpc"),
            (b"te", b"trailers"),
            *metadata,
        ]
        block = b"".join(_literal(name, value) for name, value in fields)
        message = b"\x00" + struct.pack(">I", len(body)) + body
        writer.write(
            _PREFACE
            + _frame(_SETTINGS, 0, 0, b"")
            + _frame(_HEADERS, _END_HEADERS, _STREAM, block)
            + _frame(_DATA, _END_STREAM, _STREAM, message)
        )
        await writer.drain()
        headers: dict[bytes, bytes] = {}
        while True:
            head = await reader.readexactly(9)
            size, kind, flags = int.from_bytes(head[:3], "big"), head[3], head[4]
            stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
            payload = await reader.readexactly(size)
            if kind == _SETTINGS and not flags & _ACK:
                writer.write(_frame(_SETTINGS, _ACK, 0, b""))
            elif kind == _PING and not flags & _ACK:
                writer.write(_frame(_PING, _ACK, 0, payload))
            elif kind == _HEADERS and stream == _STREAM:
                headers.update(literal_headers(payload))
            elif kind == _RST_STREAM and stream == _STREAM:
                return H2Answer(headers, int.from_bytes(payload[:4], "big"))
            elif kind == _GOAWAY:
                return H2Answer(headers, int.from_bytes(payload[4:8], "big"))
            if stream == _STREAM and kind in (_HEADERS, _DATA) and flags & _END_STREAM:
                return H2Answer(headers)
    finally:
        writer.close()
        await writer.wait_closed()
