"""Timing: latency of one caller's sequential calls, throughput of many concurrent callers.

A call is a zero-argument coroutine function; a caller is an iterator of calls (finite or not), so
the same timing code drives the floor server and turngate alike.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

Call = Callable[[], Awaitable[object]]
T = TypeVar("T")
# The CPU seconds one process has used so far.
CpuMeter = Callable[[], Awaitable[float]]
MS = 1_000.0
US = 1_000_000.0


def percentile(samples: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of `samples` (which need not be sorted)."""
    ordered = sorted(samples)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True, slots=True)
class Latency:
    """Samples in seconds; the properties are in milliseconds. With the CPU seconds each metered
    process used meanwhile, by role."""

    samples: list[float]
    cpu: Mapping[str, float] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def p50(self) -> float:
        return percentile(self.samples, 50) * MS

    @property
    def p99(self) -> float:
        return percentile(self.samples, 99) * MS

    @property
    def max(self) -> float:
        return max(self.samples) * MS

    def cpu_us_per_call(self, role: str) -> float:
        return self.cpu[role] / self.n * US


async def client_cpu() -> float:
    """A CpuMeter of this process (the bench client)."""
    return time.process_time()


async def cpu_now(meters: Mapping[str, CpuMeter]) -> dict[str, float]:
    """What each meter reads now, by role."""
    return {role: await meter() for role, meter in meters.items()}


def cpu_used(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    return {role: after[role] - before[role] for role in before}


async def sequential(
    calls: Iterator[Call], n: int, warmup: int, meters: Mapping[str, CpuMeter] | None = None
) -> Latency:
    """One caller: `warmup` untimed calls, then `n` timed ones, one after the other."""
    for call in itertools.islice(calls, warmup):
        await call()
    samples = []
    before = await cpu_now(meters or {})
    for call in itertools.islice(calls, n):
        start = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - start)
    if len(samples) < n:
        raise RuntimeError(f"the caller ran out of calls after {len(samples)} of {n}")
    return Latency(samples, cpu_used(before, await cpu_now(meters or {})))


async def in_turn(
    callers: Sequence[Iterator[Call]], n: int, warmup: int, meters: Sequence[Mapping[str, CpuMeter]]
) -> list[Latency]:
    """One caller making the calls of each of `callers` in turn, one call of each then again (each
    turn starting with the next caller, so none is always first): `warmup` untimed turns, then `n`
    timed. Their latencies, in order, each with what its meters read meanwhile (so each caller's
    meters should meter a process only that caller uses). Drift on the machine touches them all
    alike, to the millisecond, as sequential runs one after the other cannot."""
    count = len(callers)
    for turn in range(warmup):
        for k in range(count):
            await next(callers[(turn + k) % count])()
    before = [await cpu_now(m) for m in meters]
    samples: list[list[float]] = [[] for _ in callers]
    for turn in range(n):
        for k in range(count):
            which = (turn + k) % count
            call = next(callers[which])
            start = time.perf_counter()
            await call()
            samples[which].append(time.perf_counter() - start)
    after = [await cpu_now(m) for m in meters]
    return [Latency(timed, cpu_used(b, a)) for timed, b, a in zip(samples, before, after, strict=True)]


@dataclass
class Row:
    """A table row's samples gathered over rounds, with each round's p50 and the CPU metered."""

    name: str
    # The row its p50 is divided by, round by round (paired).
    paired_with: str | None = None
    samples: list[float] = field(default_factory=list, init=False)
    # Each round's p50 (ms), for ratios paired round by round.
    round_p50s: list[float] = field(default_factory=list, init=False)
    cpu: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float), init=False)

    def record(self, latency: Latency) -> None:
        """One round's samples."""
        self.samples += latency.samples
        self.round_p50s.append(latency.p50)
        for role, seconds in latency.cpu.items():
            self.cpu[role] += seconds

    @property
    def latency(self) -> Latency:
        return Latency(self.samples, dict(self.cpu))


@dataclass(kw_only=True)
class Contender(Row):
    """A row of endless calls, timed a slice at a time over rounds (run_round: alone, or in turn
    with the other rows of its unit)."""

    calls: Iterator[Call]
    # What a slice of it meters: processes only this row's calls use meanwhile, when timed alone.
    meters: Mapping[str, CpuMeter]
    # Timed in turn with another server's calls: slower than alone (each server waits between
    # calls), so compared only with the rows of its unit.
    in_turn: bool = False


async def run_slice(unit: Sequence[Contender], calls: int, warmup: int) -> None:
    """A round's slice of one contender, or of several in turn (a call of each, then again)."""
    latencies = await in_turn([row.calls for row in unit], calls, warmup, [row.meters for row in unit])
    for row, latency in zip(unit, latencies, strict=True):
        row.record(latency)


async def _nothing() -> None:
    return None


async def run_round(
    units: Sequence[Sequence[Contender]],
    round_index: int,
    calls: int,
    warmup: int,
    before_slice: Callable[[], Awaitable[None]] = _nothing,
) -> None:
    """One round: a slice of each unit, after `before_slice`; each round starts with another unit,
    so drift on the machine spreads over all of them and none is always first."""
    for unit in rotated(units, round_index):
        await before_slice()
        await run_slice(unit, calls, warmup)


def rotated(items: Sequence[T], round_index: int) -> list[T]:
    """`items` starting with another one each round."""
    start = round_index % len(items)
    return [*items[start:], *items[:start]]


def paired(row: Row, other: Row) -> list[float]:
    """`row`'s p50 over `other`'s, round by round, sorted."""
    return sorted(a / b for a, b in zip(row.round_p50s, other.round_p50s, strict=True))


async def _drive(calls: Iterator[Call], deadline: float) -> int:
    done = 0
    for call in calls:
        if time.perf_counter() >= deadline:
            break
        await call()
        done += 1
    return done


@dataclass(frozen=True, slots=True)
class Throughput:
    calls: int
    seconds: float
    # CPU seconds each metered process used meanwhile, by role.
    cpu: Mapping[str, float]

    @property
    def per_s(self) -> float:
        return self.calls / self.seconds

    def cpu_us_per_call(self, role: str) -> float:
        return self.cpu[role] / self.calls * US


async def concurrent(
    callers: Sequence[Iterator[Call]], seconds: float, meters: Mapping[str, CpuMeter], warmup: float
) -> Throughput:
    """All `callers` at once, untimed for `warmup` seconds (connection pools grow to the load),
    then each calling until `seconds` pass or its calls run out; with the CPU time each of
    `meters` used meanwhile."""
    warm_until = time.perf_counter() + warmup
    await asyncio.gather(*(_drive(calls, warm_until) for calls in callers))
    before = await cpu_now(meters)
    start = time.perf_counter()
    counts = await asyncio.gather(*(_drive(calls, start + seconds) for calls in callers))
    elapsed = time.perf_counter() - start
    after = await cpu_now(meters)
    return Throughput(sum(counts), elapsed, cpu_used(before, after))
