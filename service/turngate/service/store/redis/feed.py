"""Cross-replica watch: one reader per replica follows the Redis logs of every session watched here.

One connection blocks in a single XREAD over all those logs; when the set of watched sessions
changes, another connection interrupts it (CLIENT UNBLOCK) so a new session is followed at once.
Positions are seqs, so nothing is read twice and nothing is skipped across reconnects.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import cast

from redis import exceptions as redis_errors
from redis.asyncio import Redis

from turngate.service.core import Event, SessionKey
from turngate.service.store.redis.keys import Keyspace, LogEntries, log_event, log_id

_log = logging.getLogger(__name__)
# How long one XREAD may block; a change of the watched set interrupts it sooner. Below redis-py's
# default socket timeout (5 s), which would otherwise cut every idle read as a lost connection.
_BLOCK_MS = 2_000
_BATCH = 500
_RETRY_S = 0.5

Deliver = Callable[[SessionKey, Sequence[Event]], None]


class RedisLogFeed:
    def __init__(self, url: str, keys: Keyspace) -> None:
        self._reader = Redis.from_url(url, single_connection_client=True)
        self._control = Redis.from_url(url)
        self._keys = keys
        self._positions: dict[SessionKey, int] = {}
        self._changed = asyncio.Event()
        self._reads = 0  # which XREAD is in flight, so an interruption targets that one only
        self._reader_id: int | None = None
        self._deliver: Deliver | None = None
        self._interruptions: set[asyncio.Task[None]] = set()

    def deliver_to(self, deliver: Deliver) -> None:
        self._deliver = deliver

    def track(self, key: SessionKey, after_seq: int) -> None:
        if key not in self._positions:
            self._positions[key] = after_seq
            self._changed.set()
            task = asyncio.get_running_loop().create_task(self._interrupt(self._reads))
            self._interruptions.add(task)
            task.add_done_callback(self._interruptions.discard)

    def untrack(self, key: SessionKey) -> None:
        self._positions.pop(key, None)

    async def _interrupt(self, read: int) -> None:
        """Unblocks XREAD number `read`; retried until it is blocked at the server or has ended."""
        while self._reads == read and self._reader_id is not None:
            try:
                if await self._control.client_unblock(self._reader_id):
                    return
            except (redis_errors.ConnectionError, redis_errors.TimeoutError, OSError):
                return
            await asyncio.sleep(0.001)

    async def run(self) -> None:
        while True:
            try:
                await self._follow()
            except (redis_errors.ConnectionError, redis_errors.TimeoutError, OSError) as error:
                _log.warning("watch feed lost redis, retrying: %s", error)
                self._reader_id = None
                await asyncio.sleep(_RETRY_S)

    async def _follow(self) -> None:
        self._reader_id = await self._reader.client_id()
        while True:
            while not self._positions:
                # `_changed` may be left over from a watcher that has gone since: XREAD needs a stream.
                self._changed.clear()
                await self._changed.wait()
            self._changed.clear()
            logs = {self._keys.log(key): key for key in self._positions}
            streams = {name: log_id(self._positions[key]) for name, key in logs.items()}
            self._reads += 1
            try:
                reply = await self._reader.xread(streams, count=_BATCH, block=_BLOCK_MS)  # type: ignore[arg-type]
            finally:
                self._reads += 1
            for name, entries in cast(list[tuple[bytes, LogEntries]], reply or []):
                key = logs[name.decode()]
                events = [log_event(entry_id, fields) for entry_id, fields in entries]
                if events and key in self._positions:
                    self._positions[key] = events[-1].seq
                    if self._deliver is not None:
                        self._deliver(key, events)

    async def close(self) -> None:
        # An interruption still under way would go on into the clients as they close.
        for task in self._interruptions:
            task.cancel()
        await asyncio.gather(*self._interruptions, return_exceptions=True)
        await self._reader.aclose()
        await self._control.aclose()
