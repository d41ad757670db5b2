"""The ways to run, one per kind of store (store_kinds.py): the embedded SQL store (`sql.py`), or
Redis for coordination plus a SQL ledger (`redis.py`).

Each gives the server a store, the turn history and the directory of sessions it holds (both read
from the database that holds the history), an optional cross-replica watch feed, and the
background loops it must run, by name: the ledger's schema, in redis mode the feed and the ledger
projector, and with a history retention set, its prune of the database that holds the history.
A kind's module is imported only when a process opens that kind: Redis's client alone costs a
process on SQLite about a tenth of its start (docs/decisions.md, "The cost of a start").
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncEngine

from turngate.service.config import Settings
from turngate.service.core import limits
from turngate.service.history import LiveHistory
from turngate.service.ledger.projector import LedgerProjector
from turngate.service.ledger.retention import HistoryRetention
from turngate.service.ports.feed import Feed
from turngate.service.ports.history import SessionDirectory
from turngate.service.schema import LedgerSchema
from turngate.service.store.cas import CompareAndSetStore
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


# A kind's backend, made by its module's `opened`.
Opened = Callable[[Settings, ReportLedger], Awaitable[Backend]]

# How each kind of store is opened (store_kinds.py): the module whose `opened` makes its backend.
# Adding a store adds a line here.
_OPENERS: dict[StoreKind, str] = {
    SQL: "turngate.service.backends.sql",
    REDIS: "turngate.service.backends.redis",
}


async def open_backend(settings: Settings, report_ledger: ReportLedger) -> Backend:
    """The backend of the kind of store the settings name (store_kinds.py)."""
    opened: Opened = importlib.import_module(_OPENERS[settings.store_kind]).opened
    return await opened(settings, report_ledger)


def retain(backend: Backend, retention: float, engine: AsyncEngine, schema: LedgerSchema) -> None:
    """Adds the loop that prunes the history older than `retention` seconds from `engine`'s database."""
    backend.retention = pruning = HistoryRetention(
        engine, round(retention * limits.SECOND), backend.store.now
    )
    backend.loops["history_retention"] = lambda: when_migrated(schema, pruning.run)


async def when_migrated(schema: LedgerSchema, run: Loop) -> None:
    """Runs `run` (the projector, the history retention) once the ledger has this release's schema."""
    await schema.migrated.wait()
    await run()


def ledger_url(settings: Settings) -> str:
    """The SQL database of the history: the ledger's in redis mode, the store's otherwise."""
    return settings.ledger or settings.store
