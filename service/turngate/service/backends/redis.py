"""The production kind: Redis for coordination (one server, a Cluster or Sentinel), the history in
a SQL ledger fed by the projector."""

from __future__ import annotations

import os
import socket
import uuid
from functools import partial

from sqlalchemy.ext.asyncio import AsyncEngine

from turngate.service.backends import Backend, ReportLedger, ledger_url, retain, when_migrated
from turngate.service.config import Settings, microseconds
from turngate.service.history import LiveHistory
from turngate.service.ledger.directory import Directory
from turngate.service.ledger.projector import LedgerProjector
from turngate.service.ledger.reads import Ledger
from turngate.service.ledger.recall import recall_unless_down
from turngate.service.redis_url import RedisUrl
from turngate.service.schema import LedgerSchema
from turngate.service.sql.engine import dispose, make_engine
from turngate.service.store.redis.connection import connect
from turngate.service.store.redis.feed import open_feed
from turngate.service.store.redis.keys import Keyspace
from turngate.service.store.redis.outbox import RedisOutbox
from turngate.service.store.redis.replication import Replication
from turngate.service.store.redis.store import RedisStore


async def opened(settings: Settings, report_ledger: ReportLedger) -> Backend:
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
        retain(backend, settings.history_retention, engine, schema)
    return backend


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


def _replication(settings: Settings) -> Replication:
    return Replication.of(settings.redis_wait_replicas, settings.redis_wait_timeout)


def _keyspace(settings: Settings) -> Keyspace:
    return Keyspace(prefix=settings.redis_prefix, buckets=settings.redis_buckets)
