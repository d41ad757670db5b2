"""History retention as a background loop: every so often, the history older than the retention
is pruned (ledger/prune.py) from the database that holds it."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable

from sqlalchemy.ext.asyncio import AsyncEngine

from turngate.service.ledger.prune import Pruned, prune
from turngate.service.ports.store import StoreUnavailable

log = logging.getLogger("turngate.retention")

# Seconds between prunes, plus up to JITTER_S more, so replicas started together prune apart.
INTERVAL_S = 60.0
JITTER_S = 15.0


class HistoryRetention:
    """Prunes what is older than `retention` (µs) by the store's clock (`now`, I10: the times in
    the ledger are the store's); `pruned` counts what it deleted since it started."""

    def __init__(self, engine: AsyncEngine, retention: int, now: Callable[[], Awaitable[int]]) -> None:
        self._engine = engine
        self._retention = retention
        self._now = now
        self.pruned = Pruned()

    async def run(self) -> None:
        """Prunes after every interval until cancelled (not at once: a starting server has more
        pressing work)."""
        while True:
            await asyncio.sleep(INTERVAL_S + random.uniform(0, JITTER_S))
            await self.prune_once()

    async def prune_once(self) -> Pruned:
        """One pass; a database (or store clock) that does not answer is tried again next pass."""
        try:
            pruned = await prune(self._engine, await self._now() - self._retention)
        except StoreUnavailable as error:
            log.warning("history retention: database unavailable, pruning at the next pass: %s", error)
            return Pruned()
        if pruned.total:
            self.pruned += pruned
            log.info(
                "history retention pruned %d turns, %d tool calls, %d interactions, %d steers, "
                "%d session events and %d sessions",
                pruned.turns,
                pruned.tool_calls,
                pruned.interactions,
                pruned.steers,
                pruned.session_events,
                pruned.session_activity,
            )
        return pruned
