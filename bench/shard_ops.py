"""What a shard (a master) can take: its floor, a trivial script by its SHA, pipelined over several
connections; against AdmitTurn + CompleteTurn through the store in this process, many callers at
once. This process's Python is the limit on 2 cores, so besides the calls per second each side
reaches, Redis's own CPU per script run says what one shard's core could serve."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from redis.asyncio import Redis

from measure import Call, CpuMeter, Throughput, concurrent
from redis_memory import RedisUnderTest, ScriptStats, script_stats
from report import Figure, progress
from topologies import RedisNode, cpu_of
from workload import CALLERS, admit_and_complete, session_key

FLOOR_SCRIPT = "return 1"
FLOOR_CONNECTIONS = 8
FLOOR_DEPTH = 64
WARMUP_S = 0.5
US = 1_000_000


def redis_cpu(nodes: tuple[RedisNode, ...]) -> dict[str, CpuMeter]:
    async def meter() -> float:
        return cpu_of(nodes)

    return {"redis": meter}


def floor_calls(client: Redis, sha: str) -> Iterator[Call]:
    """Endless pipelines of FLOOR_DEPTH runs of the floor's script, on `client`'s one connection."""

    async def pipeline() -> None:
        async with client.pipeline(transaction=False) as pipe:
            for _ in range(FLOOR_DEPTH):
                pipe.evalsha(sha, 0)
            await pipe.execute()

    return itertools.repeat(pipeline)


async def floor(node: RedisNode, seconds: float) -> tuple[Throughput, ScriptStats]:
    clients = [node.client() for _ in range(FLOOR_CONNECTIONS)]
    try:
        sha = await clients[0].script_load(FLOOR_SCRIPT)
        await node.query("CONFIG", "RESETSTAT")
        rate = await concurrent([floor_calls(c, sha) for c in clients], seconds, redis_cpu((node,)), WARMUP_S)
        return rate, await script_stats(node)
    finally:
        for client in clients:
            await client.aclose()


def store_calls(redis: RedisUnderTest, caller: int) -> Iterator[Call]:
    """Endless AdmitTurn + CompleteTurn pairs, each on a new session of this caller's own."""
    store = redis.store("ops")
    for index in itertools.count():
        key = session_key(f"ops{caller:03d}", index)
        yield lambda key=key: admit_and_complete(store, key)  # type: ignore[misc]


async def through_store(redis: RedisUnderTest, seconds: float) -> tuple[Throughput, ScriptStats]:
    await redis.reset_stats()
    callers = [store_calls(redis, caller) for caller in range(CALLERS)]
    rate = await concurrent(callers, seconds, redis_cpu(redis.masters), WARMUP_S)
    return rate, await redis.script_stats()


async def ops_phase(redis: RedisUnderTest, seconds: float) -> list[Figure]:
    where, shards = redis.name, len(redis.masters)
    progress(f"{where}: the floor, then AdmitTurn + CompleteTurn through the store, {seconds:.0f} s each")
    floor_rate, floor_stats = await floor(redis.masters[0], seconds)
    floor_ops = floor_rate.calls * FLOOR_DEPTH
    floor_cpu = floor_rate.cpu["redis"] / floor_ops * US
    store_rate, store_stats = await through_store(redis, seconds)
    store_ops = store_rate.calls * 2
    store_cpu = store_rate.cpu["redis"] / store_ops * US
    return [
        Figure("ops", where, "floor: bare EVALSHA ops/s, one shard", floor_ops / floor_rate.seconds, "ops/s"),
        Figure("ops", where, "floor: Redis CPU per op", floor_cpu, "us"),
        Figure("ops", where, "floor: commandstats usec_per_call", floor_stats.usec_per_call, "us"),
        Figure(
            "ops",
            where,
            f"store: Admit+Complete writes/s, {shards} shard(s)",
            store_ops / store_rate.seconds,
            "ops/s",
        ),
        Figure("ops", where, "store: writes/s per shard", store_ops / store_rate.seconds / shards, "ops/s"),
        Figure("ops", where, "store: Redis CPU per write", store_cpu, "us"),
        Figure("ops", where, "store: commandstats usec_per_call", store_stats.usec_per_call, "us"),
        Figure(
            "ops", where, "store: script runs per write (retries)", store_stats.calls / max(1, store_ops), "x"
        ),
        Figure("ops", where, "store / floor, Redis CPU per op", store_cpu / floor_cpu, "x"),
        Figure("ops", where, "one shard's core, at the store's CPU per write", US / store_cpu, "writes/s"),
    ]
