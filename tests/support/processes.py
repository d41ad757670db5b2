"""turngate as its own process: the `turngate` command, a server on a free port, its SQLite file."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import resource
import signal
import socket
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.servers import Client, client_for
from tests.support.waiting import POLL_INTERVAL_S, WAIT_TIMEOUT_S, eventually

TURNGATE = str(Path(sys.executable).with_name("turngate"))
SERVICES = ("turngate.v1.AdmissionService", "turngate.v1.ControlService", "turngate.v1.SessionService")
SERVING = health_pb2.HealthCheckResponse.SERVING
# How long the command may take to start, stop or exit: reached only when a test fails.
PROCESS_TIMEOUT_S = 20.0
# A server that is starting refuses connections: retry them quickly instead of backing off for 1 s+.
# (Not grpc.min_reconnect_backoff_ms, the least time a connection attempt is given: at 50 ms, a
# server busy for longer before it answered a connection failed the calls waiting for it.)
_FAST_RECONNECT = [
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 100),
]


# Test servers' ports: each pytest-xdist worker hands them out in turn from a range of its own,
# below the kernel's ephemeral range (a bind to port 0 and every outgoing connection draw from
# that), so a port a test's server was given, and may take again after a restart, is not taken
# meanwhile by another worker's server or by a client's socket. Cluster bus ports (port + 10000)
# fall clear of every worker's range. Two test runs at once on one machine set
# TURNGATE_TEST_FIRST_PORT apart (e.g. 12000 and 17000) so that their ranges do not meet.
FIRST_PORT = int(os.environ.get("TURNGATE_TEST_FIRST_PORT", "12000"))
PORTS_PER_WORKER = 1_000
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
_FIRST = FIRST_PORT + PORTS_PER_WORKER * (int(_WORKER) if _WORKER.isdigit() else 0)
_ports = itertools.cycle(range(_FIRST, _FIRST + PORTS_PER_WORKER))


def free_port() -> int:
    """The next port of this worker's range that nothing listens on."""
    for _ in range(PORTS_PER_WORKER):
        if is_free(port := next(_ports)):
            return port
    raise RuntimeError(f"no free port from {_FIRST} to {_FIRST + PORTS_PER_WORKER - 1}")


def is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def database(tmp: Path) -> Path:
    """The SQLite file `spawn_server(tmp)` stores into."""
    return tmp / "turngate.db"


def sqlite_url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


def cli_env(**variables: str) -> dict[str, str]:
    """This environment without any TURNGATE_* setting, plus `variables`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TURNGATE_")}
    env.update(variables)
    return env


def run_cli(cwd: Path, *args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`turngate *args` to its end."""
    return subprocess.run(
        [TURNGATE, *args],
        cwd=cwd,
        env=cli_env(**(env or {})),
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT_S,
        check=False,
    )


@contextmanager
def sqlite_file(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection to the SQLite file at `path`, committed unless the block raised, then closed."""
    conn = sqlite3.connect(path)
    try:
        with conn:
            yield conn
    finally:
        conn.close()


def dump(path: Path) -> list[str]:
    """Everything in a SQLite file, schema and rows, as SQL: equal dumps mean nothing was written."""
    with sqlite_file(path) as conn:
        return list(conn.iterdump())


@contextmanager
def write_locked(path: Path) -> Iterator[None]:
    """Holds SQLite's write lock from another connection: the server's writes wait (reads go on)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        yield
        conn.execute("ROLLBACK")
    finally:
        conn.close()


async def health_of(health: health_pb2_grpc.HealthStub, service: str = "") -> int | None:
    """The health status of `service`, or None while the server does not answer."""
    try:
        reply = await health.Check(health_pb2.HealthCheckRequest(service=service), timeout=0.5)
    except grpc.aio.AioRpcError as error:
        if error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            return None
        raise
    status: int = reply.status
    return status


async def wait_for_health(
    health: health_pb2_grpc.HealthStub, status: int, service: str = "", *, timeout_s: float = WAIT_TIMEOUT_S
) -> None:
    async def reached() -> bool:
        return await health_of(health, service) == status

    await eventually(reached, timeout_s=timeout_s)


@dataclass
class Spawned:
    """A `turngate serve` process, and a client connected to it."""

    process: asyncio.subprocess.Process
    client: Client

    async def kill(self) -> None:
        """SIGKILL, as when the machine dies: no shutdown code runs."""
        self.process.send_signal(signal.SIGKILL)
        await self.exit_code()

    def terminate(self) -> None:
        self.process.send_signal(signal.SIGTERM)

    async def exit_code(self) -> int:
        async with asyncio.timeout(PROCESS_TIMEOUT_S):
            return await self.process.wait()


def serve_log(tmp: Path, port: int) -> Path:
    """Where `spawn_server(tmp, port=port)` writes the server's stderr (its log)."""
    return tmp / f"serve-{port}.log"


@asynccontextmanager
async def spawn_server(
    tmp: Path,
    *args: str,
    port: int | None = None,
    env: Mapping[str, str] | None = None,
    serving: bool = True,
    open_files: int | None = None,
) -> AsyncIterator[Spawned]:
    """`turngate serve *args` storing into `database(tmp)` unless args name a --store, listening on
    `port` (a free one by default; --listen is added unless args or env set it), once it is
    SERVING (with `serving=False`: once its health answers at all); with `open_files`, that is its
    file limit (RLIMIT_NOFILE). On exit it is stopped with SIGTERM if it still runs."""
    # A test of the drain sets its delay; the others need not wait it out at every stop.
    env = {"TURNGATE_DRAIN_DELAY": "0", **(env or {})}
    port = port or free_port()
    if "--listen" not in args and "TURNGATE_LISTEN" not in env:
        args = (*args, "--listen", f"127.0.0.1:{port}")
    if "--store" not in args:
        args = (*args, "--store", sqlite_url(database(tmp)))
    log = serve_log(tmp, port)
    with log.open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            TURNGATE, "serve", *args, cwd=tmp, env=cli_env(**env), stderr=stderr
        )
    if open_files is not None:  # set at once: the interpreter is still starting
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.prlimit(process.pid, resource.RLIMIT_NOFILE, (open_files, hard))
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=_FAST_RECONNECT) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            async with asyncio.timeout(PROCESS_TIMEOUT_S):
                while True:
                    assert process.returncode is None, f"turngate serve exited:\n{log.read_text()}"
                    status = await health_of(health)
                    if status == SERVING or (status is not None and not serving):
                        break
                    await asyncio.sleep(POLL_INTERVAL_S)
            yield Spawned(process, client_for(channel))
    finally:
        if process.returncode is None:
            await stopped(process)


async def stopped(process: asyncio.subprocess.Process, within_s: float = PROCESS_TIMEOUT_S) -> None:
    """Ends `process` (which may have exited already): SIGTERM, then SIGKILL if it still runs
    after `within_s` seconds."""
    with contextlib.suppress(ProcessLookupError):
        process.terminate()
    try:
        async with asyncio.timeout(within_s):
            await process.wait()
    except TimeoutError:
        process.kill()
        await process.wait()


def connect(port: int) -> grpc.aio.Channel:
    """A channel to a local server on `port` that reconnects quickly while the server starts."""
    return grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=_FAST_RECONNECT)


async def health_reaches(port: int, status: int) -> None:
    """Waits until the server on `port` answers the overall health check with `status`."""
    async with connect(port) as channel:
        await wait_for_health(health_pb2_grpc.HealthStub(channel), status, timeout_s=PROCESS_TIMEOUT_S)
