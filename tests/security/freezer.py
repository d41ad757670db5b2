"""A TCP proxy that can freeze: it stops carrying bytes either way but keeps both sockets open,
as a peer behind a dead network path looks to the server."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class Freezer:
    def __init__(self) -> None:
        self.flowing = asyncio.Event()
        self.flowing.set()
        self._tasks: set[asyncio.Task[None]] = set()

    def freeze(self) -> None:
        self.flowing.clear()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                await self.flowing.wait()
                writer.write(data)
                await writer.drain()

    async def _carry(
        self, target_port: int, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter
    ) -> None:
        server_r, server_w = await asyncio.open_connection("127.0.0.1", target_port)
        for pump in (self._pump(client_r, server_w), self._pump(server_r, client_w)):
            task = asyncio.create_task(pump)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    @asynccontextmanager
    async def serving(self, target_port: int) -> AsyncIterator[int]:
        """Listens on a free port, carrying each connection to `target_port`; yields the port."""

        async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self._carry(target_port, reader, writer)

        server = await asyncio.start_server(accepted, "127.0.0.1", 0)
        try:
            yield server.sockets[0].getsockname()[1]
        finally:
            server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
