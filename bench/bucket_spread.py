"""How sessions spread over a cluster's masters for each TURNGATE_REDIS_BUCKETS: a session's bucket is
keys.py's hash of its name, a bucket's slot the CRC16 of its `{bucket}` hash tag, and a slot's
master what the run's cluster says (CLUSTER SLOTS)."""

from __future__ import annotations

from collections import Counter

from redis.crc import key_slot

from turngate.service.store.redis.keys import Keyspace
from turngate.service.store.redis.store import RedisStore
from turngate.service.watchdog import Watchdog

from redis_memory import EVENT_RETENTION, RedisUnderTest
from report import Figure
from sweeps import p50_ms
from workload import session_keys

BUCKET_COUNTS = (16, 64, 256, 1_024)


async def slot_owners(redis: RedisUnderTest) -> dict[int, int]:
    """Each slot's master, by port, as the first master sees the slot map."""
    ranges = await redis.masters[0].query("CLUSTER", "SLOTS")
    return {slot: int(r[2][1]) for r in ranges for slot in range(int(r[0]), int(r[1]) + 1)}


def imbalance(counts: Counter[int], parts: int) -> float:
    """The fullest part over the mean (1.0: even), over `parts` parts (the empty ones included)."""
    return max(counts.values()) / (sum(counts.values()) / parts)


def spread(buckets: int, sessions: int, owners: dict[int, int], masters: int) -> tuple[float, float]:
    """The busiest master's and the busiest bucket's share over the mean, for `sessions` sessions."""
    keys = Keyspace(prefix="tg", buckets=buckets)
    per_bucket = Counter(keys.bucket(key) for key in session_keys("idle", range(sessions)))
    master_of = {bucket: owners[key_slot(keys.deadlines(bucket).encode())] for bucket in keys.all_buckets()}
    per_master: Counter[int] = Counter()
    for bucket, count in per_bucket.items():
        per_master[master_of[bucket]] += count
    return imbalance(per_master, masters), imbalance(per_bucket, buckets)


async def buckets_phase(redis: RedisUnderTest, sessions: int) -> list[Figure]:
    owners = await slot_owners(redis)
    masters = len(redis.masters)
    figures: list[Figure] = []
    for buckets in BUCKET_COUNTS:
        by_master, by_bucket = spread(buckets, sessions, owners, masters)
        label = f"{buckets} buckets, {sessions:,} sessions"
        figures.append(
            Figure("buckets", redis.name, f"busiest of {masters} masters / mean, {label}", by_master, "x")
        )
        figures.append(Figure("buckets", redis.name, f"busiest bucket / mean, {label}", by_bucket, "x"))
        figures.append(await sweep_cost(redis, buckets))
    return figures


async def sweep_cost(redis: RedisUnderTest, buckets: int) -> Figure:
    """One watchdog pass with nothing due over `buckets` buckets: one command per bucket."""
    store = RedisStore(redis.client, redis.keyspace(f"sweep{buckets}", buckets), retention=EVENT_RETENTION)
    pass_ms = await p50_ms(Watchdog(store).sweep)
    return Figure(
        "buckets", redis.name, f"one watchdog pass (nothing due) p50, {buckets} buckets", pass_ms, "ms"
    )
