"""Cross-replica watch: each replica follows the Redis logs of every session watched here.

On one server (or a Sentinel-managed primary) one connection blocks in a single XREAD over all
those logs; when the set of watched sessions changes, another connection interrupts it (CLIENT
UNBLOCK) so a new session is followed at once. On a Redis Cluster one XREAD may name keys of one
slot only, so there is one such reader per bucket that has watched sessions, each on the node
that owns the bucket's slot, found again after a failover. Positions are seqs, so nothing is read
twice and nothing is skipped across reconnects. After a reconnect, a log that Redis lost and
started again (its newest entry behind the position, or of another epoch than the position's: the
events read from it, or the one named when it was first followed) is read from its start: its
events reach the hub, which resyncs the session's watchers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import cast

from redis import exceptions as redis_errors
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from turngate.service.core import NO_EPOCH, Event, SessionKey
from turngate.service.redis_url import RedisUrl
from turngate.service.store.redis.connection import UNAVAILABLE_ERRORS, client_for, close_client, unavailable
from turngate.service.store.redis.keys import Keyspace, LogEntries, epoch_of, log_event, log_id, seq_of

_log = logging.getLogger(__name__)
# How long one XREAD may block; a change of the watched set interrupts it sooner.
_BLOCK_MS = 2_000
_BATCH = 500
_RETRY_S = 0.5

# A lost connection, or a failover (the reader's node no longer owns the slot: MOVED).
_LOST: tuple[type[BaseException], ...] = (*UNAVAILABLE_ERRORS, redis_errors.ResponseError)

Deliver = Callable[[SessionKey, Sequence[Event]], None]
# The reader (one connection, for the blocking XREAD) and a client of the same server (to unblock it).
Endpoints = Callable[[], Awaitable[tuple[Redis, Redis]]]


def open_feed(where: RedisUrl, keys: Keyspace, timeout: float) -> RedisLogFeed | ClusterLogFeed:
    """The feed for Redis at `where`; `timeout` bounds every call but the blocking read."""
    if where.kind == "cluster":
        return ClusterLogFeed(where, keys, timeout=timeout)
    return RedisLogFeed(keys, fixed_endpoints(where, timeout))


class RedisLogFeed:
    """Follows watched sessions' logs on the one server `endpoints` names at each (re)connect."""

    def __init__(self, keys: Keyspace, endpoints: Endpoints) -> None:
        self._keys = keys
        self._endpoints = endpoints
        self._reader: Redis | None = None
        self._control: Redis | None = None
        self._positions: dict[SessionKey, int] = {}
        # The epoch of each log's position: of the events last delivered from it, or named by `track`.
        self._epochs: dict[SessionKey, int] = {}
        self._changed = asyncio.Event()
        self._reads = 0  # which XREAD is in flight, so an interruption targets that one only
        self._reader_id: int | None = None
        self._deliver: Deliver | None = None
        self._interruptions: set[asyncio.Task[None]] = set()

    def deliver_to(self, deliver: Deliver) -> None:
        self._deliver = deliver

    def track(self, key: SessionKey, after_seq: int, epoch: int = NO_EPOCH) -> None:
        if key not in self._positions:
            self._positions[key] = after_seq
            # Without it, a log Redis lost and wrote again as far as the position before the first
            # read would be taken for the one followed, and its events up to there skipped.
            if epoch != NO_EPOCH:
                self._epochs[key] = epoch
            self._changed.set()
            task = asyncio.get_running_loop().create_task(self._interrupt(self._reads))
            self._interruptions.add(task)
            task.add_done_callback(self._interruptions.discard)

    def untrack(self, key: SessionKey) -> None:
        self._positions.pop(key, None)
        self._epochs.pop(key, None)

    async def _interrupt(self, read: int) -> None:
        """Unblocks XREAD number `read`; retried until it is blocked at the server or has ended."""
        while self._reads == read and self._reader_id is not None and self._control is not None:
            try:
                if await self._control.client_unblock(self._reader_id):
                    return
            except UNAVAILABLE_ERRORS:
                return
            await asyncio.sleep(0.001)

    async def run(self) -> None:
        while True:
            try:
                await self._follow()
            except Exception as error:
                # Also a cluster none of whose nodes answers, when the reader reconnects.
                if not (isinstance(error, _LOST) or unavailable(error)):
                    raise
                _log.warning("watch feed lost redis, retrying: %s", error)
                self._reader_id = None
                await asyncio.sleep(_RETRY_S)

    async def _follow(self) -> None:
        while True:
            while not self._positions:
                # `_changed` may be left over from a watcher that has gone since: XREAD needs a stream.
                self._changed.clear()
                await self._changed.wait()
            if self._reader is None or self._reader_id is None:
                self._reader, self._control = await self._endpoints()
                self._reader_id = await self._reader.client_id()
                await self._restart_lost_logs(self._reader)
                continue  # the watched set may have changed while connecting
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
                    self._epochs[key] = events[-1].epoch
                    if self._deliver is not None:
                        self._deliver(key, events)

    async def _restart_lost_logs(self, client: Redis) -> None:
        """Follows from its start each log Redis lost and started again while this feed was away,
        or before its first read: its newest entry is behind the position, or of another epoch than
        the position's (a log followed from a session never written has none: it is followed from
        its start already)."""
        keys = list(self._positions)
        if not keys:
            return
        # On the reader's one connection (a pipeline would take another), once per reconnect.
        newest = [cast(LogEntries, await client.xrevrange(self._keys.log(key), count=1)) for key in keys]
        for key, entries in zip(keys, newest, strict=True):
            position = self._positions.get(key)
            if position is None:
                continue
            seq, epoch = (seq_of(entries[0][0]), epoch_of(entries[0][1])) if entries else (0, None)
            if seq < position or epoch != self._epochs.get(key, epoch):
                self._positions[key] = 0
                self._epochs.pop(key, None)

    async def close(self) -> None:
        # An interruption still under way would go on into the clients as they close.
        for task in self._interruptions:
            task.cancel()
        await asyncio.gather(*self._interruptions, return_exceptions=True)
        for client in (self._reader, self._control):
            if client is not None:
                await client.aclose()


