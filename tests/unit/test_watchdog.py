"""The watchdog's sleep (watchdog.py): commits landing while it reads the next deadline are taken
into account, not a reason to sweep again at once, so a loaded server's watchdog does not read the
store in a loop; an earlier deadline committed meanwhile still wakes it in time."""

from __future__ import annotations

import asyncio

from tests.support.memory_store import MemoryStore
from turngate.service.core import SessionKey
from turngate.service.watchdog import Watchdog

from .helpers import SECOND, admit

HOUR = 3_600 * SECOND
MAX_SLEEP_S = 1.0


class CommittingWhileRead(MemoryStore):
    """Counts sweeps (`due`), and commits an admission with a lease of `lease` (µs) while the
    watchdog reads the next deadline, `commits` times (every time: None)."""

    def __init__(self, lease: int, commits: int | None) -> None:
        super().__init__()
        self.sweeps = 0
        self._lease = lease
        self._commits = commits
        self._sessions = 0

    async def due(self, now: int, limit: int) -> list[SessionKey]:
        self.sweeps += 1
        return await super().due(now, limit)

    async def next_deadline(self) -> int | None:
        deadline = await super().next_deadline()
        if self._commits is None or self._sessions < self._commits:
            self._sessions += 1
            await self.apply(SessionKey("p", f"meanwhile-{self._sessions}"), admit(lease_ttl=self._lease))
        return deadline


async def run_for(watchdog: Watchdog, seconds: float) -> None:
    task = asyncio.create_task(watchdog.run())
    await asyncio.sleep(seconds)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_later_deadlines_committed_while_the_next_is_read_do_not_make_the_watchdog_sweep_again() -> (
    None
):
    store = CommittingWhileRead(lease=2 * HOUR, commits=None)
    await store.apply(SessionKey("p", "first"), admit(lease_ttl=HOUR))

    await run_for(Watchdog(store, max_sleep=MAX_SLEEP_S), 0.3)

    assert store.sweeps == 1, "the start's sweep, then asleep until the earliest deadline or max_sleep"


async def test_an_earlier_deadline_committed_while_the_next_one_is_read_still_wakes_the_watchdog_then() -> (
    None
):
    store = CommittingWhileRead(lease=50_000, commits=1)  # due 50 ms after the (fake) clock's now
    await store.apply(SessionKey("p", "first"), admit(lease_ttl=HOUR))

    await run_for(Watchdog(store, max_sleep=MAX_SLEEP_S), 0.4)

    assert store.sweeps >= 2, "woke for the deadline committed during the read, well before max_sleep"
