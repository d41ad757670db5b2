"""What every store shares around its one write: the compare-and-set retry loop and listeners."""

from __future__ import annotations

import asyncio
import logging
import random
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager

from turngate.service.core import Command, Decision
from turngate.service.store.base import BeforeWrite, CommitListener, SessionKey, Store, StoreContention

_log = logging.getLogger(__name__)
# Full-jitter exponential backoff between attempts: up to 1 ms, 2 ms, 4 ms, … capped at 200 ms,
# so a burst of N writers on one session commits in about log2(N) attempts each.
_BACKOFF_BASE_S = 0.001
_BACKOFF_CAP_S = 0.2


class CompareAndSetStore(Store, ABC):
    """`apply` = read, decide, write only if the version is unchanged; retry on a lost race.

    `before_write`, when set, is awaited after a decision that changes something and before it
    is written, so tests can make other writers win the race.
    """

    def __init__(self, *, before_write: BeforeWrite | None, max_attempts: int) -> None:
        self.before_write = before_write
        self._max_attempts = max_attempts
        self._listeners: list[CommitListener] = []

    @abstractmethod
    async def _attempt(self, key: SessionKey, command: Command) -> Decision | None:
        """One read-decide-write; None when another writer changed the session first."""

    @abstractmethod
    def _unavailable_on_failure(self) -> AbstractContextManager[None]:
        """Turns the backend's connection failures into StoreUnavailable."""

    async def apply(self, key: SessionKey, command: Command) -> Decision:
        """Each attempt is shielded: a cancelled caller neither interrupts a write half-way nor
        skips the listeners of a write that committed."""
        for attempt in range(self._max_attempts):
            with self._unavailable_on_failure():
                decision = await asyncio.shield(self._attempt_and_notify(key, command))
            if decision is not None:
                return decision
            # The first retry is at once: a lost race most often means the state read was stale.
            if attempt:
                await asyncio.sleep(random.uniform(0, min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2**attempt)))
        raise StoreContention(f"{key}: lost the compare-and-set {self._max_attempts} times in a row")

    async def _attempt_and_notify(self, key: SessionKey, command: Command) -> Decision | None:
        decision = await self._attempt(key, command)
        if decision is not None and decision.changed:
            for listener in self._listeners:
                try:
                    listener(key, decision)
                except Exception:
                    _log.exception("commit listener %r failed for %s", listener, key)
        return decision

    async def _before_write(self, key: SessionKey, command: Command) -> None:
        if self.before_write is not None:
            await self.before_write(key, command)

    def add_listener(self, listener: CommitListener) -> None:
        self._listeners.append(listener)
