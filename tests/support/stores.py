"""The stores as the tests open them: SQL by URL, Redis by keyspace (on the shared Redis, see
shared_redis.py, or a topology), with the compare-and-set test seams; what a Redis store wrote,
read back; and the wait for the store's clock."""

from __future__ import annotations

import asyncio
from typing import Protocol, cast

from tests.support.shared_redis import REDIS_TIMEOUT_S
from turngate.service.ports.store import AfterWrite, BeforeWrite, Store
from turngate.service.sql.engine import make_engine
from turngate.service.store.redis.connection import Client, connect
from turngate.service.store.redis.keys import Keyspace, LogEntries
from turngate.service.store.redis.store import RedisStore
from turngate.service.store.sql import SqlStore

# More events than any test writes to one session, so retention alone never trims under a test.
REDIS_RETENTION = 10_000
MAX_ATTEMPTS = 32


class ContractStore(Store, Protocol):
    """A store with the compare-and-set test seams (store.cas.CompareAndSetStore)."""

    before_write: BeforeWrite | None
    after_write: AfterWrite | None


class OpenStore(Protocol):
    """Opens one more store (another replica, with its own connections) on the same data."""

    def __call__(self, *, max_attempts: int = MAX_ATTEMPTS) -> ContractStore: ...


def open_sql_store(url: str, *, max_attempts: int = MAX_ATTEMPTS) -> SqlStore:
    return SqlStore(make_engine(url), max_attempts=max_attempts)


def open_redis_store(
    url: str,
    keys: Keyspace,
    *,
    retention: int = REDIS_RETENTION,
    max_event_age: int | None = None,
    max_attempts: int = MAX_ATTEMPTS,
) -> RedisStore:
    return RedisStore(
        connect(url, REDIS_TIMEOUT_S),
        keys,
        retention=retention,
        max_event_age=max_event_age,
        max_attempts=max_attempts,
    )


async def wait_past(store: Store, instant: int) -> None:
    """Waits until the store's clock has passed `instant` (µs), so deadlines up to it are due."""
    await asyncio.sleep((instant - await store.now()) / 1_000_000 + 0.001)
    assert await store.now() > instant


RedisContents = dict[bytes, object]


async def redis_contents(client: Client, keys: Keyspace) -> RedisContents:
    """Everything stored under the keyspace, by key: hashes, streams (with their ids), sorted sets."""
    contents: RedisContents = {}
    async for name in client.scan_iter(match=f"{keys.prefix}:*", count=1_000):
        kind = await client.type(name)
        if kind == b"hash":
            contents[name] = await client.hgetall(name)
        elif kind == b"stream":
            contents[name] = await client.xrange(name)
        else:
            assert kind == b"zset", f"{name!r} is a {kind!r}: the store keeps no such key"
            contents[name] = await client.zrange(name, 0, -1, withscores=True)
    return contents


async def stream_entries(
    client: Client, name: str, *, first: str = "-", count: int | None = None
) -> LogEntries:
    """Up to `count` entries of stream `name` from id `first` on, as (id, fields) in bytes."""
    return cast(LogEntries, await client.xrange(name, min=first, count=count))
