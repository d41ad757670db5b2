"""AdmitTurn without gRPC: turngate's handler, core and Redis store in this one process.

`--callers` concurrent callers each make `--calls` AdmitTurn calls on new sessions through the
AdmissionService handler (parsing, deciding, the store's compare-and-set, the commit's listeners:
an event line each, written by its thread as `serve` writes them, here to /dev/null). The floor,
in the same process and at the same concurrency, sends what such an admission sends Redis
(turngate's script with an admission's keys and arguments, `floor_server.ScriptAdmissions`)
through redis-py's client, without deciding anything. Each round runs both; the table gives each
one's best round (the least disturbed by other work on the machine), as CPU microseconds per call
of this process (threads included) and calls/s, and turngate against the floor. This is the
measure for a change to the store's hot path: grpc's own cost, and its spread between runs, are
not in it (docs/performance.md). Needs Redis at `--redis` (keys under a prefix of the run,
removed at the end).

A second table times the watchdog's batch: `--batch` turns whose leases have passed, settled at
once as the watchdog settles them (an Expire each, `at_once.count_at_once`), against as many of
the floor's script calls sent at once; CPU microseconds per settlement and the batch's
milliseconds, each one's best round.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from redis.asyncio import Redis

from turngate.service.api.admission import AdmissionService
from turngate.service.api.policy import Policy
from turngate.service.at_once import count_at_once
from turngate.service.config import Settings
from turngate.service.core import Admit, Expire, SessionKey
from turngate.service.store.redis.connection import connect
from turngate.service.store.redis.keys import Keyspace
from turngate.service.store.redis.script import CAS, CAS_SHA
from turngate.service.store.redis.store import RedisStore
from turngate.service.telemetry import logs
from turngate.v1 import turngate_pb2 as pb

from floor_server import ScriptAdmissions
from report import fmt_times, progress, run_benchmark, table

Call = Callable[[int, int], Awaitable[Any]]
BATCH_FLOOR = "floor: as many scripts at once"
# The lease of the turns the watchdog's batch settles (µs): short, so that it has passed at once.
LEASE_US = 20_000


class _Context:
    """What the handler reads of a gRPC call's context: no metadata, a deadline set."""

    def invocation_metadata(self) -> tuple[()]:
        return ()

    def time_remaining(self) -> float:
        return 5.0

    async def abort(self, code: object, details: str) -> None:
        raise RuntimeError(f"refused: {code} {details}")


async def _round(call: Call, callers: int, calls: int) -> tuple[float, float]:
    """CPU µs per call and calls/s of `callers` concurrent callers making `calls` calls each."""

    async def caller(number: int) -> None:
        for index in range(calls):
            await call(number, index)

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(caller(number) for number in range(callers)))
    total = callers * calls
    return (time.process_time() - cpu) / total * 1e6, total / (time.perf_counter() - wall)


async def _batch(batch: Awaitable[object], size: int) -> tuple[float, float]:
    """CPU µs per step and the batch's ms, of `batch`, `size` steps run at once."""
    cpu, wall = time.process_time(), time.perf_counter()
    await batch
    return (time.process_time() - cpu) / size * 1e6, (time.perf_counter() - wall) * 1e3


async def _unlink(client: Redis, prefix: str) -> None:
    batch: list[bytes] = []
    async for key in client.scan_iter(match=f"{prefix}*", count=5_000):
        batch.append(key)
        if len(batch) == 5_000:
            await client.unlink(*batch)
            batch.clear()
    if batch:
        await client.unlink(*batch)


def log_events_to_nowhere() -> None:
    """Event lines at INFO, written by their thread as `serve` writes them, to /dev/null (open
    for the process's life)."""
    with contextlib.redirect_stderr(open(os.devnull, "w")):
        logs.configure("INFO", "text")


