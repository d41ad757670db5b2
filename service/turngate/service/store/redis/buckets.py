"""Every bucket at once: one command per bucket (one key each, so that it is valid on a Redis
Cluster too, which splits the pipeline per node), sent in one round trip."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import ClusterPipeline

from turngate.service.store.redis.connection import Client
from turngate.service.store.redis.keys import Keyspace

Queue = Callable[[Pipeline | ClusterPipeline, int], object]


async def each_bucket(
    client: Client, keys: Keyspace, command: Queue, *, raise_on_error: bool = True
) -> list[Any]:
    """The replies of `command(pipe, bucket)` queued for every bucket of `keys`, in bucket order
    (with `raise_on_error` False, a command Redis failed is its exception)."""
    async with client.pipeline(transaction=False) as pipe:
        for bucket in keys.all_buckets():
            command(pipe, bucket)
        return await pipe.execute(raise_on_error=raise_on_error)
