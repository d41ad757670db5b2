"""Clients of the three Redis topologies (`redis_url.RedisUrl`), and what their failures mean.

A cluster client reads the topology from the nodes given and again on MOVED, ASK and CLUSTERDOWN;
a Sentinel client asks the sentinels for the primary again after a connection failure or
READONLY: both follow a failover by themselves. Every socket read and connect is bounded
(`timeout`), so a frozen node fails calls fast.
"""

from __future__ import annotations

import asyncio
import os
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeAlias

from redis import exceptions as redis_errors
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool

from turngate.service.ports.store import StoreUnavailable, WriteOutcomeUnknown
from turngate.service.redis_url import RedisUrl

Client: TypeAlias = Redis | RedisCluster
# Past this many commands in flight, callers wait up to POOL_TIMEOUT_S for a connection before the
# store is unavailable (redis-py's default pool fails at once past 100, even with Redis healthy):
# in the client's pool, and again among the compare-and-set's own connections (held.py).
POOL_SIZE = 64
POOL_TIMEOUT_S = 5.0
# A cluster client keeps a pool per node and fails at once when one is exhausted: room for bursts.
CLUSTER_POOL_SIZE = 256


def connect(url: str, timeout: float) -> Client:
    """The pooled client of the Redis at `url`."""
    return client_for(RedisUrl.parse(url), timeout)


def client_for(where: RedisUrl, timeout: float, *, pooled: bool = True) -> Client:
    """A client whose every call is bounded by `timeout` seconds; a pooled one queues for a
    connection under load, another holds one connection (a blocking reader's)."""
    if where.kind == "cluster":
        return RedisCluster(
            startup_nodes=[ClusterNode(host, port) for host, port in where.nodes],
            max_connections=CLUSTER_POOL_SIZE,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            **_credentials(where),
        )
    if where.kind == "sentinel":
        sentinel = Sentinel(  # type: ignore[no-untyped-call]
            list(where.nodes), socket_timeout=timeout, socket_connect_timeout=timeout
        )
        primary: Redis = sentinel.master_for(
            where.service,
            connection_pool_class=_QueueingSentinelPool,
            max_connections=POOL_SIZE,
            timeout=POOL_TIMEOUT_S,
            db=where.db,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            **_credentials(where),
        )
        # One connection of the primary's pool, asked of the sentinels again when it is lost.
        return (
            primary
            if pooled
            else Redis(connection_pool=primary.connection_pool, single_connection_client=True)
        )
    if not pooled:
        return Redis.from_url(
            where.url, single_connection_client=True, socket_timeout=timeout, socket_connect_timeout=timeout
        )
    pool = BlockingConnectionPool.from_url(
        where.url,
        max_connections=POOL_SIZE,
        timeout=POOL_TIMEOUT_S,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
    )
    return Redis.from_pool(pool)


async def close_client(client: Client) -> None:
    """Closes `client` and every connection it made. A cluster client that a failure marked for
    re-reading the topology is one redis-py's `aclose` takes for never opened, and closes nothing
    of: its nodes are disconnected here as well (a connection left open outlives the client, and
    its node reports it when collected)."""
    await client.aclose()
    if isinstance(client, RedisCluster):
        nodes = client.nodes_manager
        await asyncio.gather(
            *(node.disconnect() for node in (*nodes.nodes_cache.values(), *nodes.startup_nodes.values()))
        )


class _QueueingSentinelPool(SentinelConnectionPool, BlockingConnectionPool):
    """The primary's pool, in which callers queue for a connection as in the one-server pool."""


def _credentials(where: RedisUrl) -> dict[str, Any]:
    found: dict[str, Any] = {"username": where.username, "password": where.password}
    if where.tls:
        found["ssl"] = True
    return found


# Replies of a node that did not run the command it answers: a replica (READONLY, or MASTERDOWN
# while it has no primary), a node still loading its data (LOADING, raised as a connection error),
# busy with a script (BUSY), out of memory (OOM), unable to persist (MISCONF), with fewer good
# replicas than min-replicas-to-write asks for (NOREPLICAS), a cluster node that does not serve the
# slot or the cluster (MOVED, ASK, TRYAGAIN, CLUSTERDOWN), or a cluster client that found no node for
# it or followed redirects until it gave up. What such a reply answers was not applied.
REFUSED_ERRORS: tuple[type[BaseException], ...] = (
    redis_errors.ReadOnlyError,
    redis_errors.OutOfMemoryError,
    redis_errors.BusyLoadingError,
    redis_errors.ClusterDownError,
    redis_errors.AskError,
    redis_errors.TryAgainError,
    redis_errors.SlotNotCoveredError,
    redis_errors.MaxConnectionsError,
)
# The same refusals where redis-py has no class for them: the reply's first word. NOGROUP: a
# stream's consumer group is missing (Redis lost it: the projector makes it again).
_REFUSED_CODES = ("NOREPLICAS", "BUSY", "MISCONF", "NOGROUP")
# What a failover, a frozen or unreachable node, or a lost connection looks like from here: the
# call may or may not have reached Redis. Also UNBLOCKED, the reply to a blocking command (WAIT, a
# blocking XREAD) whose node turned replica under it: what preceded it may have been applied.
LOST_ERRORS: tuple[type[BaseException], ...] = (
    redis_errors.ConnectionError,
    redis_errors.TimeoutError,
    redis_errors.ClusterError,
    OSError,
)
_LOST_CODES = ("UNBLOCKED",)
# Either kind: Redis unavailable, never a mistake of the caller's (the watch feed's reconnects).
UNAVAILABLE_ERRORS = (*REFUSED_ERRORS, *LOST_ERRORS)


