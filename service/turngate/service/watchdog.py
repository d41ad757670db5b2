"""The watchdog: sleeps until the earliest deadline, then applies Expire to every session due.

It decides nothing: Expire asks the core, which settles whatever the store's clock says is due
(LOST on lease expiry, CANCELLED on stop-grace expiry, EXPIRED for a queued turn past its wait,
and what follows in the same write: the queue's head promoted, or the queue paused). Many
replicas may sweep at once; the store's compare-and-set makes each settlement happen exactly
once. A commit that sets an earlier deadline wakes it; `max_sleep` bounds how late it notices
deadlines set elsewhere.
"""

from __future__ import annotations

import asyncio
import logging

from turngate.service.at_once import count_at_once
from turngate.service.core import Decision, Expire, SessionKey, Swept
from turngate.service.ports.store import Store, StoreContention, StoreUnavailable
from turngate.service.telemetry import traces

log = logging.getLogger("turngate.watchdog")
_US = 1_000_000


class Watchdog:
    def __init__(self, store: Store, *, max_sleep: float = 1.0, batch: int = 100) -> None:
        self._store = store
        self._max_sleep = max_sleep
        self._batch = batch
        self._wake = asyncio.Event()
        self._sleeping_until: int | None = None
        # While the next deadline is read: the earliest deadline committed meanwhile (the read may
        # have missed it), taken into account once the read is done rather than waking at once.
        self._reading = False
        self._committed_while_reading: int | None = None
        store.add_listener(self._on_commit)

    def _on_commit(self, _key: SessionKey, decision: Decision) -> None:
        deadline = decision.state.deadline()
        if deadline is None:
            return
        if self._reading:
            earliest = self._committed_while_reading
            self._committed_while_reading = deadline if earliest is None else min(earliest, deadline)
        elif self._sleeping_until is None or deadline < self._sleeping_until:
            self._wake.set()

    async def sweep(self) -> int:
        """Settles every session due now; returns how many turns it settled."""
        settled = 0
        while True:
            due = await self._store.due(await self._store.now(), self._batch)
            settled += await count_at_once(due, self._settle)
            if len(due) < self._batch:
                return settled

    async def _settle(self, key: SessionKey) -> bool:
        """Applies Expire to `key`: whether that settled a turn."""
        with traces.settling(key) as span:
            decision = await self._store.apply(key, Expire())
            traces.turns_moved(span, decision)
        return isinstance(decision.reply, Swept) and decision.reply.settled

    async def run(self) -> None:
        """Reconciles at once (settles what expired while no one watched), then follows deadlines."""
        while True:
            try:
                settled = await self.sweep()
                if settled:
                    log.info("watchdog settled %d turn(s)", settled)
                await self._sleep_until_next_deadline()
            except (StoreUnavailable, StoreContention) as error:
                log.warning("watchdog sweep failed, retrying: %s", error)
                await asyncio.sleep(self._max_sleep)

    async def _sleep_until_next_deadline(self) -> None:
        # A commit landing while the next deadline is read counts with what the read finds: under
        # load one always does, and waking for each made the watchdog read the store in a loop.
        self._wake.clear()
        self._reading, self._committed_while_reading = True, None
        try:
            deadline = await self._store.next_deadline()
            now = await self._store.now()
        finally:
            self._reading = False
        committed = self._committed_while_reading
        if committed is not None and (deadline is None or committed < deadline):
            deadline = committed
        delay = self._max_sleep
        if deadline is not None:
            delay = min(delay, max(0.0, (deadline - now) / _US))
        self._sleeping_until = deadline
        try:
            await asyncio.wait_for(self._wake.wait(), timeout=delay)
        except TimeoutError:
            pass
        finally:
            self._sleeping_until = None
