"""Several `turngate serve` replicas of one deployment: one Redis (under a key prefix of the
deployment's own) and one PostgreSQL ledger, started together; clients acting through two of them.

The modules that use them give each deployment a prefix on the shared Redis (shared_redis.py) or
on this run's Cluster or Sentinel (shared_topologies.py), and a database of its own (postgres.py).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.processes import PROCESS_TIMEOUT_S, TURNGATE, Spawned, cli_env, spawn_server
from tests.support.servers import Client
from turngate.service.core import SessionKey
from turngate.service.store.redis.keys import Keyspace
from turngate.v1 import turngate_pb2 as pb

PROJECT = "p-replicas"
# Enough buckets that the sessions of a test spread over several outboxes and deadline sets.
BUCKETS = 8


@dataclass(frozen=True)
class Deployment:
    """What every replica of one deployment is started with: one Redis (under `prefix`) and one
    ledger, and second-scale timings."""

    redis_url: str
    prefix: str
    ledger_url: str
    lease_ttl: float = 10.0
    stop_grace: float = 5.0
    reclaim_idle: float = 1.0
    # False: the replicas leave the ledger to `turngate project` processes (`projector`).
    replicas_project: bool = True
    # Seconds an idle session stays in Redis (None: the default, a day).
    idle_retention: float | None = None

    @property
    def keys(self) -> Keyspace:
        return Keyspace(prefix=self.prefix, buckets=BUCKETS)

    @property
    def env(self) -> dict[str, str]:
        return {
            "TURNGATE_REDIS_PREFIX": self.prefix,
            "TURNGATE_REDIS_BUCKETS": str(BUCKETS),
            "TURNGATE_LEASE_TTL": str(self.lease_ttl),
            "TURNGATE_STOP_GRACE": str(self.stop_grace),
            "TURNGATE_RECLAIM_IDLE": str(self.reclaim_idle),
            "TURNGATE_PROJECTOR": str(self.replicas_project).lower(),
            **({} if self.idle_retention is None else {"TURNGATE_IDLE_RETENTION": str(self.idle_retention)}),
        }

    @property
    def backends(self) -> tuple[str, ...]:
        return ("--store", self.redis_url, "--ledger", self.ledger_url)

    def replica(
        self, tmp: Path, *flags: str, port: int | None = None, serving: bool = True
    ) -> AbstractAsyncContextManager[Spawned]:
        """`turngate serve *flags` on this deployment, once it is SERVING, or with `serving=False`
        once its health answers (see `spawn_server`)."""
        return spawn_server(tmp, *self.backends, *flags, port=port, env=self.env, serving=serving)

    @asynccontextmanager
    async def projector(
        self, tmp: Path, log: Path | None = None
    ) -> AsyncIterator[asyncio.subprocess.Process]:
        """`turngate project` on this deployment, logging to `log` (`tmp`/project.log by default),
        until the block ends (SIGTERM)."""
        with (log or tmp / "project.log").open("ab") as stderr:
            process = await asyncio.create_subprocess_exec(
                TURNGATE, "project", *self.backends, cwd=tmp, env=cli_env(**self.env), stderr=stderr
            )
        try:
            yield process
        finally:
            if process.returncode is None:
                process.terminate()
                async with asyncio.timeout(PROCESS_TIMEOUT_S):
                    await process.wait()


@asynccontextmanager
async def replicas(deployment: Deployment, tmp: Path, count: int) -> AsyncIterator[list[Spawned]]:
    """`count` replicas started at once (so they also migrate the ledger at once), all SERVING."""
    async with AsyncExitStack() as stack:
        async with asyncio.TaskGroup() as group:
            starting = [
                group.create_task(stack.enter_async_context(deployment.replica(tmp))) for _ in range(count)
            ]
        yield [task.result() for task in starting]


def assert_no_tracebacks(tmp: Path) -> None:
    """No replica started in `tmp` logged a traceback."""
    for log in sorted(tmp.glob("serve-*.log")):
        text = log.read_text()
        assert "Traceback" not in text, f"{log.name}:\n{text[-3_000:]}"


def acting_through(runner: Client, gateway: Client) -> Client:
    """A client whose runner calls go to one replica and whose gateway calls go to another."""
    return Client(runner.channel, runner.admission, gateway.control, runner.sessions)


def through(clients: list[Client], i: int) -> Client:
    """The i-th replica, round robin."""
    return clients[i % len(clients)]


def new_session() -> pb.SessionRef:
    return pb.SessionRef(project_id=PROJECT, session_id=f"s-{uuid.uuid4().hex[:16]}")


def key_of(session: pb.SessionRef) -> SessionKey:
    return SessionKey(session.project_id, session.session_id)
