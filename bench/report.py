"""The printed result: plain-text tables, each figure next to its floor and its target."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Coroutine, Sequence
from dataclasses import asdict, dataclass
from typing import Any, NoReturn

from measure import Latency, Throughput


@dataclass(frozen=True, slots=True)
class Measured:
    """One RPC: its latency with one caller and its throughput with many."""

    name: str
    latency: Latency
    throughput: Throughput


# The environment variable naming where target_table also appends its targets.
TARGETS_FILE = "TURNGATE_BENCH_TARGETS"


@dataclass(frozen=True, slots=True)
class Target:
    """`measured` must be at most `limit` (at least, with `at_least`)."""

    name: str
    measured: float
    limit: float
    unit: str
    at_least: bool = False

    @property
    def passed(self) -> bool:
        return self.measured >= self.limit if self.at_least else self.measured <= self.limit


def progress(message: str) -> None:
    """A timestamped line on stderr, while the tables wait for the end of the run on stdout."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run_benchmark(main: Coroutine[Any, Any, int | None]) -> NoReturn:
    """Runs a benchmark's `main` and exits with its code (0 for None), or 130 once interrupted
    (Ctrl-C): `main` cleans up its servers as it unwinds."""
    try:
        code = asyncio.run(main)
    except (asyncio.CancelledError, KeyboardInterrupt):
        progress("interrupted; cleaned up")
        sys.exit(130)
    sys.exit(code or 0)


def table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A titled table: first column left-aligned, the others right-aligned."""
    widths = [max(len(row[i]) for row in (headers, *rows)) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        first, *rest = cells
        return "  ".join(
            [first.ljust(widths[0]), *(c.rjust(w) for c, w in zip(rest, widths[1:], strict=True))]
        )

    rule = "-" * len(line(headers))
    return "\n".join([title, rule, line(headers), rule, *(line(row) for row in rows), ""])


def fmt_ms(value: float) -> str:
    return f"{value:.3f}" if value < 10 else f"{value:.1f}"


def fmt_times(value: float) -> str:
    return f"{value:.2f}x"


def latency_table(
    floor_empty: Measured, floor_redis: Measured, ops: Sequence[Measured], floor_name: str = "redis-floor"
) -> str:
    """Each row against the floor (`floor_redis`, named `floor_name`) and the empty call."""

    def row(m: Measured) -> list[str]:
        lat = m.latency
        return [
            m.name,
            str(lat.n),
            fmt_ms(lat.p50),
            fmt_ms(lat.p99),
            fmt_times(lat.p50 / floor_redis.latency.p50),
            fmt_times(lat.p99 / floor_redis.latency.p99),
            fmt_times(lat.p50 / floor_empty.latency.p50),
            f"{lat.cpu_us_per_call('server'):.0f}",
        ]

    headers = ["1 caller, sequential", "n", "p50 ms", "p99 ms", f"p50/{floor_name}", f"p99/{floor_name}"]
    headers += ["p50/empty", "server CPU us/call"]
    return table("Latency", headers, [row(m) for m in (floor_empty, floor_redis, *ops)])


def throughput_table(
    callers: int,
    floor_empty: Measured,
    floor_redis: Measured,
    ops: Sequence[Measured],
    floor_name: str = "redis-floor",
) -> str:
    roles = list(floor_empty.throughput.cpu)

    def row(m: Measured) -> list[str]:
        rate = m.throughput.per_s
        cpu = [f"{m.throughput.cpu_us_per_call(role):.0f}" for role in roles]
        return [
            m.name,
            f"{rate:,.0f}",
            fmt_times(rate / floor_redis.throughput.per_s),
            fmt_times(rate / floor_empty.throughput.per_s),
            *cpu,
        ]

    headers = [f"{callers} callers, distinct sessions", "calls/s", f"of {floor_name}", "of empty", *roles]
    title = "Throughput (then CPU microseconds per call, by process)"
    return table(title, headers, [row(m) for m in (floor_empty, floor_redis, *ops)])


def push_table(pushes: Sequence[tuple[str, Latency]]) -> str:
    """Where CPU was metered (the fan-out), the last columns are CPU microseconds per delivery."""
    roles = ("server", "client")

    def row(name: str, lat: Latency) -> list[str]:
        cpu = [f"{lat.cpu_us_per_call(role):.0f}" if role in lat.cpu else "-" for role in roles]
        return [name, str(lat.n), fmt_ms(lat.p50), fmt_ms(lat.p99), fmt_ms(lat.max), *cpu]

    headers = ["WatchSession push", "n", "p50 ms", "p99 ms", "max ms", *(f"{r} CPU us" for r in roles)]
    return table("Push latency", headers, [row(name, lat) for name, lat in pushes])


def target_table(targets: Sequence[Target]) -> str:
    """The Targets table; each target is also appended, as a line of JSON, to the file that
    TARGETS_FILE names, if set (bench/targets.py gathers every benchmark's into one table)."""
    if collected := os.environ.get(TARGETS_FILE):
        with open(collected, "a") as out:
            out.writelines(json.dumps(asdict(t)) + "\n" for t in targets)

    def row(t: Target) -> list[str]:
        return [
            t.name,
            f"{t.measured:.2f}{t.unit}",
            f"{'≥' if t.at_least else '≤'} {t.limit:.2f}{t.unit}",
            "PASS" if t.passed else "FAIL",
        ]

    return table("Targets", ["target", "measured", "limit", "result"], [row(t) for t in targets])


@dataclass(frozen=True, slots=True)
class Figure:
    """One measured figure of a run that reports figures rather than latencies (capacity.py)."""

    phase: str
    where: str  # the topology or store it was measured on
    name: str
    value: float | None  # None: not measured (`note` says why)
    unit: str = ""
    note: str = ""


def fmt_value(value: float | None) -> str:
    if value is None:
        return "-"
    if value != value or abs(value) >= 100 or value == int(value):  # NaN, large or whole
        return f"{value:,.0f}"
    return f"{value:.3g}"


def figures_table(title: str, figures: Sequence[Figure]) -> str:
    def row(f: Figure) -> list[str]:
        return [f.phase, f.where, f.name, fmt_value(f.value), f.unit, f.note]

    headers = ["phase", "where", "measured", "value", "unit", "note"]
    return table(title, headers, [row(f) for f in figures])


def write_json(path: str, facts: Sequence[tuple[str, str]], figures: Sequence[Figure]) -> None:
    """The run's facts and figures as one JSON document."""
    document = {"facts": dict(facts), "figures": [asdict(f) for f in figures]}
    with open(path, "w") as out:
        json.dump(document, out, indent=1)
        out.write("\n")


def facts_lines(facts: Sequence[tuple[str, str]]) -> str:
    width = max(len(name) for name, _ in facts)
    return "\n".join(["Machine", *(f"  {name.ljust(width)}  {value}" for name, value in facts), ""])
