"""Several `turngate serve` replicas on one Redis and one PostgreSQL, and what lies behind them.

The shared Redis (TURNGATE_TEST_REDIS, default 127.0.0.1:6379/0) is used under a key prefix of
the module's own, and only that prefix is ever deleted. PostgreSQL (TURNGATE_TEST_POSTGRES,
default user postgres on 127.0.0.1:5432, trust auth) gets a fresh database per module, dropped
at the end; the replicas migrate it themselves. A test that needs a Redis it can start late runs
a `PrivateRedis`; one that needs a ledger it can make reachable late puts a `TcpForwarder` in
front of PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, cast

from google.protobuf.timestamp_pb2 import Timestamp
from grpc_health.v1 import health_pb2_grpc
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.e2e.processes import (
    PROCESS_TIMEOUT_S,
    TURNGATE,
    Spawned,
    cli_env,
    connect,
    free_port,
    health_of,
    spawn_server,
)
from tests.e2e.servers import Client
from tests.e2e.watching import Watch, collect, turn_of, watch
from tests.waiting import POLL_INTERVAL_S
from turngate.service.core import SessionKey
from turngate.service.sql.tables import session_events
from turngate.service.store.redis.connection import Client as RedisClient
from turngate.service.store.redis.connection import connect as connect_redis
from turngate.service.store.redis.keys import Keyspace, LogEntries, log_event, session_of
from turngate.v1 import turngate_pb2 as pb

REDIS_SERVER = os.environ.get("TURNGATE_TEST_REDIS", "redis://127.0.0.1:6379/0")
# Each Redis call's bound, as the service's default (Settings.redis_timeout).
REDIS_TIMEOUT_S = 2.0
PROJECT = "p-replicas"
# Enough buckets that the sessions of a test spread over several outboxes and deadline sets.
BUCKETS = 8

# --- Redis ---------------------------------------------------------------------------------


def unique_prefix() -> str:
    return f"tgrep_{uuid.uuid4().hex[:12]}"


async def delete_prefix(client: RedisClient, prefix: str) -> None:
    """Deletes every key under `prefix`, and nothing else (the Redis may be shared)."""
    async for name in client.scan_iter(match=f"{prefix}:*", count=1_000):
        await client.unlink(name)


@asynccontextmanager
async def prefix_on_shared_redis() -> AsyncIterator[str]:
    """A key prefix of the caller's own on the shared Redis server (REDIS_SERVER), whose keys are
    deleted at the end of the block."""
    prefix = unique_prefix()
    try:
        yield prefix
    finally:
        redis = connect_redis(REDIS_SERVER, REDIS_TIMEOUT_S)
        await delete_prefix(redis, prefix)
        await redis.aclose()


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

            await poll_until(answers, PROCESS_TIMEOUT_S)

    async def stop(self) -> None:
        if self._process is not None and self._process.returncode is None:
            self._process.terminate()
            async with asyncio.timeout(PROCESS_TIMEOUT_S):
                await self._process.wait()


# --- a server reachable only from a given moment -------------------------------------------


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


# --- replicas ------------------------------------------------------------------------------


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


def new_session() -> pb.SessionRef:
    return pb.SessionRef(project_id=PROJECT, session_id=f"s-{uuid.uuid4().hex[:16]}")


def key_of(session: pb.SessionRef) -> SessionKey:
    return SessionKey(session.project_id, session.session_id)


# --- waiting -------------------------------------------------------------------------------


async def poll_until(check: Callable[[], Awaitable[bool]], timeout_s: float) -> None:
    """Polls `check` until it passes; fails after `timeout_s` (reached only when a test fails)."""
    async with asyncio.timeout(timeout_s):
        while True:
            if await check():
                return
            await asyncio.sleep(POLL_INTERVAL_S)


async def cancelled(task: asyncio.Task[None]) -> None:
    """Cancels `task` and waits for its end, cancelling again while it runs on: on Python 3.11
    `asyncio.wait_for` (inside redis-py) swallows a cancellation that lands as its operation
    completes, and the task goes on as if never cancelled."""
    async with asyncio.timeout(PROCESS_TIMEOUT_S):
        while not task.done():
            task.cancel()
            await asyncio.wait([task], timeout=POLL_INTERVAL_S)
    if not task.cancelled() and task.exception() is not None:
        raise AssertionError(f"{task!r} failed before it was cancelled") from task.exception()


async def health_reaches(port: int, status: int) -> None:
    """Waits until the server on `port` answers the overall health check with `status`."""
    async with connect(port) as channel:
        health = health_pb2_grpc.HealthStub(channel)

        async def reached() -> bool:
            return await health_of(health) == status

        await poll_until(reached, PROCESS_TIMEOUT_S)


# --- the logs: Redis, the ledger, and what watchers see --------------------------------------


class Logged(NamedTuple):
    """One event as every log keeps it: seq, store time (µs), kind and turn."""

    seq: int
    time: int
    kind: str
    turn_id: str


class Stored(NamedTuple):
    """One event as Redis and the ledger store it: `Logged`, and its encoded body."""

    logged: Logged
    body: str


Logs = dict[SessionKey, list[Stored]]


async def redis_logs(client: RedisClient, keys: Keyspace) -> Logs:
    """Every session log under the keyspace, in stream order."""
    logs: Logs = {}
    async for name in client.scan_iter(match=f"{keys.prefix}:*:log:*", count=1_000):
        key = session_of(name.decode().split(":log:", 1)[1])
        log = logs[key] = []
        for entry_id, fields in cast(LogEntries, await client.xrange(name)):
            event = log_event(entry_id, fields)
            log.append(
                Stored(Logged(event.seq, event.time, event.body.kind, event.turn_id), fields[b"e"].decode())
            )
    return logs


async def ledger_logs(engine: AsyncEngine) -> Logs:
    """Every session's rows in the ledger's session_events table, in seq order ({} before the
    ledger is migrated)."""
    columns = session_events.c
    query = select(
        columns.project_id,
        columns.session_id,
        columns.seq,
        columns.time,
        columns.kind,
        columns.turn_id,
        columns.body,
    ).order_by(columns.project_id, columns.session_id, columns.seq)
    logs: Logs = {}
    async with engine.connect() as conn:
        if (await conn.execute(text("SELECT to_regclass('session_events')"))).scalar() is None:
            return logs
        for row in await conn.execute(query):
            key = SessionKey(row.project_id, row.session_id)
            logs.setdefault(key, []).append(
                Stored(Logged(row.seq, row.time, row.kind, row.turn_id), row.body)
            )
    return logs


def micros(instant: Timestamp) -> int:
    return instant.seconds * 1_000_000 + instant.nanos // 1_000


def logged(events: list[pb.SessionEvent]) -> list[Logged]:
    """What watchers saw, as the logs keep it (snapshots are not events of the log)."""
    return [
        Logged(e.seq, micros(e.time), str(e.WhichOneof("kind")), turn_of(e))
        for e in events
        if not e.HasField("snapshot")
    ]


async def watch_from_start(client: Client, session: pb.SessionRef) -> Watch:
    """A watch of a session nothing has happened in yet: its snapshot (read here) is at seq 0, so
    the stream goes on with the whole log, from seq 1."""
    stream = watch(client, session)
    [first] = await collect(stream, 1)
    assert first.HasField("snapshot"), first
    assert first.seq == 0, f"session {session.session_id} is not new"
    return stream


def serialized(events: list[pb.SessionEvent]) -> list[bytes]:
    return [e.SerializeToString(deterministic=True) for e in events]


async def wait_for_ledger(
    engine: AsyncEngine, redis: RedisClient, keys: Keyspace, sessions: list[SessionKey] | None = None
) -> Logs:
    """Waits until the ledger holds exactly what the Redis logs hold (of `sessions`, or of every
    session under the keyspace), and they hold something; returns the ledger's logs. (The tests
    write fewer events per session than Redis retains, so the Redis logs are whole.)"""
    ledger: Logs = {}

    async def caught_up() -> bool:
        nonlocal ledger
        source = await redis_logs(redis, keys)
        ledger = await ledger_logs(engine)
        if sessions is not None:
            source = {key: source.get(key, []) for key in sessions}
            ledger = {key: ledger.get(key, []) for key in sessions}
        return bool(source) and all(source.values()) and ledger == source

    try:
        await poll_until(caught_up, PROCESS_TIMEOUT_S)
    except TimeoutError:
        source = await redis_logs(redis, keys)
        differing = {k for k in source.keys() | ledger.keys() if source.get(k) != ledger.get(k)}
        raise AssertionError(f"the ledger differs from Redis for {sorted(differing)[:5]}") from None
    return ledger


def gapless(log: list[Stored]) -> bool:
    return [stored.logged.seq for stored in log] == list(range(1, len(log) + 1))
