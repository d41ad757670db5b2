"""Cost follows live work (docs/design.md §8): the watchdog's sweep and its next deadline, the busy
sessions' listing (ListActiveSessions), the active-turn counts (the metrics gauge, the per-project
bound) and the retirement pass touch no idle session. On Redis: with thousands of idle sessions
they send exactly the commands they send with none. On SQL: each of their statements seeks
through an index, never scans the sessions table."""

from __future__ import annotations

import asyncio
import sqlite3
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Connection

from tests.support.commands import SECOND
from tests.support.stores import open_redis_store
from tests.support.topologies import RedisProcess
from turngate.service.core import Admit, Admitted, Complete, SessionKey, TurnOutcome
from turngate.service.ports.store import Store
from turngate.service.retirement import Retirement
from turngate.service.sql.engine import make_engine
from turngate.service.sql.migrate import migrate
from turngate.service.store.redis.keys import Keyspace
from turngate.service.store.sql import SqlStore
from turngate.service.watchdog import Watchdog

IDLE = 2_000
LIVE = [SessionKey("p", f"live{i}") for i in range(3)]
HOUR = 3600 * SECOND
DAY = 24 * HOUR


async def add_sessions(store: Store, keys: list[SessionKey], *, idle: bool) -> None:
    """Sessions with a turn each: left running (on a lease no run of this test outlasts, so no
    watchdog pass finds one due), or completed (idle)."""

    async def one(key: SessionKey) -> None:
        reply = (await store.apply(key, Admit("t1", "runner", HOUR))).reply
        assert isinstance(reply, Admitted)
        if idle:
            await store.apply(key, Complete("t1", reply.generation, TurnOutcome.COMPLETED))

    for start in range(0, len(keys), 200):
        await asyncio.gather(*map(one, keys[start : start + 200]))


async def periodic_work(store: Store) -> None:
    """Everything that runs on a timer or for a listing, whatever the sessions ever seen."""
    await Watchdog(store).sweep()
    await store.next_deadline()
    await store.active("p", None, 100)
    await store.count_active()
    await store.count_active_in_project("p", 100)
    await Retirement(store, idle_retention=DAY).sweep()


async def commands_sent(node: RedisProcess, work: Callable[[], Awaitable[None]]) -> Counter[str]:
    """How many times `work` had Redis run each command."""

    async def counts() -> Counter[str]:
        stats: dict[str, dict[str, Any]] = await node.query("INFO", "commandstats")
        return Counter({name: int(stat["calls"]) for name, stat in stats.items() if name != "cmdstat_info"})

    before = await counts()
    await work()
    return await counts() - before


@pytest.mark.redis
async def test_redis_periodic_work_sends_the_same_commands_with_thousands_of_idle_sessions(
    private_redis: RedisProcess,
) -> None:
    host, port = private_redis.address
    store = open_redis_store(f"redis://{host}:{port}", Keyspace("cost", 16))
    try:
        await add_sessions(store, LIVE, idle=False)
        await periodic_work(store)  # the script loaded, the clock calibrated
        without = await commands_sent(private_redis, lambda: periodic_work(store))
        await add_sessions(store, [SessionKey("p", f"idle{i}") for i in range(IDLE)], idle=True)

        with_idle = await commands_sent(private_redis, lambda: periodic_work(store))
    finally:
        await store.close()

    assert with_idle == without, "some periodic work reads per session"
    assert sum(without.values()) < 200, without


def query_plans(database: Path, statements: list[tuple[str, Any]]) -> list[str]:
    """SQLite's plan of each statement (its steps), as run with its parameters."""
    with sqlite3.connect(database) as conn:
        return [
            " / ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))
            for sql, params in statements
        ]


async def test_sql_periodic_work_seeks_through_indexes_and_never_scans_the_sessions(tmp_path: Path) -> None:
    database = tmp_path / "cost.db"
    url = f"sqlite+aiosqlite:///{database}"
    await migrate(url)
    engine = make_engine(url)
    store = SqlStore(engine)
    try:
        await add_sessions(store, LIVE, idle=False)
        await add_sessions(store, [SessionKey("p", f"idle{i}") for i in range(IDLE)], idle=True)
        statements: list[tuple[str, Any]] = []

        def heard(_conn: Connection, _cursor: object, sql: str, params: Any, *_: object) -> None:
            statements.append((sql, params))

        event.listen(engine.sync_engine, "before_cursor_execute", heard)
        await periodic_work(store)
    finally:
        await store.close()

    reads = [(sql, params) for sql, params in statements if "sessions" in sql]
    assert len(reads) >= 6, reads
    plans = query_plans(database, reads)
    # A scan of the table (with an index or without) reads every session; one of a subquery's few
    # rows (`anon_1`) does not.
    scans = [plan for plan in plans if "SCAN sessions" in plan]
    assert scans == [], scans
