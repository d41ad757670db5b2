"""Raw TCP connections to an HTTP listener, for what no HTTP client sends: requests sent a byte
at a time or never finished, two framings of one body, headers that are not text (over HTTP/1.1,
or HTTP/2 with tests/support/bare_h2.py), many connections held open, from other loopback
addresses (127.0.0.2…, which Linux routes to the same host)."""

from __future__ import annotations

import asyncio
import http.client
import io
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

from tests.support import bare_h2

ADMIT = "/turngate.v1.AdmissionService/AdmitTurn"
GET_SESSION = "/turngate.v1.SessionService/GetSession"
WIRES = ("http/1.1", "h2")
ANSWER_WITHIN_S = 5.0


def head(
    path: str = GET_SESSION,
    *,
    host: str = "127.0.0.1",
    content_length: int | None = None,
    headers: Mapping[str, str] | None = None,
    raw: tuple[tuple[bytes, bytes], ...] = (),
) -> bytes:
    """A POST's request line and headers (Connect's JSON), and the blank line that ends them."""
    lines = [f"POST {path} HTTP/1.1".encode(), f"host: {host}".encode(), b"content-type: application/json"]
    if content_length is not None:
        lines.append(f"content-length: {content_length}".encode())
    lines += [f"{name}: {value}".encode() for name, value in (headers or {}).items()]
    lines += [name + b": " + value for name, value in raw]
    return b"\r\n".join(lines) + b"\r\n\r\n"


@dataclass
class Raw:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def until_closed(self, within: float) -> bytes:
        """All the server sends until it closes the connection (TimeoutError if it keeps it open
        longer than `within` seconds)."""
        received = bytearray()
        async with asyncio.timeout(within):
            try:
                while chunk := await self.reader.read(65_536):
                    received += chunk
            except ConnectionError:
                pass  # a reset closes it too
        return bytes(received)

    async def still_open(self, during: float) -> bool:
        """Whether the server keeps the connection open (and silent) for `during` seconds."""
        try:
            await self.until_closed(during)
        except TimeoutError:
            return True
        return False


def status_of(answer: bytes) -> int:
    """The status code of an HTTP/1.1 answer ("HTTP/1.1 503 …" → 503)."""
    return int(answer.split(b" ", 2)[1])


def body_of(answer: bytes) -> bytes:
    """The body of an HTTP/1.1 answer, its framing (length, chunks) undone by the standard library."""
    response = http.client.HTTPResponse(_Received(answer))  # type: ignore[arg-type]
    response.begin()
    return response.read()


class _Received:
    """What http.client reads a response from: bytes already received."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def makefile(self, _mode: str) -> io.BytesIO:
        return io.BytesIO(self._data)


@asynccontextmanager
async def connected(port: int, count: int = 1, *, source: str = "127.0.0.1") -> AsyncIterator[list[Raw]]:
    """`count` connections to 127.0.0.1:`port` from `source`, closed at the end of the block."""
    async with AsyncExitStack() as stack:
        opened = []
        for _ in range(count):
            reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
            stack.callback(writer.close)
            opened.append(Raw(reader, writer))
        yield opened


async def post(
    port: int, wire: str, headers: list[tuple[bytes, bytes]], body: bytes, path: str = GET_SESSION
) -> tuple[int, bytes]:
    """The status and body of one POST of Connect JSON with `headers` as they are, over HTTP/1.1
    or HTTP/2 without TLS (`wire`); 0 and nothing when the HTTP/2 layer reset the stream."""
    if wire == "h2":
        answer = await bare_h2.exchange(port, path, [(b"content-type", b"application/json"), *headers], body)
        return (0, b"") if answer.reset is not None else (int(answer.headers[b":status"]), answer.body)
    async with connected(port) as (connection,):
        await connection.send(
            head(path, content_length=len(body), raw=(*headers, (b"connection", b"close"))) + body
        )
        raw = await connection.until_closed(ANSWER_WITHIN_S)
    return status_of(raw), body_of(raw)
