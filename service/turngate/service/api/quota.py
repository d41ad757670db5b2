"""How many watch streams one principal, and one session, may hold open on this replica."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

from turngate.service.core import SessionKey


class WatchLimit(Exception):
    """Opening one more stream would exceed `limit` (the setting's name)."""

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message)
        self.limit = limit


class WatchQuota:
    def __init__(self, per_principal: int, per_session: int) -> None:
        self._per_principal = per_principal
        self._per_session = per_session
        self._principals: Counter[str] = Counter()
        self._sessions: Counter[SessionKey] = Counter()

    @contextmanager
    def hold(self, principal: str, key: SessionKey) -> Iterator[None]:
        """One stream's place while it is open; raises WatchLimit if there is none."""
        if self._principals[principal] >= self._per_principal:
            raise WatchLimit(
                "max_watches_per_principal",
                f"this principal already has {self._per_principal} open watch streams on this replica",
            )
        if self._sessions[key] >= self._per_session:
            raise WatchLimit(
                "max_watches_per_session",
                f"this session already has {self._per_session} open watch streams on this replica",
            )
        self._principals[principal] += 1
        self._sessions[key] += 1
        try:
            yield
        finally:
            _release(self._principals, principal)
            _release(self._sessions, key)


_K = TypeVar("_K")


def _release(counts: Counter[_K], key: _K) -> None:
    counts[key] -= 1
    if counts[key] <= 0:
        del counts[key]  # an idle principal or session keeps no entry
