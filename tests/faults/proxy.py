"""A TCP proxy that cuts a client's connection at a chosen request, to lose a reply for real: the
request reaches the server, which does what it asks and answers, and the answer never reaches the
client (a connection lost with the reply), or the request never leaves (a connection lost before
it was sent)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

# How long the proxy waits for the server's answer it drops: reached only when a test fails.
ANSWER_TIMEOUT_S = 10.0
_CHUNK = 65_536


@dataclass
class _Cut:
    at: bytes  # the request to cut at (a chunk the client sends that holds these bytes)
    after: bytes  # only once the connection has sent these (b"": at once)
    forward: bool  # whether the request reaches the server first (its answer is then dropped)


class CuttingProxy:
    """Listens on 127.0.0.1:`port` and relays every connection to the server at `target`."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = 0
        self.cuts = 0
        """How many connections it cut."""
        self._cut: _Cut | None = None
        self._server: asyncio.Server | None = None
        self._relays: set[asyncio.Task[None]] = set()

    def cut(self, at: bytes, *, after: bytes = b"", forward: bool = True) -> None:
        """Cuts the next connection to send a request holding `at` (once it has sent `after`):
        with `forward`, the request reaches the server and its answer is read and dropped before
        the client's connection is closed; without, the request is dropped and both sides closed."""
        self._cut = _Cut(at, after, forward)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[CuttingProxy]:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        try:
            yield self
        finally:
            self._server.close()
            for relay in self._relays:
                relay.cancel()
            await asyncio.gather(*self._relays, return_exceptions=True)
            await self._server.wait_closed()

    async def _relay(self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._relays.add(task)
        server_in, server_out = await asyncio.open_connection(*self.target)
        answers = asyncio.create_task(_pipe(server_in, client_out))
        sent = b""
        try:
            while chunk := await client_in.read(_CHUNK):
                sent += chunk
                cut = self._cut
                if cut is not None and cut.at in chunk and cut.after in sent:
                    self._cut = None
                    self.cuts += 1
                    answers.cancel()
                    await asyncio.wait([answers])  # nothing more reaches the client
                    if cut.forward:
                        await _answered(chunk, client_in, server_in, server_out)
                    return
                server_out.write(chunk)
                await server_out.drain()
        finally:
            answers.cancel()
            for writer in (client_out, server_out):
                writer.close()
            self._relays.discard(task)


async def _answered(
    request: bytes,
    client_in: asyncio.StreamReader,
    server_in: asyncio.StreamReader,
    server_out: asyncio.StreamWriter,
) -> None:
    """Sends `request` to the server and waits for (the start of) its answer, which it drops.
    The rest of the request, when it comes in more than one read (a loaded machine), follows it:
    the server answers only a whole command."""
    server_out.write(request)
    await server_out.drain()
    rest = asyncio.create_task(_pipe(client_in, server_out))
    try:
        async with asyncio.timeout(ANSWER_TIMEOUT_S):
            answer = await server_in.read(_CHUNK)
    finally:
        rest.cancel()
        await asyncio.wait([rest])
    assert answer, "the server closed the connection instead of answering"


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Relays what `source` sends to `sink`; the end of `source` ends `sink` too."""
    while chunk := await source.read(_CHUNK):
        sink.write(chunk)
        await sink.drain()
    sink.close()
