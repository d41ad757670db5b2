"""Servers a replica can be started before: a `redis-server` of the test's own that answers only
once the test starts it, and a TCP forwarder that makes a server (PostgreSQL) reachable only from
the moment the test starts it."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from tests.support.processes import PROCESS_TIMEOUT_S, free_port
from tests.support.waiting import eventually


class PrivateRedis:
    """A `redis-server` of the test's own on a free port, without persistence, started only when
    the test says so (so a replica can be started before its Redis answers)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        """Starts it and returns once it answers PING."""
        log = self.root / f"redis-{self.port}.log"
        with log.open("ab") as output:
            self._process = await asyncio.create_subprocess_exec(
                *("redis-server", "--port", str(self.port), "--bind", "127.0.0.1"),
                *("--dir", str(self.root), "--save", "", "--appendonly", "no"),
                stdout=output,
                stderr=asyncio.subprocess.STDOUT,
            )
        process = self._process
        async with Redis.from_url(self.url) as client:

            async def answers() -> bool:
                assert process.returncode is None, f"redis-server exited:\n{log.read_text()}"
                try:
                    return bool(await client.ping())
                except RedisConnectionError:
                    return False

            await eventually(answers, timeout_s=PROCESS_TIMEOUT_S)

    async def stop(self) -> None:
        if self._process is not None and self._process.returncode is None:
            self._process.terminate()
            async with asyncio.timeout(PROCESS_TIMEOUT_S):
                await self._process.wait()


class TcpForwarder:
    """Listens on a free `port` once started and pipes every connection to `target`: a server
    behind it is unreachable (connection refused) until `start()`."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.port = free_port()
        self._target = target
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
        with contextlib.suppress(ConnectionError, OSError):
            await writer.wait_closed()
