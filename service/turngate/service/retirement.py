"""Retirement (docs/design.md §8, R1): sessions in which nothing has been live for
`idle_retention` leave the hot store. It decides nothing: the store lists the sessions idle long
enough (from an index, never a scan of every session), and `Retire` asks the core, which removes a
session only if it is still idle at that instant; an admission that got there first keeps it.
Many replicas may retire at once; the compare-and-set makes each removal happen once.
"""

from __future__ import annotations

import asyncio
import logging

from turngate.service.at_once import count_at_once
from turngate.service.core import Retire, Retired, SessionKey
from turngate.service.ports.store import Store, StoreContention, StoreUnavailable

log = logging.getLogger("turngate.retirement")
_US = 1_000_000
# How often idle sessions are looked for, at most: a retirement comes at most this late (a pass
# that found a full batch goes on at once). A short retention is looked at twice per retention.
INTERVAL_S = 10.0
_SHORTEST_INTERVAL_S = 0.5


class Retirement:
    def __init__(self, store: Store, *, idle_retention: int, batch: int = 100) -> None:
        self._store = store
        self._command = Retire(idle_retention)
        self._interval = min(INTERVAL_S, max(_SHORTEST_INTERVAL_S, idle_retention / _US / 2))
        self._batch = batch

    async def sweep(self) -> int:
        """Retires every session idle long enough now; returns how many left the store."""
        retired = 0
        while True:
            before = await self._store.now() - self._command.idle_retention
            idle = await self._store.retirable(before, self._batch)
            retired_now = await count_at_once(idle, self._retire)
            retired += retired_now
            # A batch that retired nothing waits for the ledger (Redis): asking again at once would spin.
            if len(idle) < self._batch or not retired_now:
                return retired

    async def _retire(self, key: SessionKey) -> bool:
        decision = await self._store.apply(key, self._command)
        return isinstance(decision.reply, Retired) and decision.reply.retired

    async def run(self) -> None:
        while True:
            try:
                retired = await self.sweep()
                if retired:
                    log.info("retired %d idle session(s)", retired)
            except (StoreUnavailable, StoreContention) as error:
                log.warning("retirement pass failed, retrying: %s", error)
            await asyncio.sleep(self._interval)
