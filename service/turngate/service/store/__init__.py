"""Stores: where session documents, their events and deadlines live (see base.Store)."""

from __future__ import annotations

from turngate.service.store.base import (
    BeforeWrite,
    CommitListener,
    SessionKey,
    Store,
    StoreContention,
    StoreUnavailable,
)
from turngate.service.store.engine import DEFAULT_URL, SqliteSynchronous, make_engine

# After base and engine: the ledger, which the SQL store imports, imports those two.
from turngate.service.store.sql import SqlStore

__all__ = [
    "DEFAULT_URL",
    "BeforeWrite",
    "CommitListener",
    "SessionKey",
    "SqlStore",
    "SqliteSynchronous",
    "Store",
    "StoreContention",
    "StoreUnavailable",
    "open_store",
]


def open_store(
    url: str = DEFAULT_URL,
    *,
    sqlite_synchronous: SqliteSynchronous = "NORMAL",
    before_write: BeforeWrite | None = None,
) -> SqlStore:
    """The store for `url` (sqlite or postgresql), whose schema `ledger.migrate(url)` has made."""
    return SqlStore(make_engine(url, sqlite_synchronous=sqlite_synchronous), before_write=before_write)