def fixed_endpoints(where: RedisUrl, timeout: float) -> Endpoints:
    """The same two clients at every (re)connect, made at the first: they reconnect by themselves
    (a Sentinel client to whichever server is the primary then)."""
    made: list[Redis] = []

    async def endpoints() -> tuple[Redis, Redis]:
        if not made:
            made.extend(_pair(where, timeout))
        return made[0], made[1]

    return endpoints


def _pair(where: RedisUrl, timeout: float) -> tuple[Redis, Redis]:
    """A reader whose blocking read outlasts `timeout`, and a pooled client of the same server."""
    reader = cast(Redis, client_for(where, _BLOCK_MS / 1000 + timeout, pooled=False))
    return reader, cast(Redis, client_for(where, timeout))


class ClusterLogFeed:
    """The feed on a Redis Cluster: one `RedisLogFeed` per bucket, each on the node that owns the
    bucket's slot when it (re)connects."""

    def __init__(self, where: RedisUrl, keys: Keyspace, *, timeout: float) -> None:
        self._where = where
        self._cluster = cast(RedisCluster, client_for(where, timeout))
        self._keys = keys
        self._timeout = timeout
        self._buckets = {bucket: RedisLogFeed(keys, self._owner_of(bucket)) for bucket in keys.all_buckets()}

    def deliver_to(self, deliver: Deliver) -> None:
        for feed in self._buckets.values():
            feed.deliver_to(deliver)

    def track(self, key: SessionKey, after_seq: int, epoch: int = NO_EPOCH) -> None:
        self._buckets[self._keys.bucket(key)].track(key, after_seq, epoch)

    def untrack(self, key: SessionKey) -> None:
        self._buckets[self._keys.bucket(key)].untrack(key)

    async def run(self) -> None:
        await asyncio.gather(*(feed.run() for feed in self._buckets.values()))

    async def close(self) -> None:
        for feed in self._buckets.values():
            await feed.close()
        await close_client(self._cluster)

    def _owner_of(self, bucket: int) -> Endpoints:
        slot_key = self._keys.deadlines(bucket)
        previous: list[Redis] = []

        async def endpoints() -> tuple[Redis, Redis]:
            for client in previous:
                await client.aclose()
            # A routed command follows MOVED, so the slot map names the owner after a failover.
            await self._cluster.exists(slot_key)
            node = self._cluster.get_node_from_key(slot_key)
            if node is None:
                raise redis_errors.ConnectionError(f"no node serves the slot of bucket {bucket}")
            reader, control = _pair(self._where.node(node.host, int(node.port)), self._timeout)
            previous[:] = [reader, control]
            return reader, control

        return endpoints
