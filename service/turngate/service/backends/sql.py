"""The embedded kind: the store's database (a SQLite file, or PostgreSQL) holds the history too."""

from __future__ import annotations

from functools import partial

from turngate.service.backends import Backend, ReportLedger, retain
from turngate.service.config import Settings
from turngate.service.history import LiveHistory
from turngate.service.schema import LedgerSchema
from turngate.service.sql.engine import dispose, make_engine
from turngate.service.sql.migrate import migrate
from turngate.service.store.sql import open_store


async def opened(settings: Settings, report_ledger: ReportLedger) -> Backend:
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
        retain(backend, settings.history_retention, engine, schema)
        backend.closers.append(partial(dispose, engine))
    return backend
