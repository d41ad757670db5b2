"""A TCP forwarder between a client and a server: the server unreachable (connection refused) until
the test starts it, and, with a delay, each connection reaching the server only that much later (a
server slow to answer a connection)."""

from __future__ import annotations

import asyncio

from tests.support.processes import free_port


class TcpForwarder:
    """Listens on a free `port` once started and pipes every connection to `target`, `delay`
    seconds after taking it."""

    def __init__(self, target: tuple[str, int], *, delay: float = 0.0) -> None:
        self.port = free_port()
        self._target = target
        self._delay = delay
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._forward, "127.0.0.1", self.port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for pipe in list(self._pipes):
            pipe.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _forward(
        self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter
    ) -> None:
        await asyncio.sleep(self._delay)
        server_reader, server_writer = await asyncio.open_connection(*self._target)
        pipes = [
            asyncio.create_task(_pipe(client_reader, server_writer)),
            asyncio.create_task(_pipe(server_reader, client_writer)),
        ]
        self._pipes.update(pipes)
        for pipe in pipes:
            pipe.add_done_callback(self._pipes.discard)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65_536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()
