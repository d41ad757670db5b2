"""Servers a replica can be started before: a `redis-server` of the test's own that answers only
once the test starts it (a server such as PostgreSQL is made so by tests/support/relay.py's
`TcpForwarder`)."""

from __future__ import annotations

import asyncio
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