async def main(options: argparse.Namespace) -> None:
    settings = Settings()
    prefix = f"bench-store-path-{uuid.uuid4().hex[:8]}"
    store = RedisStore(
        connect(options.redis, settings.redis_timeout),
        Keyspace(prefix, settings.redis_buckets),
        retention=settings.event_retention,
    )
    store.add_listener(logs.log_events)
    admission = AdmissionService(store, Policy.from_settings(settings))
    context = _Context()
    floor = Redis.from_url(options.redis)
    await floor.script_load(CAS)
    script = ScriptAdmissions(f"{prefix}-floor")
    run = iter(range(1_000_000_000))

    async def admit(caller: int, index: int) -> object:
        ref = pb.SessionRef(project_id="bench", session_id=f"s-{next(run)}")
        request = pb.AdmitTurnRequest(session=ref, turn_id="turn-1", runner_id="bench-runner")
        return await admission.AdmitTurn(request, context)  # type: ignore[arg-type]  # its context's parts

    async def floor_script(caller: int, index: int) -> object:
        keys, args = script.next()
        return await floor.evalsha(CAS_SHA, len(keys), *keys, *args)

    async def due_sessions(size: int) -> list[SessionKey]:
        """`size` sessions whose turn's lease has passed."""
        keys = [SessionKey("bench", f"due-{next(run)}") for _ in range(size)]
        await asyncio.gather(*(store.apply(key, Admit("turn-1", "bench-runner", LEASE_US)) for key in keys))
        await asyncio.sleep(2 * LEASE_US / 1e6)
        return keys

    async def settle(key: SessionKey) -> bool:
        return (await store.apply(key, Expire())).changed

    async def settle_batch(size: int) -> tuple[float, float]:
        keys = await due_sessions(size)
        return await _batch(count_at_once(keys, settle), size)

    async def floor_batch(size: int) -> tuple[float, float]:
        return await _batch(asyncio.gather(*(floor_script(0, index) for index in range(size))), size)

    best: dict[str, tuple[float, float]] = {}
    batches: dict[str, tuple[float, float]] = {}
    try:
        await _round(admit, 4, 50)  # connections made, the clock calibrated, the code warm
        await _round(floor_script, 4, 50)
        for number in range(options.rounds):
            progress(f"round {number + 1} of {options.rounds}")
            for name, call in (("floor: turngate's script, redis-py", floor_script), ("AdmitTurn", admit)):
                cpu, rate = await _round(call, options.callers, options.calls)
                was = best.get(name, (float("inf"), 0.0))
                best[name] = (min(was[0], cpu), max(was[1], rate))
            for name, batch in ((BATCH_FLOOR, floor_batch), ("settlements", settle_batch)):
                cpu, ms = await batch(options.batch)
                was = batches.get(name, (float("inf"), float("inf")))
                batches[name] = (min(was[0], cpu), min(was[1], ms))
    finally:
        await _unlink(floor, prefix)
        await floor.aclose()
        await store.close()
    floor_cpu, floor_rate = best["floor: turngate's script, redis-py"]
    rows = [
        [name, f"{cpu:,.0f}", fmt_times(cpu / floor_cpu), f"{rate:,.0f}", fmt_times(rate / floor_rate)]
        for name, (cpu, rate) in best.items()
    ]
    headers = [f"{options.callers} callers, in process", "CPU µs/call", "of floor", "calls/s", "of floor"]
    print(table(f"Best of {options.rounds} rounds", headers, rows))
    floor_cpu, floor_ms = batches[BATCH_FLOOR]
    rows = [
        [name, f"{cpu:,.0f}", fmt_times(cpu / floor_cpu), f"{ms:,.1f}", fmt_times(ms / floor_ms)]
        for name, (cpu, ms) in batches.items()
    ]
    headers = [f"a batch of {options.batch}, in process", "CPU µs each", "of floor", "batch ms", "of floor"]
    print(table(f"The watchdog's batch, best of {options.rounds} rounds", headers, rows))


def parse_options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--redis", default="redis://127.0.0.1:6379", help="the Redis to use")
    parser.add_argument("--callers", type=int, default=64, help="concurrent callers")
    parser.add_argument("--calls", type=int, default=150, help="calls per caller per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of both (each figure's best is kept)")
    parser.add_argument("--batch", type=int, default=100, help="turns settled at once (the watchdog's batch)")
    return parser.parse_args()


if __name__ == "__main__":
    chosen = parse_options()
    log_events_to_nowhere()
    run_benchmark(main(chosen))
