"""The kinds of store a URL names, and what each asks of a deployment: whether the history lives
in a ledger of its own (`--ledger`), and whether replicas hear each other's commits (so several
processes may serve one port: `serve --workers N`). The composition root (`backends/`) opens
each kind; adding a store is a kind here and an opener there (docs/architecture.md, "Adding a
store")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from turngate.service.redis_url import REDIS_SCHEMES, RedisUrl


def _no_more_checks(_url: str) -> None:
    """A URL whose scheme is known needs no other check before the store opens it."""


@dataclass(frozen=True)
class StoreKind:
    """`schemes` are the URL prefixes that name it; `check` refuses a URL it cannot use (ValueError)."""

    name: str
    schemes: tuple[str, ...]
    separate_ledger: bool
    shared_commits: bool
    check: Callable[[str], None] = _no_more_checks


def _redis_url(url: str) -> None:
    RedisUrl.parse(url)


SQL = StoreKind(
    "sql", ("sqlite+aiosqlite://", "postgresql+asyncpg://"), separate_ledger=False, shared_commits=False
)
REDIS = StoreKind("redis", REDIS_SCHEMES, separate_ledger=True, shared_commits=True, check=_redis_url)
KINDS = (SQL, REDIS)
# The databases a ledger may be (the SQL store's own).
LEDGER_SCHEMES = SQL.schemes


def kind_of(url: str) -> StoreKind:
    """The kind `url` names; ValueError (naming every scheme) for none, or a URL it cannot use."""
    for kind in KINDS:
        if url.startswith(kind.schemes):
            kind.check(url)
            return kind
    schemes = [scheme for kind in KINDS for scheme in kind.schemes]
    raise ValueError(f"must start with {', '.join(schemes[:-1])} or {schemes[-1]}")
