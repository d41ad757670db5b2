"""The run's servers, each in its own process: the floor server and turngate replicas in redis
mode; the run's private names (Redis prefix, ledger database, log folder); and which turngate code
they run (by default what this process imports; or a checkout, such as a past revision's)."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
import tarfile
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from turngate.service.store.redis.connection import Client
from turngate.service.store.redis.keys import Keyspace

from environment import ServerProcess, answers, cpu_seconds, free_port, wait_until
from floor_server import EMPTY
from measure import CpuMeter
from rpcs import Stubs

HERE = Path(__file__).resolve().parent
TURNGATE = str(Path(sys.executable).with_name("turngate"))
BUCKETS = 16
# Long leases and stop grace: the watchdog settles nothing during the run, so its work is not
# mixed into what is measured.
SERVE_FLAGS = ("--lease-ttl", "3600", "--stop-grace", "3600")
DRAIN_TIMEOUT_S = 120.0


@dataclass(frozen=True, slots=True)
class Run:
    """This run's private names, and where its servers are."""

    redis: str  # the store URL: redis://, redis+cluster:// or redis+sentinel://
    postgres: str  # postgresql://user@host:port, without a database
    prefix: str
    database: str
    logs: Path
    # Replicas a write waits for (WAIT) before it is acknowledged; 0: none, turngate's default.
    wait_replicas: int = 0
    # The turngate checkout the servers run (code_env); None: what this process imports.
    code: Path | None = None
    # More TURNGATE_* settings for the servers, as (variable, value) pairs.
    settings: tuple[tuple[str, str], ...] = ()

    @property
    def keys(self) -> Keyspace:
        return Keyspace(prefix=self.prefix, buckets=BUCKETS)

    @property
    def postgres_admin(self) -> str:
        return f"{self.postgres}/postgres"

    @property
    def ledger(self) -> str:
        return f"{self.postgres.replace('postgresql://', 'postgresql+asyncpg://', 1)}/{self.database}"

    def env(self) -> dict[str, str]:
        """The servers' environment: no inherited TURNGATE_* setting, this run's key prefix, the
        run's WAIT count if it has one, its own settings, and its code if it has its own."""
        env = code_env({k: v for k, v in os.environ.items() if not k.startswith("TURNGATE_")}, self.code)
        env.update(TURNGATE_REDIS_PREFIX=self.prefix, TURNGATE_REDIS_BUCKETS=str(BUCKETS))
        if self.wait_replicas:
            env.update(TURNGATE_REDIS_WAIT_REPLICAS=str(self.wait_replicas))
        env.update(self.settings)
        return env


def code_env(env: Mapping[str, str], checkout: Path | None) -> dict[str, str]:
    """`env` with PYTHONPATH starting with `checkout`'s service/ and clients/: a process started
    with it (the venv's `turngate` console script too) imports that checkout's turngate before the
    one installed in the venv. None: `env` as it is (servers import what this process imports)."""
    if checkout is None:
        return dict(env)
    paths = [str(checkout / "service"), str(checkout / "clients")]
    if inherited := env.get("PYTHONPATH"):
        paths.append(inherited)
    return {**env, "PYTHONPATH": os.pathsep.join(paths)}


def turngate_command(checkout: Path | None) -> list[str]:
    """How to run `turngate` of this code (the venv's console script) or of `checkout`'s (code_env):
    as a module, since the console script imports the entry module it was installed with, which
    an older checkout may not have."""
    return [TURNGATE] if checkout is None else [sys.executable, "-m", "turngate.service.cli"]


