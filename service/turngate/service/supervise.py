"""Background loops that never die silently: each runs under a name and is restarted after any
unexpected exception, with capped exponential backoff and jitter.

Loops handle the failures they expect (a store that does not answer) themselves; what reaches the
supervisor is unexpected. A failure streak runs from a loop's first failure until a run of it
lasts `Backoff.stable_after` without failing: its first failure is logged with its traceback, the
later ones at DEBUG, and its end with how many failures it had. A streak longer than `grace` is
reported (`Report`, e.g. to health readiness) until it ends. A loop that returns has finished.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from turngate.client.tasks import cancel_all

log = logging.getLogger("turngate.loops")

Loop = Callable[[], Coroutine[Any, Any, None]]
# Called with a condition (`loop NAME`) and what is wrong with it, or None once nothing is.
Report = Callable[[str, str | None], None]


@dataclass(frozen=True, slots=True)
class Backoff:
    """Seconds: the wait before a first restart, the most any wait grows to, and how long a run
    must last without failing to end its streak (which starts the waits over)."""

    first: float = 0.1
    cap: float = 5.0
    stable_after: float = 5.0

    def delay(self, failures: int) -> float:
        """The wait after the `failures`-th failure in a row: doubling from `first` up to `cap`,
        its upper half jittered so that loops failing together do not restart together."""
        ceiling = min(self.cap, self.first * 2.0 ** (failures - 1))
        return ceiling / 2 + random.uniform(0, ceiling / 2)


@dataclass
class _Streak:
    """Failures in a row of one loop, since `started` (event-loop time)."""

    started: float
    failures: int = 0
    last_error: str = ""
    overdue: bool = False
    timer: asyncio.TimerHandle | None = None


@dataclass
class _Supervised:
    """One loop, its task and what became of it."""

    name: str
    loop: Loop
    restarts: int = 0
    streak: _Streak | None = None
    task: asyncio.Task[None] | None = field(default=None, repr=False)


class Supervisor:
    """Runs loops by name until `stop()`; loops failing for longer than `grace` seconds are
    reported to `report` as condition `loop NAME` until they run again."""

    def __init__(self, *, grace: float, report: Report | None = None, backoff: Backoff | None = None) -> None:
        self.backoff = backoff or Backoff()
        self._grace = grace
        self._report = report
        self._loops: dict[str, _Supervised] = {}

    def start(self, name: str, loop: Loop) -> None:
        assert name not in self._loops, f"a loop named {name!r} already runs"
        supervised = self._loops[name] = _Supervised(name, loop)
        supervised.task = asyncio.get_running_loop().create_task(self._run(supervised), name=name)

    def restarts(self) -> dict[str, int]:
        """How often each loop was restarted after a failure."""
        return {name: supervised.restarts for name, supervised in self._loops.items()}

    async def stop(self) -> None:
        """Cancels every loop, running or waiting to restart, and waits until each has ended."""
        tasks = [s.task for s in self._loops.values() if s.task is not None]
        for error in await cancel_all(tasks):
            log.error("background loop failed while stopping", exc_info=error)
        for supervised in self._loops.values():
            self._end_streak(supervised)

    async def _run(self, supervised: _Supervised) -> None:
        """Runs the loop, again after each failure, until it finishes or is cancelled."""
        while True:
            # A run after a failure that outlasts this ends the streak (cancelled if it fails first).
            stable = None
            if supervised.streak is not None:
                stable = asyncio.get_running_loop().call_later(
                    self.backoff.stable_after, self._recovered, supervised
                )
            try:
                await supervised.loop()
            except Exception as error:
                failure: Exception = error
            else:
                log.info("background loop %r finished", supervised.name)
                self._end_streak(supervised)
                return
            finally:
                if stable is not None:
                    stable.cancel()
            this = asyncio.current_task()
            if this is not None and this.cancelling():
                # It failed on its way out (a client library turning the cancellation into an error).
                log.debug("background loop %r failed while stopping: %r", supervised.name, failure)
                raise asyncio.CancelledError
            await asyncio.sleep(self._failed(supervised, failure))
            supervised.restarts += 1

    def _failed(self, supervised: _Supervised, error: Exception) -> float:
        """Notes a failure of `supervised`; returns how long to wait before restarting it."""
        event_loop = asyncio.get_running_loop()
        streak = supervised.streak
        if streak is None:
            streak = supervised.streak = _Streak(started=event_loop.time())
            streak.timer = event_loop.call_later(self._grace, self._overdue, supervised)
        streak.failures += 1
        streak.last_error = f"{type(error).__name__}: {error}"
        delay = self.backoff.delay(streak.failures)
        if streak.failures == 1:
            log.error(
                "background loop %r failed; restarting it in %.2fs", supervised.name, delay, exc_info=error
            )
        else:
            log.debug(
                "background loop %r failed again (%d in a row); restarting it in %.2fs: %s",
                supervised.name,
                streak.failures,
                delay,
                streak.last_error,
            )
        return delay

    def _overdue(self, supervised: _Supervised) -> None:
        """The streak of `supervised` has lasted the grace: not ready until it ends."""
        streak = supervised.streak
        assert streak is not None, "the timer is cancelled with its streak"
        streak.overdue = True
        failing_for = asyncio.get_running_loop().time() - streak.started
        problem = (
            f"background loop {supervised.name!r} has been failing for {failing_for:.0f}s "
            f"({streak.failures} failure(s), the last {streak.last_error})"
        )
        log.error("%s: not ready until it runs again", problem)
        if self._report is not None:
            self._report(f"loop {supervised.name}", problem)

    def _recovered(self, supervised: _Supervised) -> None:
        streak = supervised.streak
        assert streak is not None, "only a run after a failure waits to be stable"
        log.info("background loop %r runs again after %d failure(s)", supervised.name, streak.failures)
        self._end_streak(supervised)

    def _end_streak(self, supervised: _Supervised) -> None:
        streak, supervised.streak = supervised.streak, None
        if streak is None:
            return
        if streak.timer is not None:
            streak.timer.cancel()
        if streak.overdue and self._report is not None:
            self._report(f"loop {supervised.name}", None)
