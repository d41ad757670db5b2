"""The compare-and-set's connections: lent by one server's (or the Sentinel-managed primary's)
lender, or taken from a cluster node, connected; held for one call each (`HeldConnection`, when
writes wait for replicas) or for a node's pipe's life (pipeline.py).

Both classes are entered on every write that waits for replicas, so both are plain classes:
redis-py's blocking pool spends a condition, two timers, a lock and its observability hooks on
every checkout, and a generator-based context manager costs the event loop a first-iteration hook
and a weak reference (docs/performance.md, "What changed").
"""

from __future__ import annotations

import asyncio
from collections import deque
from types import TracebackType
from typing import Any

from redis import exceptions as redis_errors
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import Connection, ConnectionPool

from turngate.service.ports.store import StoreUnavailable
from turngate.service.store.redis.connection import Client, replies_of, send_at_once
from turngate.service.store.redis.resp import Exchange


class ConnectionLender:
    """The connections of one server, or of the Sentinel-managed primary, lent to one caller at a
    time: up to `size`, made by `pool` (a Sentinel's asks the sentinels for the primary whenever it
    connects); past that, callers queue for up to `timeout` seconds, then Redis is unavailable
    (as in redis-py's blocking pool)."""

    def __init__(self, pool: ConnectionPool, size: int, timeout: float) -> None:
        self._pool = pool
        self._size = size
        self._timeout = timeout
        self._made: list[Connection] = []
        self._idle: list[Connection] = []
        self._waiting: deque[asyncio.Future[Connection]] = deque()

    async def lend(self) -> Connection:
        """A connection, connected, the most recently given back first. One that Redis closed is
        connected again here, before anything is sent on it; a Sentinel's connection connects
        only through its own `connect` (redis-py's sending would connect it to its default
        address), as the pool connects its connections."""
        if self._idle:
            connection = self._idle.pop()
        elif len(self._made) < self._size:
            connection = self._pool.make_connection()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
            self._made.append(connection)
        else:
            connection = await self._wait()
        try:
            if closed_by_redis(connection):
                await connection.disconnect()
            if not connection.is_connected:
                await connection.connect()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
        except BaseException:
            try:  # it may be half set up (its handshake's replies unread): it connects anew when lent
                await connection.disconnect(nowait=True)
            finally:
                self.give_back(connection)
            raise
        return connection

    async def _wait(self) -> Connection:
        waiter: asyncio.Future[Connection] = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        try:
            async with asyncio.timeout(self._timeout):
                return await waiter
        except BaseException as failure:
            if waiter.done() and not waiter.cancelled():
                self.give_back(waiter.result())  # handed over just as this caller gave up
            else:
                waiter.cancel()
            if isinstance(failure, TimeoutError):
                raise redis_errors.ConnectionError(
                    f"no connection available within {self._timeout:g}s"
                ) from None
            raise

    def give_back(self, connection: Connection) -> None:
        """To the first caller still waiting, else to the idle ones."""
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(connection)
                return
        self._idle.append(connection)

    async def close(self) -> None:
        """Disconnects every connection made, lent or not (as redis-py's pool does)."""
        for connection in self._made:
            await connection.disconnect()


def closed_by_redis(connection: Connection) -> bool:
    """Whether Redis closed `connection` while it was idle (redis-py's pool reads it to tell)."""
    reader, writer = connection._reader, connection._writer  # no public way to ask
    if reader is None or writer is None:
        return False
    return reader.at_eof() or reader.exception() is not None or writer.transport.is_closing()


async def connected_from(node: ClusterNode) -> Connection:
    """A connection of `node`'s, connected; given back to it if it cannot connect."""
    connection = node.acquire_connection()
    try:
        await connection.connect()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
    except BaseException:
        await connection.disconnect()
        node.release(connection)
        raise
    return connection


class HeldConnection:
    """`async with HeldConnection(client, lender, key) as exchange`: an exchange on a connection to
    the master that holds `key` (the master of its slot, on a cluster, or the cluster's default node
    for None; else `lender`'s), connected, and given back when the block ends. If the block fails
    it is disconnected first: replies may be left unread, so it is never reused as it is."""

    __slots__ = ("_client", "_connection", "_key", "_lender", "_node")

    def __init__(self, client: Client, lender: ConnectionLender | None, key: str | None = None) -> None:
        self._client = client
        self._lender = lender
        self._key = key
        self._node: ClusterNode | None = None
        self._connection: Connection | None = None

    async def __aenter__(self) -> Exchange:
        if isinstance(self._client, RedisCluster):
            client = self._client
            self._node = node = (
                client.get_default_node() if self._key is None else client.get_node_from_key(self._key)
            )
            if node is None:
                raise StoreUnavailable(f"{self._key}: no node serves its slot")
            self._connection = await connected_from(node)
        else:
            assert self._lender is not None, "a client of one server or Sentinel lends through its lender"
            self._connection = await self._lender.lend()
        return self._exchange

    async def _exchange(self, data: bytes, replies: int) -> list[Any]:
        """`data` sent at once on the held connection, and its next `replies` replies."""
        assert self._connection is not None, "exchanged outside the block"
        await send_at_once(self._connection, data)
        return await replies_of(self._connection, replies)

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        connection = self._connection
        assert connection is not None, "exited without having entered"
        try:
            if kind is not None:
                await connection.disconnect()
        finally:
            if self._node is not None:
                self._node.release(connection)
            elif self._lender is not None:
                self._lender.give_back(connection)
