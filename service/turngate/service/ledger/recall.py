"""R2 in redis mode (docs/design.md §8): a Stop on a session Redis does not hold recalls the
session's settled turns from the ledger. A ledger that does not answer recalls nothing, so a Stop
never waits for it: the session is then taken as new (a Stop naming a turn tombstones it)."""

from __future__ import annotations

import logging

from turngate.service.core import SessionKey, SettledTurn
from turngate.service.ledger.reads import Ledger
from turngate.service.ports.store import Recall, StoreUnavailable
from turngate.service.telemetry.throttled import Throttled

log = logging.getLogger("turngate.ledger")


def recall_unless_down(ledger: Ledger) -> Recall:
    unanswered = Throttled(log, logging.WARNING, "the ledger did not answer a recall of %s: %s")

    async def recall(key: SessionKey) -> tuple[SettledTurn, ...]:
        try:
            return await ledger.recall(key)
        except StoreUnavailable as error:
            unanswered.note(key, error)
            return ()

    return recall
