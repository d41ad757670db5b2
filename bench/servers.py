"""The run's servers, each in its own process: the floor server and turngate replicas in redis
mode; and the run's private names (Redis prefix, ledger database, log folder)."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from turngate.service.store.redis.connection import Client
from turngate.service.store.redis.keys import Keyspace

from environment import ServerProcess, answers, free_port, wait_until
from floor_server import EMPTY
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
        """The servers' environment: no inherited TURNGATE_* setting, this run's key prefix, and
        the run's WAIT count if it has one."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("TURNGATE_")}
        env.update(TURNGATE_REDIS_PREFIX=self.prefix, TURNGATE_REDIS_BUCKETS=str(BUCKETS))
        if self.wait_replicas:
            env.update(TURNGATE_REDIS_WAIT_REPLICAS=str(self.wait_replicas))
        return env


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
    argv = [TURNGATE, "migrate", "--store", run.redis, "--ledger", run.ledger]
    with (run.logs / "migrate.log").open("wb") as log:
        process = await asyncio.create_subprocess_exec(*argv, env=run.env(), stdout=log, stderr=log)
        if await process.wait() != 0:
            raise RuntimeError(f"turngate migrate failed, see {run.logs / 'migrate.log'}")


async def start_servers(
    stack: AsyncExitStack, run: Run, *, separate_projector: bool
) -> tuple[Endpoint, Endpoint, Endpoint]:
    """The floor server, and turngate replicas A and B on the same Redis and ledger; with
    `separate_projector`, the replicas leave the ledger to one `turngate project` process."""
    store = ["--store", run.redis, "--ledger", run.ledger]

    def floor(port: int) -> list[str]:
        script = str(HERE / "floor_server.py")
        return [sys.executable, script, str(port), run.redis, f"{run.prefix}:floor", str(run.wait_replicas)]

    def turngate(port: int) -> list[str]:
        projection = ["--no-projector"] if separate_projector else []
        return [TURNGATE, "serve", "--listen", f"127.0.0.1:{port}", *store, *SERVE_FLAGS, *projection]

    await _migrate_ledger(run)
    if separate_projector:
        projector = await ServerProcess.start(
            "projector", [TURNGATE, "project", *store], run.env(), run.logs / "projector.log"
        )
        stack.push_async_callback(projector.stop)

    def started(name: str, argv: Callable[[int], list[str]], probe: Probe) -> Awaitable[Endpoint]:
        return launch(stack, name, argv, probe, run.env(), run.logs / f"{name}.log")

    return await asyncio.gather(
        started("floor", floor, floor_answers),
        started("replica-A", turngate, turngate_serving),
        started("replica-B", turngate, turngate_serving),
    )


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
