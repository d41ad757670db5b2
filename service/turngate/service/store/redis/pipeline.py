"""The compare-and-set writes of concurrent calls to one Redis master, sent together on one
connection (auto-pipelining; docs/decisions.md, Redis mode, "Concurrent writes share a
connection").

A call sends its command through its master's pipe and is answered once its replies are read. A
command with nothing in flight leaves at once; those sent behind it in one turn of the event loop
leave in one write at its end, or as soon as the first of them has waited FLUSH_AFTER_S (a
decision's whole trip to Redis is bounded by the clock: docs/decisions.md, "Redis's clock"). The
pipe's reader reads the replies in order. A call takes no connection of its own, and a burst of
calls costs one write and one read a turn of the loop, not one of each per call.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from redis import exceptions as redis_errors
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import Connection

from turngate.service.ports.store import StoreUnavailable
from turngate.service.store.redis.connection import Client, replies_of, writer_of
from turngate.service.store.redis.held import ConnectionLender, closed_by_redis, connected_from
from turngate.service.store.redis.resp import Exchange

# A command waits at most this long in a pipe before it is written.
FLUSH_AFTER_S = 0.001


class Pipe:
    """One connected connection: `exchange` writes commands on it and answers each call with its
    replies, in order. Once it fails, every call still waiting fails, and `release` is called."""

    __slots__ = (
        "_connection",
        "_first_at",
        "_idle",
        "_loop",
        "_out",
        "_reader",
        "_release",
        "_waiting",
        "broken",
    )

    def __init__(self, connection: Connection, release: Callable[[], None]) -> None:
        self._connection = connection
        self._release = release
        self._loop = asyncio.get_running_loop()
        # Commands not written yet: those of the last len(_out) calls waiting.
        self._out: list[bytes] = []
        self._first_at = 0.0
        self._waiting: deque[tuple[asyncio.Future[list[Any]], int]] = deque()
        self._idle: asyncio.Future[None] | None = None
        self.broken = False
        self._reader = self._loop.create_task(self._read())

    def usable(self) -> bool:
        """Whether a command sent now can reach Redis: not once its connection closed while
        nothing was waiting on it, by Redis (an idle timeout, CLIENT KILL, a restart) or by
        redis-py (a cluster client disconnects its nodes' connections when it reads the topology
        again), which breaks the pipe before anything is sent on it."""
        connection = self._connection
        idle = not self.broken and not self._waiting
        if idle and (not connection.is_connected or closed_by_redis(connection)):
            self._break(redis_errors.ConnectionError("the connection to Redis closed"))
        return not self.broken

    async def exchange(self, data: bytes, replies: int) -> list[Any]:
        """`data` (packed commands) sent, and its next `replies` replies (an error reply as its
        exception)."""
        if self.broken:
            raise StoreUnavailable("the connection to Redis closed before the command was sent")
        answer: asyncio.Future[list[Any]] = self._loop.create_future()
        self._waiting.append((answer, replies))
        self._out.append(data)
        if len(self._waiting) == 1:
            self._flush()  # nothing in flight to share a write with: no reason to wait
        elif len(self._out) == 1:
            self._first_at = self._loop.time()
            self._loop.call_soon(self._flush)
        elif self._loop.time() - self._first_at >= FLUSH_AFTER_S:
            self._flush()
        if self._idle is not None and not self._idle.done():
            self._idle.set_result(None)
        return await answer

    def _flush(self) -> None:
        if not self._out or self.broken:
            return
        try:
            writer = writer_of(self._connection)
        except redis_errors.ConnectionError as closed:
            self._break(closed)
            return
        writer.write(b"".join(self._out))
        self._out.clear()

    async def _read(self) -> None:
        waiting = self._waiting
        try:
            while True:
                while not waiting:
                    self._idle = self._loop.create_future()
                    await self._idle
                answer, count = waiting[0]
                replies = await replies_of(self._connection, count)
                waiting.popleft()
                if not answer.done():
                    answer.set_result(replies)
        except Exception as error:  # the connection failed (or Redis's reply did not parse)
            self._break(error)

    def _break(self, error: Exception) -> None:
        """Fails every call still waiting: those whose commands were never written as unavailable
        (nothing applied), the first of the others with `error`, the rest as lost (what they sent
        may have been run). Then the connection is disconnected and released."""
        if self.broken:
            return
        self.broken = True
        unsent = len(self._out)
        self._out.clear()
        sent = len(self._waiting) - unsent
        for index, (answer, _) in enumerate(self._waiting):
            if answer.done():
                continue
            if index >= sent:
                answer.set_exception(StoreUnavailable(f"Redis failed before the command was sent: {error}"))
            elif index == 0:
                answer.set_exception(error)
            else:
                lost = f"the connection failed before this call's reply was read: {error}"
                answer.set_exception(redis_errors.ConnectionError(lost))
        self._waiting.clear()
        if self._reader is not asyncio.current_task():
            self._reader.cancel()
        self._release()

    def close(self) -> None:
        self._break(redis_errors.ConnectionError("the store closed"))


class Pipes:
    """A pipe to each master a client writes to: the one server's (or the Sentinel-managed
    primary's), on a connection of `lender`'s; each cluster master's, on a connection of its
    node's. A pipe that broke is opened again by the next call."""

    def __init__(self, client: Client, lender: ConnectionLender | None) -> None:
        self._client = client
        self._lender = lender
        self._pipes: dict[str | None, Pipe] = {}
        self._opening: dict[str | None, asyncio.Future[Pipe]] = {}
        # Connections of broken pipes being disconnected, referenced until they are.
        self._releasing: set[asyncio.Task[None]] = set()
        self._closed = False

    def exchange(self, key: str) -> AbstractAsyncContextManager[Exchange]:
        """`async with pipes.exchange(key) as exchange`: the exchange of the pipe to the master
        that holds `key`, connected once the block is entered."""
        return _Piped(self, key)

    async def to(self, key: str) -> Pipe:
        """The pipe to the master that holds `key`, opened (once, however many callers ask) if
        there is none that can be used."""
        node: ClusterNode | None = None
        if isinstance(self._client, RedisCluster):
            node = self._client.get_node_from_key(key)
            if node is None:
                raise StoreUnavailable(f"{key}: no node serves its slot")
        name = None if node is None else node.name
        pipe = self._pipes.get(name)
        if pipe is not None and pipe.usable():
            return pipe
        if (opening := self._opening.get(name)) is not None:
            return await asyncio.shield(opening)
        opening = self._opening[name] = asyncio.get_running_loop().create_future()
        try:
            pipe = await self._open(node)
            if self._closed:  # closed while it connected: it must not outlive the store
                pipe.close()
                raise StoreUnavailable("the store closed")
            self._pipes[name] = pipe
        except Exception as error:
            opening.set_exception(error)
            opening.exception()  # those who joined are told by their own await
            raise
        except BaseException:
            opening.cancel()
            raise
        finally:
            del self._opening[name]
        opening.set_result(pipe)
        return pipe

    async def _open(self, node: ClusterNode | None) -> Pipe:
        """A pipe on a connection lent by the lender, or taken from `node`'s."""
        if node is None:
            assert self._lender is not None, "a client of one server or Sentinel lends through its lender"
            lender = self._lender
            lent = await lender.lend()
            return Pipe(lent, lambda: self._disconnect(lent, lender.give_back))
        taken = await connected_from(node)
        return Pipe(taken, lambda: self._disconnect(taken, node.release))

    def _disconnect(self, connection: Connection, then: Callable[[Connection], None]) -> None:
        """Disconnects a broken pipe's `connection`, then hands it to `then` (where it came from)."""

        async def disconnect() -> None:
            try:
                await connection.disconnect()
            finally:
                then(connection)

        task = asyncio.get_running_loop().create_task(disconnect())
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)

    async def close(self) -> None:
        """Every pipe closed (the calls still waiting on them fail) and its connection released."""
        self._closed = True
        for pipe in self._pipes.values():
            pipe.close()
        self._pipes.clear()
        await asyncio.gather(*self._releasing, return_exceptions=True)


class _Piped:
    """`Pipes.exchange`'s block: nothing to give back at its end."""

    __slots__ = ("_key", "_pipes")

    def __init__(self, pipes: Pipes, key: str) -> None:
        self._pipes = pipes
        self._key = key

    async def __aenter__(self) -> Exchange:
        return (await self._pipes.to(self._key)).exchange

    async def __aexit__(self, *_: object) -> None:
        return None
