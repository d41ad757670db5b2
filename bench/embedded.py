"""turngate's embedded default (SQLite) against its own floor, measured in one run:
`python bench/embedded.py` (about a minute).

Starts, each in its own process: the floor server (bench/sqlite_floor.py: a bare grpc.aio server
whose method runs one aiosqlite transaction, SELECT a row by key, UPSERT it with a 400-byte value,
COMMIT, under an asyncio.Lock, in WAL with synchronous=NORMAL) and `turngate serve` on a fresh
SQLite file, both in a temporary folder removed at the end. One client times AdmitTurn and
Heartbeat with one caller, then with many callers on distinct sessions, against the floor's method
at the same load; then it settles one turn on each of `--sessions` new sessions and reports the
SQLite file's bytes per such idle session. See bench/README.md for how to read the tables.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import itertools
import os
import signal
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

import grpc

from turngate.v1 import turngate_pb2 as pb

from environment import load_average
from floor_server import EMPTY
from measure import Call, CpuMeter, Latency, Throughput, client_cpu, concurrent, sequential
from report import (
    Measured,
    Target,
    latency_table,
    progress,
    run_benchmark,
    table,
    target_table,
    throughput_table,
)
from rpcs import Caller, floor_calls, session
from servers import HERE, SERVE_FLAGS, TURNGATE, Endpoint, floor_answers, launch, turngate_serving
from sqlite_floor import SQLITE_WRITE

SETTLE_S = 1.0
THROUGHPUT_WARMUP_S = 0.3
# The targets of issue 12, each against the floor measured in the same run.
ADMIT_P50_TARGET = 1.5
HEARTBEAT_P50_TARGET = 1.3
ADMIT_RATE_TARGET = 0.7
OPERATIONS: tuple[tuple[str, Callable[[Caller], Iterator[Call]]], ...] = (
    ("AdmitTurn", Caller.admits),
    ("Heartbeat", Caller.heartbeats),
)


@dataclass(frozen=True, slots=True)
class Options:
    calls: int
    warmup: int
    callers: int
    seconds: float
    sessions: int
    synchronous: str


def parse_options(argv: Sequence[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--calls", type=int, default=2_000, help="timed sequential calls per RPC")
    add("--warmup", type=int, default=200, help="untimed calls before them")
    add("--callers", type=int, default=32, help="concurrent callers for throughput")
    add("--seconds", type=float, default=3.0, help="length of each throughput phase")
    add("--sessions", type=int, default=10_000, help="idle sessions (one settled turn each) for the size")
    add(
        "--synchronous",
        choices=("NORMAL", "FULL"),
        default="NORMAL",
        help="turngate's TURNGATE_SQLITE_SYNCHRONOUS (the floor stays at NORMAL; default: %(default)s)",
    )
    return Options(**vars(parser.parse_args(argv)))


def floor_writes(channel: grpc.aio.Channel, name: str) -> Iterator[Call]:
    """Endless floor writes, each of a new row (`name-0`, `name-1`…), as each AdmitTurn of a
    caller is of a new session."""
    write: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(SQLITE_WRITE)
    return (functools.partial(write, f"{name}-{i}".encode()) for i in itertools.count())


@dataclass
class Bench:
    opts: Options
    database: Path

    def meters(self, server: Endpoint) -> dict[str, CpuMeter]:
        return {**server.meters(), "client": client_cpu}

    async def _one_caller(self, calls: Iterator[Call], server: Endpoint) -> Latency:
        return await sequential(calls, self.opts.calls, self.opts.warmup, self.meters(server))

    async def _many_callers(self, callers: Sequence[Iterator[Call]], server: Endpoint) -> Throughput:
        return await concurrent(callers, self.opts.seconds, self.meters(server), THROUGHPUT_WARMUP_S)

    async def floor(self, floor: Endpoint) -> tuple[Measured, Measured]:
        """The empty call, then the SQLite write: each with 1 caller, then with `callers`."""
        progress("floor: empty gRPC call")
        empty_latency = await self._one_caller(floor_calls(floor.channel, EMPTY), floor)
        empty_callers = [floor_calls(floor.channel, EMPTY) for _ in range(self.opts.callers)]
        empty = Measured(
            "floor: empty gRPC call", empty_latency, await self._many_callers(empty_callers, floor)
        )
        progress("floor: gRPC + 1 SQLite write transaction")
        latency = await self._one_caller(floor_writes(floor.channel, "seq"), floor)
        callers = [floor_writes(floor.channel, f"caller{i}") for i in range(self.opts.callers)]
        write = Measured("floor: gRPC + SQLite txn", latency, await self._many_callers(callers, floor))
        return empty, write

    async def turngate(self, server: Endpoint) -> list[Measured]:
        """Each RPC with 1 caller, then each with `callers` callers (admissions of new sessions,
        then heartbeats of the turns they admitted)."""
        single = Caller(server.stubs, "seq")
        many = [Caller(server.stubs, f"caller{i}") for i in range(self.opts.callers)]
        latencies = {}
        for name, calls in OPERATIONS:
            progress(f"{name}, 1 caller")
            latencies[name] = await self._one_caller(calls(single), server)
        rates = {}
        for name, calls in OPERATIONS:
            progress(f"{name}, {len(many)} callers")
            rates[name] = await self._many_callers([calls(caller) for caller in many], server)
        return [Measured(name, latencies[name], rates[name]) for name, _ in OPERATIONS]

    async def idle_sessions(self, server: Endpoint) -> list[list[str]]:
        """`sessions` new sessions, one turn admitted and completed on each (by `callers` callers at
        once); what each costs the SQLite file."""
        before = database_size(self.database)
        count, stubs = self.opts.sessions, server.stubs
        progress(f"{count} idle sessions, one settled turn each")

        async def settle(prefix: str, indices: range) -> None:
            for i in indices:
                ref = session(f"{prefix}-{i}")
                admitted = await stubs.admission.AdmitTurn(
                    pb.AdmitTurnRequest(session=ref, turn_id="turn-1", runner_id="bench-runner")
                )
                await stubs.admission.CompleteTurn(
                    pb.CompleteTurnRequest(lease=admitted.lease, outcome=pb.TURN_OUTCOME_COMPLETED)
                )

        callers = self.opts.callers
        start = time.perf_counter()
        await asyncio.gather(*(settle("idle", range(c, count, callers)) for c in range(callers)))
        took = time.perf_counter() - start
        after = database_size(self.database)
        document = average_document(self.database, "idle-%")
        used = (after.used - before.used) / count
        on_disk = (after.on_disk - before.on_disk) / count
        return [
            [
                f"{count:,} sessions, one settled turn each",
                f"{used:,.0f}",
                f"{on_disk:,.0f}",
                f"{document:,.0f}",
            ],
            [f"(made in {took:.1f} s: {2 * count / took:,.0f} calls/s)", "", "", ""],
        ]


@dataclass(frozen=True, slots=True)
class Size:
    used: int  # bytes of the database's pages in use (what the WAL holds included)
    on_disk: int  # the main file and its WAL


def database_size(path: Path) -> Size:
    """Read on a connection of its own (a WAL reader: the server's writes go on meanwhile)."""
    conn = sqlite3.connect(path)
    try:
        page_size, pages, free = (
            conn.execute(f"PRAGMA {pragma}").fetchone()[0]
            for pragma in ("page_size", "page_count", "freelist_count")
        )
    finally:
        conn.close()
    wal = path.with_name(path.name + "-wal")
    on_disk = path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    return Size((pages - free) * page_size, on_disk)


def average_document(path: Path, session_pattern: str) -> float:
    """The mean length of the session documents whose ids match `session_pattern` (SQL LIKE)."""
    conn = sqlite3.connect(path)
    try:
        query = "SELECT avg(length(doc)) FROM sessions WHERE session_id LIKE ?"
        return float(conn.execute(query, (session_pattern,)).fetchone()[0] or 0.0)
    finally:
        conn.close()


def targets(floor: Measured, ops: Sequence[Measured]) -> list[Target]:
    admit, heartbeat = (next(m for m in ops if m.name == name) for name in ("AdmitTurn", "Heartbeat"))
    return [
        Target(
            "embedded: AdmitTurn p50 / floor p50",
            admit.latency.p50 / floor.latency.p50,
            ADMIT_P50_TARGET,
            "x",
        ),
        Target(
            "embedded: Heartbeat p50 / floor p50",
            heartbeat.latency.p50 / floor.latency.p50,
            HEARTBEAT_P50_TARGET,
            "x",
        ),
        Target(
            "embedded: AdmitTurn calls/s / floor calls/s",
            admit.throughput.per_s / floor.throughput.per_s,
            ADMIT_RATE_TARGET,
            "x",
            at_least=True,
        ),
    ]


async def main(opts: Options) -> None:
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    print(f"load average at start: {load_average()} (1, 5, 15 min; other work moves the figures)")
    async with AsyncExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tgbench-embedded-")))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TURNGATE_", "OTEL_"))}
        env["TURNGATE_SQLITE_SYNCHRONOUS"] = opts.synchronous
        database = folder / "turngate.db"

        def floor_argv(port: int) -> list[str]:
            return [sys.executable, str(HERE / "sqlite_floor.py"), str(port), str(folder / "floor.db")]

        def turngate_argv(port: int) -> list[str]:
            store = ["--store", f"sqlite+aiosqlite:///{database}"]
            return [TURNGATE, "serve", "--listen", f"127.0.0.1:{port}", *store, *SERVE_FLAGS]

        floor, server = await asyncio.gather(
            launch(stack, "floor", floor_argv, floor_answers, env, folder / "floor.log"),
            launch(stack, "turngate", turngate_argv, turngate_serving, env, folder / "turngate.log"),
        )
        await asyncio.sleep(SETTLE_S)
        bench = Bench(opts, database)
        floor_empty, floor_write = await bench.floor(floor)
        ops = await bench.turngate(server)
        sizes = await bench.idle_sessions(server)
        for endpoint in (floor, server):
            endpoint.process.check_alive()
        floor_name = "sqlite-floor"
        print(
            "\n".join(
                [
                    latency_table(floor_empty, floor_write, ops, floor_name),
                    throughput_table(opts.callers, floor_empty, floor_write, ops, floor_name),
                    table(
                        "Size of an idle session (SQLite file, bytes)",
                        ["", "per session", "on disk per session", "document"],
                        sizes,
                    ),
                    target_table(targets(floor_write, ops)),
                    f"load average at end: {load_average()}",
                ]
            )
        )


if __name__ == "__main__":
    run_benchmark(main(parse_options()))
