"""One session's events as each log keeps them, to compare: the Redis logs, the ledger's
session_events rows, and what watchers saw; the wait until the ledger holds what Redis holds."""

from __future__ import annotations

from typing import NamedTuple, cast

from google.protobuf.timestamp_pb2 import Timestamp
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.processes import PROCESS_TIMEOUT_S
from tests.support.waiting import eventually
from tests.support.watching import turn_of
from turngate.service.core import SessionKey
from turngate.service.sql.tables import session_events
from turngate.service.store.redis.connection import Client as RedisClient
from turngate.service.store.redis.keys import Keyspace, LogEntries, log_event, session_of
from turngate.v1 import turngate_pb2 as pb


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
        await eventually(caught_up, timeout_s=PROCESS_TIMEOUT_S)
    except TimeoutError:
        source = await redis_logs(redis, keys)
        differing = {k for k in source.keys() | ledger.keys() if source.get(k) != ledger.get(k)}
        raise AssertionError(f"the ledger differs from Redis for {sorted(differing)[:5]}") from None
    return ledger


def gapless(log: list[Stored]) -> bool:
    return [stored.logged.seq for stored in log] == list(range(1, len(log) + 1))
