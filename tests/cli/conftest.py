"""The operator commands as an operator runs them: `turngate …` in its own process, against a
real server on a real port (in this process, SQLite in a temp dir, shared per test session).
Turns are driven with the SDK; each test has a project of its own."""

from __future__ import annotations

import asyncio
import json
import signal
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.support.backoff import FAST
from tests.support.processes import PROCESS_TIMEOUT_S, TURNGATE, cli_env
from tests.support.servers import running, settings_for
from turngate.client import Client
from turngate.service.server import TurngateServer

# How long a line of `turngate watch` may take to appear: reached only when a test fails.
LINE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Ran:
    """What a finished `turngate` printed, and its exit code."""

    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()

    def objects(self) -> list[dict[str, Any]]:
        """--json output: one object a line."""
        return [json.loads(line) for line in self.lines]


class Running:
    """A `turngate` still running (`watch`): read its lines, then interrupt it."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def line(self) -> str:
        assert self.process.stdout is not None
        async with asyncio.timeout(LINE_TIMEOUT_S):
            read = await self.process.stdout.readline()
        assert read, "turngate exited"
        return read.decode().rstrip("\n")

    async def interrupt(self, how: signal.Signals) -> Ran:
        self.process.send_signal(how)
        async with asyncio.timeout(PROCESS_TIMEOUT_S):
            out, err = await self.process.communicate()
        assert self.process.returncode is not None
        return Ran(self.process.returncode, out.decode(), err.decode())


@dataclass(frozen=True)
class Turngate:
    """The `turngate` command pointed at the test's server and project by TURNGATE_TARGET and
    TURNGATE_PROJECT (flags given to `run` override them)."""

    target: str
    project: str
    started: list[asyncio.subprocess.Process] = field(default_factory=list)

    def _env(self, env: dict[str, str]) -> dict[str, str]:
        return cli_env(**{"TURNGATE_TARGET": self.target, "TURNGATE_PROJECT": self.project, **env})

    async def start(self, *args: str, **env: str) -> Running:
        process = await asyncio.create_subprocess_exec(
            TURNGATE,
            *args,
            env=self._env(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        self.started.append(process)
        return Running(process)

    async def kill_leftovers(self) -> None:
        """Kills what a failed test left running."""
        for process in self.started:
            if process.returncode is None:
                process.kill()
                await process.wait()

    async def run(self, *args: str, **env: str) -> Ran:
        running = await self.start(*args, **env)
        async with asyncio.timeout(PROCESS_TIMEOUT_S):
            out, err = await running.process.communicate()
        assert running.process.returncode is not None
        return Ran(running.process.returncode, out.decode(), err.decode())


@pytest.fixture(scope="session")
async def cli_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[TurngateServer]:
    async for server, _ in running(settings_for(str(tmp_path_factory.mktemp("cli")))):
        yield server


@pytest.fixture
def project() -> str:
    return f"p-{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def turngate(cli_server: TurngateServer, project: str) -> AsyncIterator[Turngate]:
    command = Turngate(f"127.0.0.1:{cli_server.port}", project)
    yield command
    await command.kill_leftovers()


@pytest.fixture
async def client(turngate: Turngate) -> AsyncIterator[Client]:
    """The SDK, for the test's project."""
    async with Client(turngate.target, turngate.project, backoff=FAST) as sdk:
        yield sdk
