"""turngate in redis mode against its own floor, measured in one run: `python bench/redis_mode.py`.

Starts, each in its own process: the floor server (bench/floor_server.py) and two `turngate serve`
replicas (A and B) on the machine's Redis, under a key prefix of this run's own, with a PostgreSQL
ledger database of this run's own. Everything is removed at the end, whatever happens.
See bench/README.md for how to read the tables.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]
import grpc
from redis.asyncio import Redis

from environment import (
    cpu_seconds,
    create_database,
    delete_prefix,
    drop_database,
    load_average,
    machine_facts,
    postgres_cpu_seconds,
    redis_cpu_seconds,
)
from floor_server import EMPTY, REDIS_GET
from measure import Call, CpuMeter, Latency, Throughput, concurrent, sequential
from report import Measured, Target, facts_lines, latency_table, push_table, target_table, throughput_table
from rpcs import Caller, Stubs, floor_calls
from servers import Endpoint, Run, drain_ledger, start_servers
from watching import fan_out, stop_to_notified

# Watcher channels get connections of their own (gRPC would otherwise share one per target).
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]
SETTLE_S = 1.0
# Untimed seconds at full load before each throughput phase.
THROUGHPUT_WARMUP_S = 0.3
ADMIT_LATENCY_TARGET = 1.5
STOP_P99_TARGET_MS = 25.0
# Each RPC as a caller's calls: admissions of new turns, then heartbeats and Stops of those turns.
OPERATIONS: tuple[tuple[str, Callable[[Caller], Iterator[Call]]], ...] = (
    ("AdmitTurn", Caller.admits),
    ("Heartbeat", Caller.heartbeats),
    ("CancelTurn", Caller.cancels),
)


@dataclass(frozen=True, slots=True)
class Options:
    redis: str
    postgres: str
    calls: int
    warmup: int
    callers: int
    seconds: float
    stops: int
    stop_sessions: int
    watchers: int
    watch_channels: int
    events: int
    separate_projector: bool
    py_spy: str | None
    profile_dir: Path


def parse_options(argv: Sequence[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add(
        "--redis",
        default="redis://127.0.0.1:6379/0",
        help="the Redis to use (keys under a prefix of the run)",
    )
    add("--postgres", default="postgresql://postgres@127.0.0.1:5432", help="server for the ledger database")
    add("--calls", type=int, default=2_000, help="timed sequential calls per RPC")
    add("--warmup", type=int, default=200, help="untimed calls before them")
    add("--callers", type=int, default=64, help="concurrent callers for throughput")
    add("--seconds", type=float, default=3.0, help="length of each throughput phase")
    add("--stops", type=int, default=300, help="Stops timed per replica layout")
    add("--stop-sessions", type=int, default=8, help="watched sessions the Stops rotate over")
    add("--watchers", type=int, default=1_000, help="watchers of the fan-out session")
    add("--watch-channels", type=int, default=8, help="gRPC connections the watchers share")
    add("--events", type=int, default=20, help="fan-out events timed")
    add(
        "--inline-projector",
        dest="separate_projector",
        action="store_false",
        help="replicas project the ledger themselves (default: the production shape, replicas run "
        "`serve --no-projector` and one `turngate project` process projects the ledger)",
    )
    add("--py-spy", help="path of a py-spy binary: profile replica A during each turngate phase")
    add("--profile-dir", type=Path, default=Path(), help="where py-spy's profiles go")
    return Options(**vars(parser.parse_args(argv)))


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


async def _client_cpu() -> float:
    return time.process_time()


@dataclass
class Bench:
    opts: Options
    run: Run
    stack: AsyncExitStack
    redis: Redis
    postgres: asyncpg.Connection
    notes: list[str] = field(default_factory=list)

    def meters(self, server: Endpoint) -> dict[str, CpuMeter]:
        """CPU meters for a phase against `server`: it, this client, Redis, the ledger's backends."""

        async def server_cpu() -> float:
            return cpu_seconds(server.pid)

        async def redis_cpu() -> float:
            return await redis_cpu_seconds(self.redis)

        async def postgres_cpu() -> float:
            return await postgres_cpu_seconds(self.postgres, self.run.database)

        return {"server": server_cpu, "client": _client_cpu, "redis": redis_cpu, "ledger pg": postgres_cpu}

    async def _one_caller(self, calls: Iterator[Call], server: Endpoint) -> Latency:
        return await sequential(calls, self.opts.calls, self.opts.warmup, self.meters(server))

    async def _many_callers(self, callers: Sequence[Iterator[Call]], server: Endpoint) -> Throughput:
        return await concurrent(callers, self.opts.seconds, self.meters(server), THROUGHPUT_WARMUP_S)

    async def floor(self, floor: Endpoint) -> tuple[Measured, Measured]:
        """The empty call, then the call with one Redis GET: each at 1 caller, then at `callers`."""
        results = []
        for name, method in (("floor: empty gRPC call", EMPTY), ("floor: gRPC + 1 Redis GET", REDIS_GET)):
            progress(name)
            latency = await self._one_caller(floor_calls(floor.channel, method), floor)
            callers = [floor_calls(floor.channel, method) for _ in range(self.opts.callers)]
            results.append(Measured(name, latency, await self._many_callers(callers, floor)))
        return results[0], results[1]

    async def turngate(self, replica: Endpoint) -> list[Measured]:
        """Each RPC at 1 caller, then each at `callers` callers; the ledger caught up before each."""
        single = Caller(replica.stubs, "seq")
        many = [Caller(replica.stubs, f"caller{i}") for i in range(self.opts.callers)]
        latencies = {}
        for name, calls in OPERATIONS:
            await drain_ledger(self.redis, self.run.keys)
            progress(f"{name}, 1 caller")
            async with self._profiled(name, replica.pid, 1):
                latencies[name] = await self._one_caller(calls(single), replica)
        rates = {}
        for name, calls in OPERATIONS:
            await drain_ledger(self.redis, self.run.keys)
            progress(f"{name}, {len(many)} callers")
            async with self._profiled(name, replica.pid, len(many)):
                rates[name] = await self._many_callers([calls(caller) for caller in many], replica)
            backlog, took = await drain_ledger(self.redis, self.run.keys)
            self.notes.append(
                f"ledger after {name} x{len(many)}: {backlog} entries behind, caught up in {took:.2f} s"
            )
        return [Measured(name, latencies[name], rates[name]) for name, _ in OPERATIONS]

    @contextlib.asynccontextmanager
    async def _profiled(self, name: str, pid: int, callers: int) -> AsyncIterator[None]:
        """With a py-spy binary given, py-spy records `pid` (without pausing it) during each
        turngate phase, as raw stacks (one line per stack and its sample count)."""
        opts = self.opts
        if opts.py_spy is None:
            yield
            return
        out = opts.profile_dir / f"{name}-{callers}-callers.pyspy.txt"
        argv = [opts.py_spy, "record", "--pid", str(pid), "--nonblocking", "--rate", "500"]
        argv += ["--format", "raw", "--output", str(out)]
        devnull = asyncio.subprocess.DEVNULL
        process = await asyncio.create_subprocess_exec(*argv, stdout=devnull, stderr=devnull)
        await asyncio.sleep(0.5)  # while py-spy attaches
        try:
            yield
        finally:
            process.send_signal(signal.SIGINT)  # py-spy writes what it has, then exits
            await process.wait()
            self.notes.append(f"py-spy profile of replica A, {name} with {callers} caller(s): {out}")

    async def push(self, a: Endpoint, b: Endpoint) -> list[tuple[str, Latency]]:
        """Stop → notified with the runner and its watch on A, the Stop through A then B; fan-out on A."""
        opts = self.opts

        async def stops(name: str, gateway: Endpoint) -> Latency:
            return await stop_to_notified(
                a.stubs,
                gateway.stubs,
                a.stubs,
                name=name,
                sessions=opts.stop_sessions,
                stops=opts.stops,
                warmup=opts.stops // 10,
            )

        progress("Stop → runner notified, one replica")
        same = await stops("stop-a", a)
        progress("Stop → runner notified, watcher on A, Stop through B")
        cross = await stops("stop-ab", b)
        progress(f"fan-out to {opts.watchers} watchers")
        channels = [self._own_channel(a.address) for _ in range(opts.watch_channels)]
        fan = await fan_out(
            a.stubs, channels, self.meters(a), watchers=opts.watchers, events=opts.events, warmup=2
        )
        return [
            ("Stop → runner notified (one replica)", same),
            ("Stop → runner notified (watch A, Stop via B)", cross),
            (f"fan-out: write → each of {opts.watchers} watchers", fan),
        ]

    def _own_channel(self, address: str) -> Stubs:
        channel = grpc.aio.insecure_channel(address, options=OWN_CONNECTION)
        self.stack.push_async_callback(channel.close)
        return Stubs.on(channel)

    async def report(self) -> str:
        """Every measurement, then the tables."""
        floor, a, b = await start_servers(
            self.stack, self.run, separate_projector=self.opts.separate_projector
        )
        await asyncio.sleep(SETTLE_S)
        floor_empty, floor_redis = await self.floor(floor)
        ops = await self.turngate(a)
        pushes = await self.push(a, b)
        for endpoint in (floor, a, b):
            endpoint.process.check_alive()
        self.notes.append(
            f"load average at end: {load_average()} (1, 5, 15 min; other work moves the figures)"
        )
        return "\n".join(
            [
                latency_table(floor_empty, floor_redis, ops),
                throughput_table(self.opts.callers, floor_empty, floor_redis, ops),
                push_table(pushes),
                target_table(targets(floor_redis, ops, pushes)),
                *self.notes,
            ]
        )


