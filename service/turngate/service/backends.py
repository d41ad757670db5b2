"""The ways to run, one per kind of store (store_kinds.py): the embedded SQL store, or Redis for
coordination plus a SQL ledger.

Each gives the server a store, the turn history and the directory of sessions it holds (both read
from the database that holds the history), an optional cross-replica watch feed, and the
background loops it must run, by name: the ledger's schema, in redis mode the feed and the ledger
projector, and with a history retention set, its prune of the database that holds the history.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial

from sqlalchemy.ext.asyncio import AsyncEngine

from turngate.service.config import Settings, microseconds
from turngate.service.core import limits
from turngate.service.history import LiveHistory
from turngate.service.ledger.directory import Directory
from turngate.service.ledger.projector import LedgerProjector
from turngate.service.ledger.reads import Ledger
from turngate.service.ledger.recall import recall_unless_down
from turngate.service.ledger.retention import HistoryRetention
from turngate.service.ports.feed import Feed
from turngate.service.ports.history import SessionDirectory
from turngate.service.redis_url import RedisUrl
from turngate.service.schema import LedgerSchema
from turngate.service.sql.engine import dispose, make_engine
from turngate.service.sql.migrate import migrate
from turngate.service.store.cas import CompareAndSetStore
from turngate.service.store.redis.connection import connect
from turngate.service.store.redis.feed import open_feed
from turngate.service.store.redis.keys import Keyspace
from turngate.service.store.redis.outbox import RedisOutbox
from turngate.service.store.redis.replication import Replication
from turngate.service.store.redis.store import RedisStore
from turngate.service.store.sql import open_store
from turngate.service.store_kinds import REDIS, SQL, StoreKind
from turngate.service.supervise import Loop

# Told what readiness waits for on the ledger's schema (None: nothing).
ReportLedger = Callable[[str | None], None]


@dataclass
class Backend:
    store: CompareAndSetStore
    history: LiveHistory
    directory: SessionDirectory
    feed: Feed | None = None
    # Redis mode, unless told not to project: this replica's ledger projector.
    projector: LedgerProjector | None = None
    # With a history retention set: the prune of the database that holds the history.
    retention: HistoryRetention | None = None
    loops: dict[str, Loop] = field(default_factory=dict)
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    async def close(self) -> None:
        for close in self.closers:
            await close()


async def open_backend(settings: Settings, report_ledger: ReportLedger) -> Backend:
    """The backend of the kind of store the settings name (store_kinds.py)."""
    return await _OPENERS[settings.store_kind](settings, report_ledger)


async def _sql_backend(settings: Settings, report_ledger: ReportLedger) -> Backend:
    """The store's database holds the history too; migrated first (unless told not to)."""
    if settings.migrate:
        await migrate(settings.store)
    store = open_store(settings.store, sqlite_synchronous=settings.sqlite_synchronous)
    schema = LedgerSchema(settings.store, migrate=settings.migrate, report=report_ledger, announce=False)
    backend = Backend(
        store,
        LiveHistory(store.ledger, store),
        store.directory,
        loops={"schema": schema.run},
        closers=[store.close],
    )
    if settings.history_retention is not None:
        # An engine of its own: the store's writer thread keeps the store's connection to itself.
        engine = make_engine(settings.store, sqlite_synchronous=settings.sqlite_synchronous)
        _retain(backend, settings.history_retention, engine, schema)
        backend.closers.append(partial(dispose, engine))
    return backend


async def _redis_backend(settings: Settings, report_ledger: ReportLedger) -> Backend:
    """Redis may be down at start (health says NOT_SERVING until it answers); so may the ledger
    (coordination works without it; it is migrated, and projected, once it answers)."""
    keys = _keyspace(settings)
    engine = make_engine(ledger_url(settings))
    store = RedisStore(
        connect(settings.store, settings.redis_timeout),
        keys,
        retention=settings.event_retention,
        max_event_age=None if settings.event_max_age is None else microseconds(settings.event_max_age),
        replication=_replication(settings),
        recall=recall_unless_down(Ledger(engine)),
    )
    feed = open_feed(RedisUrl.parse(settings.store), keys, settings.redis_timeout)
    schema = LedgerSchema(ledger_url(settings), migrate=settings.migrate, report=report_ledger)
    backend = Backend(
        store,
        LiveHistory(Ledger(engine), store),
        Directory(engine),
        feed=feed,
        loops={"schema": schema.run, "watch_feed": feed.run},
        closers=[store.close, feed.close, partial(dispose, engine)],
    )
    if settings.projector:
        backend.projector = projector = projector_for(settings, engine)
        store.add_listener(projector.on_commit)
        backend.loops["projector"] = lambda: when_migrated(schema, projector.run)
        backend.closers.append(projector.close)
    if settings.history_retention is not None:
        _retain(backend, settings.history_retention, engine, schema)
    return backend


def _retain(backend: Backend, retention: float, engine: AsyncEngine, schema: LedgerSchema) -> None:
    """Adds the loop that prunes the history older than `retention` seconds from `engine`'s database."""
    backend.retention = pruning = HistoryRetention(
        engine, round(retention * limits.SECOND), backend.store.now
    )
    backend.loops["history_retention"] = lambda: when_migrated(schema, pruning.run)


# How each kind of store is opened (store_kinds.py): adding a store adds a line here.
_OPENERS: dict[StoreKind, Callable[[Settings, ReportLedger], Awaitable[Backend]]] = {
    SQL: _sql_backend,
    REDIS: _redis_backend,
}


def projector_for(settings: Settings, engine: AsyncEngine) -> LedgerProjector:
    """This process's consumer of the outboxes (named apart from every other, also after a restart)."""
    outbox = RedisOutbox(
        connect(settings.store, settings.redis_timeout),
        _keyspace(settings),
        consumer=f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}",
        replication=_replication(settings),
    )
    return LedgerProjector(
        outbox, engine, reclaim_idle=settings.reclaim_idle, max_deliveries=settings.max_deliveries
    )


async def when_migrated(schema: LedgerSchema, run: Loop) -> None:
    """Runs `run` (the projector, the history retention) once the ledger has this release's schema."""
    await schema.migrated.wait()
    await run()


def _replication(settings: Settings) -> Replication:
    return Replication.of(settings.redis_wait_replicas, settings.redis_wait_timeout)


def _keyspace(settings: Settings) -> Keyspace:
    return Keyspace(prefix=settings.redis_prefix, buckets=settings.redis_buckets)


def ledger_url(settings: Settings) -> str:
    """The SQL database of the history: the ledger's in redis mode, the store's otherwise."""
    return settings.ledger or settings.store
