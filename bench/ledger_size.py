"""What history costs: the PostgreSQL ledger's rows and bytes per turn (projected from a Redis
store's outbox by turngate's own projector), and the embedded store's SQLite file per session and
per turn."""

from __future__ import annotations

from pathlib import Path

import asyncpg  # type: ignore[import-untyped]

from turngate.service.ledger.projector import LedgerProjector
from turngate.service.sql.engine import dispose, make_engine
from turngate.service.sql.migrate import migrate
from turngate.service.store.redis.connection import connect
from turngate.service.store.redis.keys import Keyspace
from turngate.service.store.redis.outbox import RedisOutbox
from turngate.service.store.sql import open_store

from embedded import database_size
from environment import create_database, drop_database
from redis_memory import RedisUnderTest
from report import Figure, progress
from workload import Shape, for_each, run_session, session_keys

REDIS_TIMEOUT_S = 5.0
# The projector's defaults (config.py Settings): how long an entry may stay pending, deliveries.
RECLAIM_IDLE_S = 30.0
MAX_DELIVERIES = 5


async def fresh_ledger(postgres: str, database: str) -> str:
    """`database` on the `postgres` server (postgresql://user@host:port) made anew and migrated;
    its SQLAlchemy URL."""
    await drop_database(f"{postgres}/postgres", database)
    await create_database(f"{postgres}/postgres", database)
    url = f"{postgres.replace('postgresql://', 'postgresql+asyncpg://', 1)}/{database}"
    await migrate(url)
    return url


async def project(redis_url: str, keys: Keyspace, ledger_url: str) -> None:
    """Everything in `keys`' outboxes recorded in the ledger by turngate's projector (and so
    acknowledged: the outbox emptied, each document's `ledger` mark raised)."""
    engine = make_engine(ledger_url)
    outbox = RedisOutbox(connect(redis_url, REDIS_TIMEOUT_S), keys, consumer="capacity-bench")
    projector = LedgerProjector(outbox, engine, reclaim_idle=RECLAIM_IDLE_S, max_deliveries=MAX_DELIVERIES)
    try:
        await projector.create_groups()
        while await projector.poll() or await projector.lag():
            pass
    finally:
        await projector.close()
        await dispose(engine)


async def postgres_figures(postgres: str, database: str, turns: int) -> list[Figure]:
    """Per table of the ledger: rows and bytes (pg_total_relation_size: heap, indexes, TOAST) per turn."""
    connection = await asyncpg.connect(f"{postgres}/{database}")
    try:
        await connection.execute("VACUUM ANALYZE")
        tables = await connection.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'alembic_version' "
            "ORDER BY tablename"
        )
        figures: list[Figure] = []
        total = 0
        for (table,) in tables:
            rows = await connection.fetchval(f'SELECT count(*) FROM "{table}"')
            size = await connection.fetchval("SELECT pg_total_relation_size($1::regclass)", table)
            total += size
            figures.append(Figure("ledger", "postgresql", f"{table}: rows per turn", rows / turns))
            figures.append(Figure("ledger", "postgresql", f"{table}: bytes per turn", size / turns, "B"))
    finally:
        await connection.close()
    return [*figures, Figure("ledger", "postgresql", "all tables: bytes per turn", total / turns, "B")]


async def ledger_phase(
    redis: RedisUnderTest, postgres: str, database: str, sessions: int, shape: Shape
) -> list[Figure]:
    """`sessions` sessions of `shape` through a Redis store, projected into a fresh ledger."""
    progress(f"ledger: {sessions:,} sessions projected into PostgreSQL")
    ledger = await fresh_ledger(postgres, database)
    store, keys = redis.store("ledger"), redis.keyspace("ledger")
    await for_each(session_keys("ledger", range(sessions)), lambda key: run_session(store, key, shape))
    await project(redis.topology.url, keys, ledger)
    return await postgres_figures(postgres, database, sessions * shape.turns)


async def sqlite_figures(folder: Path, sessions: int, shape: Shape) -> list[Figure]:
    """`sessions` sessions of `shape` through the embedded store on a new SQLite file: the pages
    they fill (embedded.py's measure), per session and per turn."""
    progress(f"ledger: {sessions:,} sessions in the embedded store (SQLite)")
    path = folder / "capacity.db"
    url = f"sqlite+aiosqlite:///{path}"
    await migrate(url)
    store = open_store(url)
    try:
        before = database_size(path)
        await for_each(session_keys("sqlite", range(sessions)), lambda key: run_session(store, key, shape))
        after = database_size(path)
    finally:
        await store.close()
    used = after.used - before.used
    return [
        Figure("ledger", "sqlite", "file bytes per idle session", used / sessions, "B"),
        Figure("ledger", "sqlite", "file bytes per turn", used / (sessions * shape.turns), "B"),
    ]
