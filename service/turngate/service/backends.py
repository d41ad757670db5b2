"""The two ways to run: the embedded SQL store, or Redis for coordination plus a SQL ledger.

Each gives the server a store, the turn history, an optional cross-replica watch feed, and the
background loops it must run (the ledger projector and the feed in redis mode).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from turngate.service.config import Settings
from turngate.service.history import LiveHistory
from turngate.service.ledger.reads import Ledger
from turngate.service.ports.store import StoreUnavailable
from turngate.service.redis_url import RedisUrl
from turngate.service.sql.engine import make_engine
from turngate.service.sql.migrate import migrate
from turngate.service.store.cas import CompareAndSetStore
from turngate.service.store.redis.connection import connect
from turngate.service.store.redis.feed import open_feed
from turngate.service.store.redis.keys import Keyspace
from turngate.service.store.redis.projector import LedgerProjector
from turngate.service.store.redis.store import RedisStore
from turngate.service.store.sql import open_store
from turngate.service.watch import Feed

log = logging.getLogger("turngate.backends")
_MIGRATE_RETRY_S = 2.0


@dataclass
class Backend:
    store: CompareAndSetStore
    history: LiveHistory
    feed: Feed | None = None
    # Redis mode, unless told not to project: this replica's ledger projector.
    projector: LedgerProjector | None = None
    loops: list[Callable[[], Coroutine[Any, Any, None]]] = field(default_factory=list)
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    async def close(self) -> None:
        for close in self.closers:
            await close()


async def open_backend(settings: Settings) -> Backend:
    """The backend the settings name; the SQL store is migrated first (unless told not to)."""
    if settings.redis_mode:
        return _redis_backend(settings)
    if settings.migrate:
        await migrate(settings.store)
    store = open_store(settings.store, sqlite_synchronous=settings.sqlite_synchronous)
    return Backend(store, LiveHistory(store.ledger, store), closers=[store.close])


def _redis_backend(settings: Settings) -> Backend:
    """Redis may be down at start (health says NOT_SERVING until it answers); so may the ledger
    (coordination works without it; the projector starts once the ledger is migrated)."""
    keys = _keyspace(settings)
    store = RedisStore(
        connect(settings.store, settings.redis_timeout),
        keys,
        retention=settings.event_retention,
        wait_replicas=settings.redis_wait_replicas,
        wait_timeout=settings.redis_wait_timeout,
    )
    feed = open_feed(RedisUrl.parse(settings.store), keys, settings.redis_timeout)
    engine = make_engine(_ledger_url(settings))
    backend = Backend(
        store,
        LiveHistory(Ledger(engine), store),
        feed=feed,
        loops=[feed.run],
        closers=[store.close, feed.close, engine.dispose],
    )
    if settings.projector:
        backend.projector = projector = projector_for(settings, engine)
        store.add_listener(projector.on_commit)
        backend.loops.append(lambda: project_when_ready(settings, projector))
        backend.closers.append(projector.close)
    return backend


def projector_for(settings: Settings, engine: AsyncEngine) -> LedgerProjector:
    """This process's consumer of the outboxes (named apart from every other, also after a restart)."""
    return LedgerProjector(
        connect(settings.store, settings.redis_timeout),
        _keyspace(settings),
        engine,
        consumer=f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}",
        reclaim_idle=settings.reclaim_idle,
        max_deliveries=settings.max_deliveries,
    )


async def project_when_ready(settings: Settings, projector: LedgerProjector) -> None:
    """Migrates the ledger once it answers (unless told not to), then projects until cancelled."""
    while settings.migrate:
        try:
            await migrate(_ledger_url(settings))
            break
        except StoreUnavailable as error:
            log.warning("ledger unreachable, projecting once it answers: %s", error)
            await asyncio.sleep(_MIGRATE_RETRY_S)
    await projector.run()


def _keyspace(settings: Settings) -> Keyspace:
    return Keyspace(prefix=settings.redis_prefix, buckets=settings.redis_buckets)


def _ledger_url(settings: Settings) -> str:
    assert settings.ledger is not None, "validated: a redis store has a ledger"
    return settings.ledger
