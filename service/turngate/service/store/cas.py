"""What every store shares around its one write: the compare-and-set retry loop, its spans, and
the callbacks told about each decision."""

from __future__ import annotations

import asyncio
import logging
import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from turngate.service.core import (
    Command,
    Decision,
    Session,
    SessionKey,
    SettledTurn,
    decide,
    needs_history,
    recalled,
)
from turngate.service.ports.store import (
    AfterWrite,
    Applied,
    BeforeWrite,
    CommitListener,
    Observer,
    Recall,
    Store,
    StoreContention,
)
from turngate.service.telemetry import traces

_log = logging.getLogger(__name__)
# The settled turns a session's history holds, once fetched for a decision that needs them (R2).
History = tuple[SettledTurn, ...] | None
# Full-jitter exponential backoff between attempts: up to 1 ms, 2 ms, 4 ms, … capped at 200 ms,
# so a burst of N writers on one session commits in about log2(N) attempts each.
_BACKOFF_BASE_S = 0.001
_BACKOFF_CAP_S = 0.2
_T = TypeVar("_T")
_W = TypeVar("_W")


class _HistoryNeeded(Exception):
    """The decision needs the session's history (R2), which has not been fetched: nothing was written."""


class CompareAndSetStore(Store, ABC):
    """`apply` = read, decide, write only if the version is unchanged; retry on a lost race.

    `before_write`, when set, is awaited after a decision that changes something and before it
    is written, so tests can make other writers win the race. `recall` reads a session's settled
    turns from its history (R2). `after_write`, when set, is awaited
    once a write has been made (the script ran, the COMMIT returned) and before the caller is
    answered, so tests can lose its reply: whatever it raises fails the apply as a failure of the
    reply would.
    """

    def __init__(self, *, before_write: BeforeWrite | None, max_attempts: int, recall: Recall | None) -> None:
        self.before_write = before_write
        self._recall = recall
        self.after_write: AfterWrite | None = None
        self._max_attempts = max_attempts
        self._listeners: list[CommitListener] = []
        self._observers: list[Observer] = []
        # Attempts whose callers were cancelled, kept referenced until they end.
        self._abandoned: set[asyncio.Future[Any]] = set()

    @abstractmethod
    async def _attempt(self, key: SessionKey, command: Command, history: History) -> Applied | None:
        """One read-decide-write (deciding with `_decide`, given `history`); None when another
        writer changed the session first."""

    @abstractmethod
    def _unavailable_on_failure(self) -> AbstractContextManager[None]:
        """Turns the backend's connection failures into StoreUnavailable."""

    async def apply(self, key: SessionKey, command: Command) -> Decision:
        """The compare-and-set loop is shielded as a whole: a cancelled caller neither interrupts a
        write half-way, nor leaves undone a command whose attempt was refused (a lost race, or a
        clock window that passed: it is decided again), nor skips the listeners of a write that
        committed. The caller's span ends with the caller."""
        with traces.applying(key, command) as span:
            applied, attempts = await self._shielded(self._until_applied(key, command))
            traces.applied(span, applied, attempts=attempts)
            return applied.decision

    async def _until_applied(self, key: SessionKey, command: Command) -> tuple[Applied, int]:
        """The command applied, and after how many attempts."""
        history: History = None
        for attempt in range(self._max_attempts):
            try:
                with self._unavailable_on_failure():
                    applied = await self._attempt_and_notify(key, command, history)
            except _HistoryNeeded:
                history = await self._recalled(key)
                continue
            if applied is not None:
                return applied, attempt + 1
            # The first retry is at once: a lost race most often means the state read was stale.
            if attempt:
                await asyncio.sleep(random.uniform(0, min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2**attempt)))
        raise StoreContention(f"{key}: lost the compare-and-set {self._max_attempts} times in a row")

    async def _shielded(self, work: Coroutine[Any, Any, _W]) -> _W:
        """`work`, run to its end even if the caller is cancelled; then whatever it fails with is
        logged at DEBUG (nobody is left to be told) instead of never being retrieved."""
        task = asyncio.ensure_future(work)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            self._abandoned.add(task)
            task.add_done_callback(self._finish_abandoned)
            raise

    def _finish_abandoned(self, task: asyncio.Future[Any]) -> None:
        self._abandoned.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            _log.debug("a write whose caller was cancelled failed: %r", error)

    async def _recalled(self, key: SessionKey) -> tuple[SettledTurn, ...]:
        return () if self._recall is None else tuple(await self._recall(key))

    def _decide(self, state: Session, command: Command, now: int, history: History) -> Applied:
        """The core's decision, as every store takes it: on a document that remembers its history
        when the command needs it (R2), which is fetched first (_HistoryNeeded) if it was not."""
        if needs_history(state, command):
            if history is None:
                raise _HistoryNeeded
            state = recalled(state, history)
        with traces.deciding(command) as span:
            applied = Applied(command, state, now, decide(state, command, now))
            traces.decided(span, applied.decision)
        return applied

    async def _attempt_and_notify(
        self, key: SessionKey, command: Command, history: History
    ) -> Applied | None:
        applied = await self._attempt(key, command, history)
        if applied is not None:
            if applied.decision.changed:
                _notify(self._listeners, key, applied.decision)
            _notify(self._observers, key, applied)
        return applied

    async def _before_write(self, key: SessionKey, command: Command) -> None:
        if self.before_write is not None:
            await self.before_write(key, command)

    async def _after_write(self, key: SessionKey, command: Command) -> None:
        if self.after_write is not None:
            await self.after_write(key, command)

    def add_listener(self, listener: CommitListener) -> None:
        self._listeners.append(listener)

    def add_observer(self, observer: Observer) -> None:
        self._observers.append(observer)


def _notify(callbacks: Sequence[Callable[[SessionKey, _T], None]], key: SessionKey, value: _T) -> None:
    """Runs every callback; one that fails is logged and does not stop the others."""
    for callback in callbacks:
        try:
            callback(key, value)
        except Exception:
            _log.exception("store callback %r failed for %s", callback, key)
