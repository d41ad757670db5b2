"""A capacity model, measured: `python bench/capacity.py [--quick | --full] [--phase NAME]`.

Loads Redis servers the run starts for itself (a standalone server, and a Redis Cluster of 3
masters each with a replica, on ports of `--ports`) with sessions, and reports what they cost:
Redis bytes per idle and per running session and per log event, a shard's operations per second
against its floor, the watchdog's sweep and ListActiveSessions as sessions grow, the ledger's rows
and bytes per turn (PostgreSQL, and the embedded store's SQLite file), the spread of sessions over
masters for several bucket counts, and, where this build retires idle sessions, what is left after.
bench/README.md says how each figure is taken; docs/capacity.md turns them into sizing.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import subprocess
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

from turngate.service.store.redis.connection import connect

from bucket_spread import buckets_phase
from environment import drop_database, host_facts, load_average
from ledger_size import fresh_ledger, ledger_phase, sqlite_figures
from memory_phases import GIB, IdleLadder, active_phase, idle_phase, log_phase
from redis_memory import RedisUnderTest
from report import Figure, facts_lines, figures_table, progress, run_benchmark, write_json
from retention import retention_phase
from servers import HERE
from shard_ops import ops_phase
from sweeps import list_phase
from topologies import Topology, start_cluster, start_private
from workload import Shape

TOPOLOGIES = ("standalone", "cluster")
# Phases run on each topology, in this order (idle last: it fills Redis the most).
REDIS_PHASES = ("log", "active", "ops", "list", "idle")
# Phases run once.
OTHER_PHASES = ("buckets", "ledger", "retention")
PHASES = (*REDIS_PHASES, *OTHER_PHASES)
DATABASE = "capacity_bench"
REDIS_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class Scale:
    """How much a mode loads."""

    idle: tuple[int, ...]
    active: int
    live: tuple[int, ...]
    ledger_sessions: int
    retired: int
    ops_seconds: float


QUICK = Scale((1_000, 10_000), 2_000, (100, 1_000), 200, 1_000, 3.0)
FULL = Scale((10_000, 100_000, 1_000_000), 20_000, (100, 1_000, 10_000), 1_000, 10_000, 5.0)


@dataclass(frozen=True, slots=True)
class Options:
    mode: str
    scale: Scale
    phases: tuple[str, ...]
    topologies: tuple[str, ...]
    ports: range
    postgres: str
    budget: int
    json: str


def port_range(text: str) -> range:
    first, last = (int(part) for part in text.split("-", 1))
    return range(first, last + 1)


def parse_options(argv: Sequence[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument(
        "--quick", dest="mode", action="store_const", const="quick", help="up to 10k sessions (default)"
    )
    modes.add_argument("--full", dest="mode", action="store_const", const="full", help="up to 1M sessions")
    add("--phase", action="append", choices=PHASES, help="run this phase only (repeatable; default: all)")
    add("--topology", action="append", choices=TOPOLOGIES, help="Redis topologies (default: both)")
    add(
        "--ports",
        type=port_range,
        default=port_range("23000-23999"),
        help="ports for the run's Redis servers",
    )
    add("--postgres", default="postgresql://postgres@127.0.0.1:5432", help="server for the ledger database")
    add("--memory-budget", type=float, default=12.0, metavar="GIB", help="Redis memory the run may fill")
    add("--json", default="capacity.json", help="where the figures go as JSON (default: %(default)s)")
    args = parser.parse_args(argv)
    mode = args.mode or "quick"
    return Options(
        mode,
        FULL if mode == "full" else QUICK,
        tuple(args.phase or PHASES),
        tuple(args.topology or TOPOLOGIES),
        args.ports,
        args.postgres,
        int(args.memory_budget * GIB),
        args.json,
    )


def commit() -> str:
    done = subprocess.run(
        ["git", "-C", str(HERE), "describe", "--always", "--dirty"], capture_output=True, text=True
    )
    return done.stdout.strip() or "unknown"


StartTopology = Callable[[AsyncExitStack, Path, range], Awaitable[Topology]]
STARTERS: dict[str, StartTopology] = {"standalone": start_private, "cluster": start_cluster}


async def redis_phases(opts: Options, kind: str, root: Path, ledger: str) -> list[Figure]:
    """The Redis phases on a fresh topology of `kind`, thrown away after."""
    async with AsyncExitStack() as stack:
        topology = await STARTERS[kind](stack, root / kind, opts.ports)
        redis = RedisUnderTest(topology, connect(topology.url, REDIS_TIMEOUT_S))
        stack.push_async_callback(redis.client.aclose)
        progress(topology.description)
        shape, scale = Shape(), opts.scale
        runs: dict[str, Callable[[], Awaitable[list[Figure]]]] = {
            "log": lambda: log_phase(redis, shape),
            "active": lambda: active_phase(redis, scale.active),
            "ops": lambda: ops_phase(redis, scale.ops_seconds),
            "list": lambda: list_phase(redis, scale.live),
            "idle": lambda: idle_phase(redis, IdleLadder(scale.idle, shape, opts.budget, ledger)),
            "buckets": lambda: buckets_phase(redis, scale.idle[-1]),
        }
        wanted = [name for name in (*REDIS_PHASES, "buckets") if name in opts.phases]
        if kind != "cluster":
            wanted = [name for name in wanted if name != "buckets"]
        figures: list[Figure] = []
        for name in wanted:
            progress(f"{kind}: phase {name}")
            figures += await runs[name]()
        await topology.check_roles()
        return figures


async def ledger_phases(opts: Options, root: Path) -> list[Figure]:
    """PostgreSQL through a Redis store of its own; SQLite through the embedded store."""
    async with AsyncExitStack() as stack:
        topology = await start_private(stack, root / "ledger", opts.ports)
        redis = RedisUnderTest(topology, connect(topology.url, REDIS_TIMEOUT_S))
        stack.push_async_callback(redis.client.aclose)
        sessions = opts.scale.ledger_sessions
        postgres = await ledger_phase(redis, opts.postgres, DATABASE, sessions, Shape())
    return [*postgres, *await sqlite_figures(root, sessions, Shape())]


async def run(opts: Options, root: Path) -> list[Figure]:
    ledger = await fresh_ledger(opts.postgres, DATABASE)
    figures: list[Figure] = []
    for kind in opts.topologies:
        if any(name in opts.phases for name in (*REDIS_PHASES, "buckets")):
            figures += await redis_phases(opts, kind, root, ledger)
    if "ledger" in opts.phases:
        figures += await ledger_phases(opts, root)
    if "retention" in opts.phases:
        async with AsyncExitStack() as stack:
            figures += await retention_phase(
                stack, root, opts.ports, opts.postgres, DATABASE, opts.scale.retired
            )
    return figures


async def main(opts: Options) -> None:
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    facts = [*host_facts(), ("commit", commit()), ("mode", opts.mode)]
    print(facts_lines(facts))
    with tempfile.TemporaryDirectory(prefix="tgbench-capacity-") as folder:
        try:
            figures = await run(opts, Path(folder))
        finally:
            await drop_database(f"{opts.postgres}/postgres", DATABASE)
    facts.append(("load average at end", load_average()))
    print(figures_table(f"Capacity ({opts.mode})", figures))
    print(f"load average at end: {load_average()}")
    write_json(opts.json, facts, figures)
    progress(f"figures written to {opts.json}")


if __name__ == "__main__":
    run_benchmark(main(parse_options()))
