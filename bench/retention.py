"""After retention: a real `turngate serve` (redis mode, with its ledger) told to retire idle
sessions after TURNGATE_IDLE_RETENTION seconds. Sessions run a turn over gRPC and go idle; the
phase waits until Redis holds none of their documents, and reports what Redis still holds per
session (the target is 0: fixed overhead only) and how long retiring them took."""

from __future__ import annotations

import asyncio
import time
from contextlib import AsyncExitStack
from pathlib import Path

from turngate.service.config import Settings
from turngate.v1 import turngate_pb2 as pb

from ledger_size import fresh_ledger
from redis_memory import RedisUnderTest
from report import Figure, progress
from rpcs import Stubs, admit_lease, complete, session
from servers import Run, start_replicas
from topologies import start_private

RETENTION_S = 2
# How long past the retention the phase waits for the last document to go.
MARGIN_S = 60.0
POLL_S = 0.25
CALLERS = 32
PREFIX = "capret"


def has_idle_retention() -> bool:
    return "idle_retention" in Settings.model_fields


async def documents_left(redis: RedisUnderTest) -> int:
    return len([key async for key in redis.client.scan_iter(match=f"{PREFIX}:*:doc:*", count=1_000)])


async def run_turns(stubs: Stubs, sessions: int) -> None:
    """A turn admitted and completed on each of `sessions` new sessions, by CALLERS callers."""

    async def caller(first: int) -> None:
        for index in range(first, sessions, CALLERS):
            lease = await admit_lease(stubs, session(f"retire-{index:08d}"), "turn-0")
            await complete(stubs, lease, pb.TURN_OUTCOME_COMPLETED)

    await asyncio.gather(*(caller(first) for first in range(CALLERS)))


async def retention_phase(
    stack: AsyncExitStack, root: Path, ports: range, postgres: str, database: str, sessions: int
) -> list[Figure]:
    if not has_idle_retention():
        progress("retention: skipped: this build has no idle retention")
        return [
            Figure(
                "retention", "redis", "after retention", None, "", "skipped: this build has no idle retention"
            )
        ]
    topology = await start_private(stack, root / "retention", ports)
    redis = RedisUnderTest(topology, topology.primaries[0].client())
    stack.push_async_callback(redis.client.aclose)
    await fresh_ledger(postgres, database)
    settings = (("TURNGATE_IDLE_RETENTION", str(RETENTION_S)),)
    run = Run(topology.url, postgres, PREFIX, database, root, settings=settings)
    [server] = await start_replicas(stack, run, ("retention",), separate_projector=False)
    base = await redis.used_memory()
    progress(f"retention: {sessions:,} sessions run a turn and go idle")
    await run_turns(server.stubs, sessions)
    idle_at = time.perf_counter()
    held = (await redis.used_memory() - base) / sessions
    left = await documents_left(redis)
    for _ in range(int((RETENTION_S + MARGIN_S) / POLL_S)):
        if not left:
            break
        await asyncio.sleep(POLL_S)
        left = await documents_left(redis)
    retired_after = time.perf_counter() - idle_at
    after = (await redis.used_memory() - base) / sessions
    # Sessions made first may retire before the last is made: `held` counts those still there.
    return [
        Figure(
            "retention", "redis", f"bytes per session held when the last of {sessions:,} went idle", held, "B"
        ),
        Figure("retention", "redis", f"bytes per session left after retention ({RETENTION_S} s)", after, "B"),
        Figure("retention", "redis", "bytes left in all after retention", after * sessions, "B"),
        Figure(
            "retention", "redis", "seconds from the last idle to the last document gone", retired_after, "s"
        ),
        Figure("retention", "redis", "documents left at the end", left),
    ]
