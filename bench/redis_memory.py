"""The Redis a capacity run measures: a store on it in this process, and what its serving nodes say
of themselves (INFO memory, MEMORY USAGE, INFO commandstats)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from turngate.service.core import SessionKey
from turngate.service.store.redis.connection import Client
from turngate.service.store.redis.keys import Keyspace
from turngate.service.store.redis.store import RedisStore

from topologies import RedisNode, Topology

# turngate's defaults (config.py Settings): the events a log keeps, the buckets sessions spread over.
EVENT_RETENTION = 1_000
BUCKETS = 16


async def info(node: RedisNode, section: str) -> dict[str, Any]:
    async with node.client() as client:
        return dict(await client.info(section))


# What used_memory counts for connections (query and output buffers, the replicas' stream) and the
# replication backlog (filling up to its fixed size with the first writes): they move with clients
# and traffic, not with the sessions stored.
BUFFERS = ("mem_clients_normal", "mem_clients_slaves", "mem_replication_backlog")


async def used_memory(nodes: Sequence[RedisNode]) -> int:
    """Bytes Redis allocated (INFO memory used_memory) less its BUFFERS, summed over `nodes`."""
    total = 0
    for node in nodes:
        memory = await info(node, "memory")
        total += int(memory["used_memory"]) - sum(int(memory.get(name, 0)) for name in BUFFERS)
    return total


@dataclass(frozen=True, slots=True)
class ScriptStats:
    """Script runs (EVALSHA) a node served, and the microseconds it spent in them."""

    calls: int
    usec: int

    @property
    def usec_per_call(self) -> float:
        return self.usec / self.calls if self.calls else 0.0


async def script_stats(node: RedisNode) -> ScriptStats:
    """Since the last CONFIG RESETSTAT: INFO commandstats's EVALSHA (the store's and the floor's
    scripts all run by their SHA)."""
    stats = (await info(node, "commandstats")).get("cmdstat_evalsha", {})
    return ScriptStats(int(stats.get("calls", 0)), int(stats.get("usec", 0)))


@dataclass(frozen=True, slots=True)
class RedisUnderTest:
    """A topology the run started, with a pooled client as turngate's store makes it."""

    topology: Topology
    client: Client

    @property
    def name(self) -> str:
        return self.topology.kind

    @property
    def masters(self) -> tuple[RedisNode, ...]:
        return self.topology.primaries

    def keyspace(self, prefix: str, buckets: int = BUCKETS) -> Keyspace:
        return Keyspace(prefix=prefix, buckets=buckets)

    def store(self, prefix: str) -> RedisStore:
        return RedisStore(self.client, self.keyspace(prefix), retention=EVENT_RETENTION)

    async def used_memory(self, *, replicas: bool = False) -> int:
        return await used_memory(self.topology.replicas if replicas else self.masters)

    async def key_bytes(self, key: str) -> int:
        """MEMORY USAGE of `key`, every element of it counted (SAMPLES 0)."""
        return int(await self.client.execute_command("MEMORY", "USAGE", key, "SAMPLES", "0"))

    async def session_bytes(self, keys: Keyspace, key: SessionKey) -> tuple[int, int]:
        """MEMORY USAGE of the session's document and of its log."""
        return await self.key_bytes(keys.doc(key)), await self.key_bytes(keys.log(key))

    async def bucket_bytes(self, keys: Keyspace, name: str) -> int:
        """MEMORY USAGE of one per-bucket key (`deadlines`, `active`, `outbox`), summed over buckets."""
        return sum([await self.key_bytes(getattr(keys, name)(bucket)) for bucket in keys.all_buckets()])

    async def empty_outboxes(self, keys: Keyspace) -> None:
        """What the projector leaves once it has recorded everything: no outbox entries."""
        for bucket in keys.all_buckets():
            await self.client.xtrim(keys.outbox(bucket), maxlen=0, approximate=False)

    async def reset_stats(self) -> None:
        for node in self.masters:
            await node.query("CONFIG", "RESETSTAT")

    async def script_stats(self) -> ScriptStats:
        """Summed over the masters, since reset_stats."""
        each = [await script_stats(node) for node in self.masters]
        return ScriptStats(sum(s.calls for s in each), sum(s.usec for s in each))