def export_revision(revision: str, into: Path) -> str:
    """`revision`'s service/ and clients/ (`git archive` of this repository) extracted into `into`,
    a checkout for code_env that leaves the repository's work trees alone; the commit's short
    hash. LookupError if the checkout does not have it (a shallow clone)."""
    git = ["git", "-C", str(HERE.parent)]
    found = subprocess.run(
        [*git, "rev-parse", "--short", "--verify", f"{revision}^{{commit}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode:
        raise LookupError(f"no commit {revision!r} in this checkout: {found.stderr.strip()}")
    commit = found.stdout.strip()
    archive = subprocess.run([*git, "archive", commit, "service", "clients"], capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return commit


@dataclass(frozen=True, slots=True)
class Endpoint:
    process: ServerProcess
    address: str
    channel: grpc.aio.Channel

    @property
    def stubs(self) -> Stubs:
        return Stubs.on(self.channel)

    @property
    def pid(self) -> int:
        return self.process.process.pid

    def meters(self) -> dict[str, CpuMeter]:
        """The server process's CPU, as role "server"."""
        pid = self.pid

        async def server_cpu() -> float:
            return cpu_seconds(pid)

        return {"server": server_cpu}


Probe = Callable[[grpc.aio.Channel], Awaitable[bool]]


async def floor_answers(channel: grpc.aio.Channel) -> bool:
    empty: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(EMPTY)
    return await empty(b"", timeout=0.5) == b""


async def turngate_serving(channel: grpc.aio.Channel) -> bool:
    reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=0.5)
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


async def launch(
    stack: AsyncExitStack,
    name: str,
    argv: Callable[[int], list[str]],
    probe: Probe,
    env: dict[str, str],
    log: Path,
) -> Endpoint:
    """Starts a server on a free port, its output in `log`, and waits until `probe` passes; the
    stack stops it."""
    port = free_port()
    process = await ServerProcess.start(name, argv(port), env, log)
    stack.push_async_callback(process.stop)
    address = f"127.0.0.1:{port}"
    channel = grpc.aio.insecure_channel(address)
    stack.push_async_callback(channel.close)

    async def ready() -> bool:
        process.check_alive()
        return await answers(lambda: probe(channel))

    await wait_until(ready, name)
    return Endpoint(process, address, channel)


async def _migrate_ledger(run: Run) -> None:
    """Migrated once up front, so the replicas' start-up migrations are no-ops."""
    argv = [*turngate_command(run.code), "migrate", "--store", run.redis, "--ledger", run.ledger]
    with (run.logs / "migrate.log").open("wb") as log:
        process = await asyncio.create_subprocess_exec(*argv, env=run.env(), stdout=log, stderr=log)
        if await process.wait() != 0:
            raise RuntimeError(f"turngate migrate failed, see {run.logs / 'migrate.log'}")


async def start_floor(stack: AsyncExitStack, run: Run) -> Endpoint:
    """The floor server (floor_server.py) on the run's Redis."""

    def floor(port: int) -> list[str]:
        script = str(HERE / "floor_server.py")
        return [sys.executable, script, str(port), run.redis, f"{run.prefix}:floor", str(run.wait_replicas)]

    return await launch(stack, "floor", floor, floor_answers, run.env(), run.logs / "floor.log")


async def start_replicas(
    stack: AsyncExitStack, run: Run, names: Sequence[str], *, separate_projector: bool
) -> list[Endpoint]:
    """turngate replicas, one per name, on the run's Redis and ledger (migrated first); with
    `separate_projector`, the replicas leave the ledger to one `turngate project` process."""
    store = ["--store", run.redis, "--ledger", run.ledger]
    command = turngate_command(run.code)

    def turngate(port: int) -> list[str]:
        projection = ["--no-projector"] if separate_projector else []
        return [*command, "serve", "--listen", f"127.0.0.1:{port}", *store, *SERVE_FLAGS, *projection]

    await _migrate_ledger(run)
    if separate_projector:
        projector = await ServerProcess.start(
            "projector", [*command, "project", *store], run.env(), run.logs / "projector.log"
        )
        stack.push_async_callback(projector.stop)
    return await asyncio.gather(
        *(
            launch(stack, name, turngate, turngate_serving, run.env(), run.logs / f"{name}.log")
            for name in names
        )
    )


async def start_servers(
    stack: AsyncExitStack, run: Run, *, separate_projector: bool
) -> tuple[Endpoint, Endpoint, Endpoint]:
    """The floor server, and turngate replicas A and B on the same Redis and ledger; with
    `separate_projector`, the replicas leave the ledger to one `turngate project` process."""
    floor, (a, b) = await asyncio.gather(
        start_floor(stack, run),
        start_replicas(stack, run, ("replica-A", "replica-B"), separate_projector=separate_projector),
    )
    return floor, a, b


async def ledger_backlog(client: Client, keys: Keyspace) -> int:
    """Outbox entries not yet projected into the ledger (the projector deletes what it records);
    on a cluster, the pipeline sends each XLEN to the master of its bucket's slot."""
    async with client.pipeline(transaction=False) as pipe:
        for bucket in keys.all_buckets():
            pipe.xlen(keys.outbox(bucket))
        lengths: list[int] = await pipe.execute()
    return sum(lengths)


async def drain_ledger(client: Client, keys: Keyspace) -> tuple[int, float]:
    """Waits until the projector has caught up: the backlog found, and how long it took."""
    start = time.perf_counter()
    backlog = found = await ledger_backlog(client, keys)
    while backlog:
        if time.perf_counter() - start > DRAIN_TIMEOUT_S:
            raise TimeoutError(f"the ledger projector still has {backlog} entries after {DRAIN_TIMEOUT_S} s")
        await asyncio.sleep(0.02)
        backlog = await ledger_backlog(client, keys)
    return found, time.perf_counter() - start
