"""What the watchdog and ListActiveSessions cost as sessions grow: each read timed alone, in this
process, against the store's own Redis calls (no gRPC)."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable

from turngate.service.store.redis.store import RedisStore
from turngate.service.watchdog import Watchdog

from measure import sequential
from redis_memory import RedisUnderTest
from report import Figure
from workload import PROJECT, for_each, hold_turn, session_keys

REPEATS = 50
WARMUP = 5
# The watchdog's batch (watchdog.py's default) and ListActiveSessions' default page.
DUE_BATCH = 100
PAGE = 50


async def p50_ms(call: Callable[[], Awaitable[object]]) -> float:
    latency = await sequential(itertools.repeat(call), REPEATS, WARMUP)
    return latency.p50


async def sweep_figures(store: RedisStore, where: str, idle: int) -> list[Figure]:
    """One watchdog pass with nothing due, and its two reads, with `idle` idle sessions stored."""
    watchdog = Watchdog(store, batch=DUE_BATCH)
    now = await store.now()
    label = f"at {idle:,} idle"
    return [
        Figure(
            "sweep",
            where,
            f"store.due(now, {DUE_BATCH}) p50, {label}",
            await p50_ms(lambda: store.due(now, DUE_BATCH)),
            "ms",
        ),
        Figure(
            "sweep", where, f"store.next_deadline() p50, {label}", await p50_ms(store.next_deadline), "ms"
        ),
        Figure(
            "sweep",
            where,
            f"one watchdog pass (nothing due) p50, {label}",
            await p50_ms(watchdog.sweep),
            "ms",
        ),
    ]


async def list_phase(redis: RedisUnderTest, live_counts: tuple[int, ...]) -> list[Figure]:
    """ListActiveSessions' store reads (a page, and the count) as running sessions grow."""
    store = redis.store("list")
    figures: list[Figure] = []
    made = 0
    for live in live_counts:
        await for_each(session_keys("live", range(made, live)), lambda key: hold_turn(store, key))
        made = live
        page = await p50_ms(lambda: store.active(PROJECT, None, PAGE))
        count = await p50_ms(store.count_active)
        figures += [
            Figure("list", redis.name, f"ListActiveSessions page of {PAGE} p50, {live:,} live", page, "ms"),
            Figure("list", redis.name, f"count of active sessions p50, {live:,} live", count, "ms"),
        ]
    return figures
