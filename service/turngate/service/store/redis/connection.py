"""Clients of the three Redis topologies (`redis_url.RedisUrl`), and what their failures mean.

A cluster client reads the topology from the nodes given and again on MOVED, ASK and CLUSTERDOWN;
a Sentinel client asks the sentinels for the primary again after a connection failure or
READONLY: both follow a failover by themselves. Every socket read and connect is bounded
(`timeout`), so a frozen node fails calls fast.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeAlias

from redis import exceptions as redis_errors
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool

from turngate.service.ports.store import StoreUnavailable
from turngate.service.redis_url import RedisUrl

Client: TypeAlias = Redis | RedisCluster
# Past this many commands in flight, callers wait up to POOL_TIMEOUT_S for a connection before the
# store is unavailable (redis-py's default pool fails at once past 100, even with Redis healthy).
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


class _QueueingSentinelPool(SentinelConnectionPool, BlockingConnectionPool):
    """The primary's pool, in which callers queue for a connection as in the one-server pool."""


def _credentials(where: RedisUrl) -> dict[str, Any]:
    found: dict[str, Any] = {"username": where.username, "password": where.password}
    if where.tls:
        found["ssl"] = True
    return found


# What a failover, a frozen or unreachable node, or a node still loading looks like from here:
# the store is unavailable (the call may be retried), never an internal error.
UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (
    redis_errors.ConnectionError,
    redis_errors.TimeoutError,
    redis_errors.ReadOnlyError,
    redis_errors.OutOfMemoryError,
    redis_errors.ClusterError,
    redis_errors.AskError,
    redis_errors.TryAgainError,
    redis_errors.SlotNotCoveredError,
    OSError,
)
# Replies of a server that answers but refuses writes, which redis-py raises as a plain
# ResponseError: fewer good replicas than min-replicas-to-write asks for (a primary that lost its
# replicas, with the `min-replicas-to-write 1` the README asks for).
_REFUSING_WRITES = ("NOREPLICAS ",)


def unavailable(error: BaseException) -> bool:
    """Whether `error` is Redis being unavailable (see UNAVAILABLE_ERRORS), not a mistake: also a
    server refusing writes with a reply redis-py has no class for, and a cluster client that found
    no node answering (it raises RedisClusterException, from the last node's connection error)."""
    if isinstance(error, UNAVAILABLE_ERRORS):
        return True
    if isinstance(error, redis_errors.RedisClusterException):
        return isinstance(error.__cause__, UNAVAILABLE_ERRORS)
    if isinstance(error, redis_errors.ResponseError):
        return str(error).startswith(_REFUSING_WRITES)
    return False


@contextmanager
def unavailable_on_failure() -> Iterator[None]:
    """Redis unreachable, timing out, failing over, still loading its data, or refusing writes (a
    replica after a failover, out of memory, a primary without its replicas): the store is
    unavailable."""
    try:
        yield
    except Exception as exc:
        if unavailable(exc):
            raise StoreUnavailable(f"redis unavailable: {exc}") from exc
        if isinstance(exc, AttributeError) and _lost_under_redis_py(exc):
            raise StoreUnavailable(f"redis unavailable: a connection closed under the call ({exc})") from exc
        raise


def _lost_under_redis_py(error: AttributeError) -> bool:
    """redis-py 8 may close a connection while another call is sending on it (a cluster topology
    refresh during a failover); the call then fails inside redis-py on the closed writer (None)."""
    frames = traceback.extract_tb(error.__traceback__)
    return bool(frames) and f"{os.sep}redis{os.sep}" in frames[-1].filename and "NoneType" in str(error)
