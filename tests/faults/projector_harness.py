"""A ledger projector in a process of its own that SIGKILLs itself right after its first SQL commit,
before it acknowledges anything: a replica dying between recording and acknowledging.

Usage: python projector_harness.py REDIS_URL PREFIX BUCKETS LEDGER_URL CONSUMER
(REDIS_URL of any topology: `redis://`, `redis+cluster://`, `redis+sentinel://`)
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from turngate.service.core import SessionKey
from turngate.service.ledger.projector import LedgerProjector
from turngate.service.sql.engine import make_engine
from turngate.service.store.redis.connection import connect
from turngate.service.store.redis.keys import Keyspace
from turngate.service.store.redis.outbox import RedisOutbox

# Each Redis call's bound, as the service's default (Settings.redis_timeout).
REDIS_TIMEOUT_S = 2.0


async def die(_key: SessionKey, _cursor: int) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


async def main(redis_url: str, prefix: str, buckets: str, ledger_url: str, consumer: str) -> None:
    projector = LedgerProjector(
        RedisOutbox(
            connect(redis_url, REDIS_TIMEOUT_S),
            Keyspace(prefix=prefix, buckets=int(buckets)),
            consumer=consumer,
        ),
        make_engine(ledger_url),
        reclaim_idle=1.0,
        max_deliveries=3,
        after_commit=die,
    )
    await projector.run()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