def targets(
    floor_redis: Measured, ops: Sequence[Measured], pushes: Sequence[tuple[str, Latency]]
) -> list[Target]:
    """AdmitTurn p50 against the gRPC+Redis floor; both Stop → notified p99s against 25 ms."""
    admit = next(m for m in ops if m.name == "AdmitTurn")
    ratio = admit.latency.p50 / floor_redis.latency.p50
    stop_rows = [Target(f"{name} p99", lat.p99, STOP_P99_TARGET_MS, " ms") for name, lat in pushes[:2]]
    return [Target("AdmitTurn p50 / gRPC+Redis floor p50", ratio, ADMIT_LATENCY_TARGET, "x"), *stop_rows]


async def main(opts: Options) -> None:
    run_id = uuid.uuid4().hex[:10]
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    # Undone last to first: servers stop, then the run's keys, database and logs go.
    async with AsyncExitStack() as stack:
        logs = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tgbench-")))
        run = Run(opts.redis, opts.postgres, f"tgbench-{run_id}", f"turngate_bench_{run_id}", logs)
        redis = Redis.from_url(run.redis)
        stack.push_async_callback(redis.aclose)
        print(facts_lines(await machine_facts(redis, run.postgres_admin)))
        await create_database(run.postgres_admin, run.database)
        stack.push_async_callback(drop_database, run.postgres_admin, run.database)
        stack.push_async_callback(delete_prefix, redis, run.prefix)
        postgres = await asyncpg.connect(run.postgres_admin)
        stack.push_async_callback(postgres.close)
        progress(f"run {run_id}: redis prefix {run.prefix}, database {run.database}")
        shape = "one `turngate project` process" if opts.separate_projector else "each replica (inline)"
        progress(f"ledger projection by {shape}")
        print(await Bench(opts, run, stack, redis, postgres).report())
    progress("cleaned up: servers stopped, database dropped, redis keys unlinked")


if __name__ == "__main__":
    try:
        asyncio.run(main(parse_options()))
    except (asyncio.CancelledError, KeyboardInterrupt):
        progress("interrupted; cleaned up")
        sys.exit(130)
