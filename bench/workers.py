"""Every core of a host: `turngate serve --workers N` against a floor of N processes, in one run:
`python bench/workers.py`.

For each N (1 and 2 by default) it starts, each in its own processes: N floor servers on one port
(bench/floor_server.py; gRPC binds with SO_REUSEPORT by default) and `turngate serve --workers N
--no-projector` in redis mode on the machine's Redis, with one `turngate project` writing a
PostgreSQL ledger of the run's own. Callers on distinct sessions spread over many connections (the
kernel hands each connection to one process) call AdmitTurn (turngate) or RedisGet (the floor: gRPC
+ one Redis round trip) for a fixed time; the table gives calls/s, turngate's share of the floor's,
and how much N processes gain over one. See bench/README.md for how to read it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

import grpc
from redis.asyncio import Redis

from environment import (
    OWN_CONNECTION,
    ServerProcess,
    cpu_seconds,
    create_database,
    delete_prefix,
    drop_database,
    free_port,
    listening,
    load_average,
)
from floor_server import LISTENING, REDIS_GET
from measure import Call, CpuMeter, Throughput, concurrent
from report import table
from rpcs import Caller, Stubs, floor_calls
from servers import HERE, SERVE_FLAGS, TURNGATE, Run, drain_ledger

# More connections than processes, so the kernel spreads them over every process.
CONNECTIONS = 16
WARMUP_S = 0.5


@dataclass(frozen=True, slots=True)
class Row:
    processes: int
    floor: Throughput
    turngate: Throughput


def children(pid: int) -> list[int]:
    """The processes `pid` started (a `serve --workers` parent's workers, and its helpers)."""
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def cpu_of_tree(pid: int) -> CpuMeter:
    """CPU seconds of `pid` and its children, read when called."""

    async def meter() -> float:
        return cpu_seconds(pid) + sum(cpu_seconds(child) for child in children(pid))

    return meter


def cpu_of_all(processes: Sequence[ServerProcess]) -> CpuMeter:
    async def meter() -> float:
        return sum(cpu_seconds(p.process.pid) for p in processes)

    return meter


def channels_to(stack: AsyncExitStack, port: int) -> list[grpc.aio.Channel]:
    channels = [
        grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=OWN_CONNECTION) for _ in range(CONNECTIONS)
    ]
    for channel in channels:
        stack.push_async_callback(channel.close)
    return channels


async def measure(run: Run, processes: int, callers: int, seconds: float) -> Row:
    async with AsyncExitStack() as stack:
        floor_port, turngate_port = free_port(), free_port()
        floors = [
            await ServerProcess.start(
                f"floor-{n}",
                [
                    sys.executable,
                    str(HERE / "floor_server.py"),
                    str(floor_port),
                    run.redis,
                    f"{run.prefix}:floor",
                ],
                run.env(),
                run.logs / f"floor-{processes}-{n}.log",
            )
            for n in range(processes)
        ]
        for floor in floors:
            stack.push_async_callback(floor.stop)
        store = ["--store", run.redis, "--ledger", run.ledger]
        projector = await ServerProcess.start(
            "projector", [TURNGATE, "project", *store], run.env(), run.logs / f"projector-{processes}.log"
        )
        stack.push_async_callback(projector.stop)
        listen = ["--listen", f"127.0.0.1:{turngate_port}", "--workers", str(processes)]
        serve = await ServerProcess.start(
            "turngate",
            [TURNGATE, "serve", *listen, *store, *SERVE_FLAGS, "--no-projector"],
            run.env(),
            run.logs / f"turngate-{processes}.log",
        )
        stack.push_async_callback(serve.stop)
        await listening(floors, LISTENING, processes, "the floor")
        await listening([serve], "turngate listening on", processes, "turngate")

        floor_channels = channels_to(stack, floor_port)
        floor_callers: list[Iterator[Call]] = [
            floor_calls(floor_channels[i % CONNECTIONS], REDIS_GET) for i in range(callers)
        ]
        floor_rate = await concurrent(floor_callers, seconds, {"server": cpu_of_all(floors)}, WARMUP_S)

        turngate_channels = channels_to(stack, turngate_port)
        admitting = [
            Caller(Stubs.on(turngate_channels[i % CONNECTIONS]), f"{run.prefix}-{processes}-{i}").admits()
            for i in range(callers)
        ]
        turngate = await concurrent(admitting, seconds, {"server": cpu_of_tree(serve.process.pid)}, WARMUP_S)
        async with Redis.from_url(run.redis) as redis:
            await drain_ledger(redis, run.keys)
        return Row(processes, floor_rate, turngate)


def report(rows: Sequence[Row]) -> str:
    one = rows[0]

    def row(r: Row) -> list[str]:
        return [
            str(r.processes),
            f"{r.floor.per_s:,.0f}",
            f"{r.turngate.per_s:,.0f}",
            f"{r.turngate.per_s / r.floor.per_s:.2f}",
            f"{r.floor.per_s / one.floor.per_s:.2f}x",
            f"{r.turngate.per_s / one.turngate.per_s:.2f}x",
            f"{r.turngate.cpu_us_per_call('server'):,.0f}",
        ]

    headers = [
        "processes",
        "floor calls/s",
        "AdmitTurn calls/s",
        "of floor",
        "floor gain",
        "turngate gain",
        "server CPU µs/call",
    ]
    return table("AdmitTurn with N processes on one port (redis mode)", headers, [row(r) for r in rows])


async def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument(
        "--processes", type=int, nargs="+", default=[1, 2], help="N of each row (default: 1 2)"
    )
    parser.add_argument("--callers", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args(argv)
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="turngate-bench-") as logs:
        run = Run(args.redis, args.postgres, prefix, prefix.replace("-", "_"), Path(logs))
        await create_database(run.postgres_admin, run.database)
        try:
            print(f"load average at start: {load_average()}")
            rows = [await measure(run, n, args.callers, args.seconds) for n in args.processes]
            print(report(rows))
            print(f"load average at end: {load_average()}")
        finally:
            async with Redis.from_url(args.redis) as redis:
                await delete_prefix(redis, prefix)
            await drop_database(run.postgres_admin, run.database)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