def failure(error: BaseException, *, sent: bool) -> type[StoreUnavailable] | None:
    """What `error` means for a call whose write had (`sent`) or had not left for Redis: the one
    classifier of Redis failures (docs/decisions.md, "Unavailable: not applied, or outcome
    unknown"). StoreUnavailable when nothing was applied (a refusal, or nothing sent);
    WriteOutcomeUnknown when the write may have been; None when `error` is not Redis failing (a
    bug, raised as it is). redis-py raises some refusals as others: a Sentinel-managed connection
    a ReadOnlyError as a ConnectionError (the previous master is now a replica), a cluster client
    the failure of its last node as a RedisClusterException; their causes are looked at too."""
    if any(_refused(link) for link in _links(error)):
        return StoreUnavailable
    if any(_lost(link) for link in _links(error)):
        return WriteOutcomeUnknown if sent else StoreUnavailable
    return None


def _links(error: BaseException) -> Iterator[BaseException]:
    """`error`, what it was raised from, and what a redis-py connection error was raised while
    handling (how redis-py wraps a reply it turns into a connection error)."""
    visited: set[int] = set()
    link: BaseException | None = error
    while link is not None and id(link) not in visited:
        visited.add(id(link))
        yield link
        wrapped = isinstance(link, (redis_errors.ConnectionError, redis_errors.RedisClusterException))
        link = link.__cause__ or (link.__context__ if wrapped else None)


def _refused(error: BaseException) -> bool:
    if isinstance(error, REFUSED_ERRORS):
        return True
    return isinstance(error, redis_errors.ResponseError) and _code(error) in _REFUSED_CODES


def _lost(error: BaseException) -> bool:
    if isinstance(error, LOST_ERRORS):
        return True
    if isinstance(error, redis_errors.ResponseError):
        return _code(error) in _LOST_CODES
    return isinstance(error, AttributeError) and _lost_under_redis_py(error)


def _code(error: redis_errors.ResponseError) -> str:
    """A reply's error code (its first word); redis-py strips it from the replies it has a class for."""
    return str(error).split(" ", 1)[0]


def writer_of(connection: AbstractConnection) -> asyncio.StreamWriter:
    """The socket writer of `connection`, to write on without redis-py's send (`send_at_once`); a
    ConnectionError, with nothing sent, once the connection has closed."""
    writer = connection._writer  # redis-py has no public way to write without its send's task
    if writer is None or writer.transport.is_closing():
        raise redis_errors.ConnectionError("the connection closed before the command was sent")
    return writer


async def send_at_once(connection: AbstractConnection, data: bytes) -> None:
    """Writes `data` on the connected `connection` before yielding to the loop, then, if the socket
    did not take it all at once, waits (for the connection's timeout at most) until it did.
    redis-py's send goes through asyncio.wait_for when the connection has a timeout, which on
    Python 3.11 makes the write a task of its own: it then waits behind every callback ready on
    the loop, and in a burst of 200 calls a decision reached Redis 4 to 7 ms after it was taken,
    past the clock's bound (docs/decisions.md, Redis's clock). Failures are redis-py's or the
    socket's (`failure`)."""
    writer = writer_of(connection)
    writer.write(data)
    if writer.transport.get_write_buffer_size():
        async with asyncio.timeout(connection.socket_timeout):
            await writer.drain()


async def replies_of(connection: AbstractConnection, count: int) -> list[Any]:
    """The next `count` replies on `connection`; an error reply as its exception, so the replies
    after it are read too."""
    replies: list[Any] = []
    for _ in range(count):
        try:
            replies.append(await connection.read_response())
        except redis_errors.ResponseError as error:
            replies.append(error)
    return replies


def unavailable(error: BaseException) -> bool:
    """Whether `error` is Redis being unavailable, not a mistake (for callers that write nothing)."""
    return failure(error, sent=False) is not None


@contextmanager
def unavailable_on_failure(*, sent: bool = False) -> Iterator[None]:
    """Redis failing the block, as `failure` classifies it: raised as StoreUnavailable (nothing
    applied) or, once a write was `sent`, WriteOutcomeUnknown where it may have been applied."""
    try:
        yield
    except StoreUnavailable:
        raise
    except Exception as exc:
        kind = failure(exc, sent=sent)
        if kind is None:
            raise
        raise kind(f"redis unavailable: {exc}") from exc


def _lost_under_redis_py(error: AttributeError) -> bool:
    """redis-py 8 may close a connection while another call is sending on it (a cluster topology
    refresh during a failover); the call then fails inside redis-py on the closed writer (None)."""
    frames = traceback.extract_tb(error.__traceback__)
    return bool(frames) and f"{os.sep}redis{os.sep}" in frames[-1].filename and "NoneType" in str(error)
