"""What a run sets up and tears down: server processes, a PostgreSQL database of its own, a Redis
key prefix of its own; and the facts about the machine that the figures depend on."""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import random
import socket
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]
import grpc
import redis
from redis.asyncio import Redis

STOP_TIMEOUT_S = 15.0
# A channel's options giving it a TCP connection of its own (gRPC would otherwise share one per
# target), so that callers spread over connections, and so over processes sharing a port.
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]
READY_TIMEOUT_S = 30.0
_POLL_S = 0.05


def free_port(within: range | None = None) -> int:
    """A port no one listens on: any the kernel picks, or one of `within` (a range a run was given
    to keep apart from other runs on the machine)."""
    if within is None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port: int = probe.getsockname()[1]
        return port
    for candidate in random.sample(within, len(within)):
        if is_free(candidate):
            return candidate
    raise OSError(f"no free port in {within.start}-{within.stop - 1}")


def is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


async def wait_until(ready: Callable[[], Awaitable[bool]], what: str) -> None:
    """Polls `ready` until it passes; fails after READY_TIMEOUT_S."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not await ready():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not ready after {READY_TIMEOUT_S:.0f} s")
        await asyncio.sleep(_POLL_S)


@dataclass
class ServerProcess:
    """A server in its own process, its stdout and stderr in `log`."""

    name: str
    process: asyncio.subprocess.Process
    log: Path

    @classmethod
    async def start(cls, name: str, argv: Sequence[str], env: Mapping[str, str], log: Path) -> ServerProcess:
        with log.open("wb") as out:
            process = await asyncio.create_subprocess_exec(
                *argv, env=dict(env), stdout=out, stderr=asyncio.subprocess.STDOUT, start_new_session=True
            )
        return cls(name, process, log)

    def check_alive(self) -> None:
        if self.process.returncode is not None:
            tail = self.log.read_text(errors="replace")[-2_000:]
            raise RuntimeError(f"{self.name} exited with {self.process.returncode}:\n{tail}")

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL if it has not exited within STOP_TIMEOUT_S."""
        if self.process.returncode is not None:
            return
        self.process.terminate()
        try:
            await asyncio.wait_for(self.process.wait(), STOP_TIMEOUT_S)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()


async def listening(processes: Sequence[ServerProcess], line: str, count: int, what: str) -> None:
    """Waits until the logs of `processes` hold `line` `count` times: every one listens (a port
    several processes share answers as soon as one does)."""

    async def ready() -> bool:
        for process in processes:
            process.check_alive()
        return sum(p.log.read_text(errors="replace").count(line) for p in processes) >= count

    await wait_until(ready, what)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time so far of process `pid`, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def redis_cpu_seconds(client: Redis) -> float:
    """The Redis server's CPU time so far (all its clients', not only this run's)."""
    info = await client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def postgres_cpu_seconds(connection: asyncpg.Connection, database: str) -> float:
    """CPU time so far of the PostgreSQL backends serving `database` now (this run's ledger)."""
    pids = await connection.fetch("SELECT pid FROM pg_stat_activity WHERE datname = $1", database)
    total = 0.0
    for row in pids:
        with contextlib.suppress(OSError):
            total += cpu_seconds(row["pid"])
    return total


async def answers(probe: Callable[[], Awaitable[bool]]) -> bool:
    """`probe` (a gRPC call) passed; False while the server does not answer yet."""
    try:
        return await probe()
    except grpc.aio.AioRpcError as error:
        if error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            return False
        raise


async def create_database(admin_dsn: str, name: str) -> None:
    connection = await asyncpg.connect(admin_dsn)
    try:
        await connection.execute(f'CREATE DATABASE "{name}"')
    finally:
        await connection.close()


async def drop_database(admin_dsn: str, name: str) -> None:
    connection = await asyncpg.connect(admin_dsn)
    try:
        await connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await connection.close()


async def delete_prefix(client: Redis, prefix: str) -> int:
    """Unlinks every key under `prefix:` (SCAN + UNLINK, never FLUSH); how many there were."""
    deleted = 0
    batch: list[bytes] = []
    async for key in client.scan_iter(match=f"{prefix}:*", count=1_000):
        batch.append(key)
        if len(batch) == 1_000:
            deleted += await client.unlink(*batch)
            batch.clear()
    if batch:
        deleted += await client.unlink(*batch)
    return deleted


def load_average() -> str:
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def host_facts() -> list[tuple[str, str]]:
    """The machine, its load now, and the Python and gRPC every run uses."""
    return [
        ("CPUs", f"{os.cpu_count()} ({_cpu_model()})"),
        ("load average at start", load_average()),
        ("Python", f"{platform.python_version()} ({platform.python_implementation()})"),
        ("grpcio", grpc.__version__),
    ]


async def machine_facts(client: Redis, admin_dsn: str) -> list[tuple[str, str]]:
    """host_facts, and the Redis and PostgreSQL of a run that uses them."""
    info = await client.info("server")
    connection = await asyncpg.connect(admin_dsn)
    try:
        postgres = await connection.fetchval("SHOW server_version")
    finally:
        await connection.close()
    return [
        *host_facts(),
        ("redis-py", redis.__version__),
        ("redis-server", str(info["redis_version"])),
        ("PostgreSQL", str(postgres)),
    ]
