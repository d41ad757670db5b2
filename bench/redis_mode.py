"""turngate in redis mode against its own floor, measured in one run: `python bench/redis_mode.py`.

Starts, each in its own process: the floor server (bench/floor_server.py) and two `turngate serve`
replicas (A and B) on the machine's Redis, under a key prefix of this run's own, with a PostgreSQL
ledger database of this run's own. `--topology cluster` or `sentinel` puts them on a Redis Cluster,
or a primary behind Sentinel, that the run starts for itself (bench/topologies.py) instead.
Everything is removed at the end, whatever happens. See bench/README.md for how to read the tables.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]
import grpc
from redis.asyncio import Redis

from turngate.service.store.redis.connection import Client, connect

from environment import (
    OWN_CONNECTION,
    create_database,
    delete_prefix,
    drop_database,
    load_average,
    machine_facts,
    postgres_cpu_seconds,
    redis_cpu_seconds,
)
from floor_server import EMPTY, REDIS_GET, SCRIPT, WRITE_WAIT
from measure import Call, CpuMeter, Latency, Throughput, client_cpu, concurrent, sequential
from report import (
    Measured,
    Target,
    facts_lines,
    latency_table,
    progress,
    push_table,
    run_benchmark,
    target_table,
    throughput_table,
)
from rpcs import Caller, Stubs, floor_calls
from servers import Endpoint, Run, drain_ledger, start_servers
from topologies import KINDS, Kind, Topology, cpu_of
from topologies import start as start_topology
from watching import fan_out, stop_to_notified

SETTLE_S = 1.0
# Untimed seconds at full load before each throughput phase.
THROUGHPUT_WARMUP_S = 0.3
# Issue 12's targets, each against the gRPC + one Redis round trip floor.
ADMIT_P50_TARGET = 1.3
ADMIT_RATE_TARGET = 0.8
HEARTBEAT_RATE_TARGET = 0.9
ADMIT_CPU_TARGET = 1.5
STOP_P99_TARGET_MS = 25.0
STANDALONE_REDIS = "redis://127.0.0.1:6379/0"
# The bench's own client of a topology it started (the ledger backlog between phases).
ADMIN_TIMEOUT_S = 5.0
# Each RPC as a caller's calls: admissions of new turns, then heartbeats and Stops of those turns.
OPERATIONS: tuple[tuple[str, Callable[[Caller], Iterator[Call]]], ...] = (
    ("AdmitTurn", Caller.admits),
    ("Heartbeat", Caller.heartbeats),
    ("CancelTurn", Caller.cancels),
)


@dataclass(frozen=True, slots=True)
class Options:
    topology: Kind
    redis: str
    wait_replicas: int
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
        "--topology",
        choices=KINDS,
        default="standalone",
        help="standalone: the Redis of --redis; cluster: a Redis Cluster (3 masters, 3 replicas) the "
        "run starts; sentinel: a primary, its replica and 3 sentinels the run starts (default: %(default)s)",
    )
    add(
        "--redis",
        help=f"with --topology standalone, the Redis to use (keys under a prefix of the run; "
        f"default {STANDALONE_REDIS})",
    )
    add(
        "--wait-replicas",
        type=int,
        default=0,
        metavar="N",
        help="TURNGATE_REDIS_WAIT_REPLICAS for the replicas: each write waits for N replicas (WAIT); "
        "with cluster or sentinel, N ≤ 1 (one replica per primary; default: 0, no WAIT)",
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
    args = parser.parse_args(argv)
    if args.topology != "standalone" and args.redis is not None:
        parser.error(f"--redis is for --topology standalone: {args.topology} starts its own")
    if args.wait_replicas < 0:
        parser.error("--wait-replicas must be 0 or more")
    if args.wait_replicas and args.topology == "standalone":
        parser.error("--wait-replicas needs a replica: --topology cluster or sentinel")
    if args.wait_replicas > 1:
        parser.error(f"--topology {args.topology} has one replica per primary: --wait-replicas 1 at most")
    args.redis = args.redis or STANDALONE_REDIS
    return Options(**vars(args))


@dataclass
class Bench:
    opts: Options
    run: Run
    stack: AsyncExitStack
    topology: Topology
    redis: Client
    postgres: asyncpg.Connection
    notes: list[str] = field(default_factory=list)
    # Phases that failed (the run prints what it measured, then exits 1).
    failures: list[str] = field(default_factory=list)

    def meters(self, server: Endpoint) -> dict[str, CpuMeter]:
        """CPU meters for a phase against `server`: it, this client, Redis, the ledger's backends."""

        async def postgres_cpu() -> float:
            return await postgres_cpu_seconds(self.postgres, self.run.database)

        return {
            **server.meters(),
            "client": client_cpu,
            **self._redis_meters(),
            "ledger pg": postgres_cpu,
        }

    def _redis_meters(self) -> dict[str, CpuMeter]:
        """The machine's Redis: its INFO (other clients count too). A topology of the run's own:
        its masters (or primary), then its replicas, from /proc (this run's work alone)."""
        topology = self.topology
        if not topology.own:
            client = self.redis
            assert isinstance(client, Redis)

            async def redis_cpu() -> float:
                return await redis_cpu_seconds(client)

            return {"redis": redis_cpu}

        async def masters_cpu() -> float:
            return cpu_of(topology.primaries)

        async def replicas_cpu() -> float:
            return cpu_of(topology.replicas)

        return {"redis": masters_cpu, "redis replicas": replicas_cpu}

    async def _one_caller(self, calls: Iterator[Call], server: Endpoint) -> Latency:
        return await sequential(calls, self.opts.calls, self.opts.warmup, self.meters(server))

    async def _many_callers(self, callers: Sequence[Iterator[Call]], server: Endpoint) -> Throughput:
        return await concurrent(callers, self.opts.seconds, self.meters(server), THROUGHPUT_WARMUP_S)

    async def floor(self, floor: Endpoint) -> list[Measured]:
        """The empty call, the call with one Redis GET, the call that runs turngate's script as an
        admission does, then (with --wait-replicas) the call with a SET and WAIT in one round
        trip: each at 1 caller, then at `callers`."""
        methods = [
            ("floor: empty gRPC call", EMPTY),
            ("floor: gRPC + 1 Redis GET", REDIS_GET),
            ("floor: gRPC + turngate's script", SCRIPT),
        ]
        if self.opts.wait_replicas:
            methods.append((f"floor: gRPC + SET & WAIT {self.opts.wait_replicas}", WRITE_WAIT))
        results = []
        for name, method in methods:
            progress(name)
            latency = await self._one_caller(floor_calls(floor.channel, method), floor)
            callers = [floor_calls(floor.channel, method) for _ in range(self.opts.callers)]
            results.append(Measured(name, latency, await self._many_callers(callers, floor)))
        return results

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
        rows = [
            ("Stop → runner notified (one replica)", same),
            ("Stop → runner notified (watch A, Stop via B)", cross),
        ]
        progress(f"fan-out to {opts.watchers} watchers")
        channels = [self._own_channel(a.address) for _ in range(opts.watch_channels)]
        try:
            fan = await fan_out(
                a.stubs, channels, self.meters(a), watchers=opts.watchers, events=opts.events, warmup=2
            )
        except (grpc.aio.AioRpcError, TimeoutError) as error:
            # The last phase: the tables before it are still worth printing (the run exits 1).
            self.failures.append(f"fan-out to {opts.watchers} watchers failed: {_failure(error)}")
            _show_log_problems(a)
            return rows
        return [*rows, (f"fan-out: write → each of {opts.watchers} watchers", fan)]

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
        floor_empty, floor_redis, floor_script, *floor_wait = await self.floor(floor)
        ops = await self.turngate(a)
        pushes = await self.push(a, b)
        for endpoint in (floor, a, b):
            endpoint.process.check_alive()
        await self.topology.check_roles()
        self.notes.append(admit_note(floor_script, ops))
        if floor_wait:
            self.notes.append(admit_note(floor_wait[0], ops))
        self.notes.append(
            f"load average at end: {load_average()} (1, 5, 15 min; other work moves the figures)"
        )
        rows = [floor_script, *floor_wait, *ops]
        return "\n".join(
            [
                latency_table(floor_empty, floor_redis, rows),
                throughput_table(self.opts.callers, floor_empty, floor_redis, rows),
                push_table(pushes),
                target_table(targets(floor_redis, ops, pushes, self.opts.callers)),
                *self.notes,
                *(f"FAILED: {failure}" for failure in self.failures),
            ]
        )


def targets(
    floor_redis: Measured, ops: Sequence[Measured], pushes: Sequence[tuple[str, Latency]], callers: int
) -> list[Target]:
    """Against the gRPC+Redis floor: AdmitTurn p50, AdmitTurn and Heartbeat calls/s and the
    server's CPU per AdmitTurn with `callers` callers; both Stop → notified p99s against 25 ms."""
    admit, beat = (next(m for m in ops if m.name == name) for name in ("AdmitTurn", "Heartbeat"))
    floor = floor_redis.throughput
    return [
        Target(
            "redis: AdmitTurn p50 / floor p50",
            admit.latency.p50 / floor_redis.latency.p50,
            ADMIT_P50_TARGET,
            "x",
        ),
        Target(
            f"redis: AdmitTurn calls/s / floor's ({callers} callers)",
            admit.throughput.per_s / floor.per_s,
            ADMIT_RATE_TARGET,
            "x",
            at_least=True,
        ),
        Target(
            f"redis: Heartbeat calls/s / floor's ({callers} callers)",
            beat.throughput.per_s / floor.per_s,
            HEARTBEAT_RATE_TARGET,
            "x",
            at_least=True,
        ),
        Target(
            f"redis: server CPU per AdmitTurn / floor's ({callers} callers)",
            admit.throughput.cpu_us_per_call("server") / floor.cpu_us_per_call("server"),
            ADMIT_CPU_TARGET,
            "x",
        ),
        *(Target(f"redis: {name} p99", lat.p99, STOP_P99_TARGET_MS, " ms") for name, lat in pushes[:2]),
    ]


def _failure(error: BaseException) -> str:
    """A failed phase in a line: the RPC's status, and what the bench was waiting for meanwhile."""
    if isinstance(error, grpc.aio.AioRpcError):
        text = f"an RPC ended {error.code().name}: {error.details()}"
    else:
        text = "an event did not reach every watcher in time"
    if isinstance(error.__context__, TimeoutError):
        text += " (while an event had not reached every watcher in time)"
    return text


def _show_log_problems(server: Endpoint, lines: int = 20) -> None:
    """The last warnings and errors in `server`'s log (its event lines left out), on stderr:
    the log folder goes at the end of the run."""
    log = server.process.log
    problems = [line for line in log.read_text(errors="replace").splitlines() if " INFO " not in line]
    progress(f"{server.process.name}'s log, last {lines} lines other than INFO ({log}):")
    for line in problems[-lines:]:
        print(f"  {line}", file=sys.stderr)


def admit_note(floor: Measured, ops: Sequence[Measured]) -> str:
    """AdmitTurn against a floor that does more of its work: the script it runs, or the write
    and WAIT for replicas it makes (one round trip)."""
    admit = next(m for m in ops if m.name == "AdmitTurn")
    p50 = admit.latency.p50 / floor.latency.p50
    rate = admit.throughput.per_s / floor.throughput.per_s
    cpu = admit.throughput.cpu_us_per_call("server") / floor.throughput.cpu_us_per_call("server")
    return (
        f"AdmitTurn against the {floor.name.removeprefix('floor: ')} floor: p50 {p50:.2f}x, "
        f"calls/s {rate:.2f}x of it, server CPU per call {cpu:.2f}x of its"
    )


async def _facts(topology: Topology, client: Client, postgres_admin: str) -> list[tuple[str, str]]:
    """The machine's facts, the Redis server's version asked of one data node."""
    node = topology.facts_node()
    if node is None:
        assert isinstance(client, Redis)
        facts = await machine_facts(client, postgres_admin)
    else:
        async with node.client() as one:
            facts = await machine_facts(one, postgres_admin)
    return [*facts, ("Redis topology", topology.description)]


async def main(opts: Options) -> None:
    run_id = uuid.uuid4().hex[:10]
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    # Undone last to first: servers stop, then the run's keys (or its own Redis topology), database
    # and logs go.
    async with AsyncExitStack() as stack:
        logs = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tgbench-")))
        if opts.topology != "standalone":
            progress(f"starting a local {opts.topology} topology")
        topology = await start_topology(stack, opts.topology, logs / "redis", opts.redis)
        run = Run(
            topology.url,
            opts.postgres,
            f"tgbench-{run_id}",
            f"turngate_bench_{run_id}",
            logs,
            opts.wait_replicas,
        )
        redis: Client = connect(run.redis, ADMIN_TIMEOUT_S) if topology.own else Redis.from_url(run.redis)
        stack.push_async_callback(redis.aclose)
        facts = await _facts(topology, redis, run.postgres_admin)
        if opts.wait_replicas:
            facts.append(("WAIT", f"TURNGATE_REDIS_WAIT_REPLICAS={opts.wait_replicas}"))
        print(facts_lines(facts))
        await create_database(run.postgres_admin, run.database)
        stack.push_async_callback(drop_database, run.postgres_admin, run.database)
        if isinstance(redis, Redis) and not topology.own:
            # A topology of the run's own goes with its processes (nothing is persisted).
            stack.push_async_callback(delete_prefix, redis, run.prefix)
        postgres = await asyncpg.connect(run.postgres_admin)
        stack.push_async_callback(postgres.close)
        progress(f"run {run_id}: redis prefix {run.prefix}, database {run.database}")
        shape = "one `turngate project` process" if opts.separate_projector else "each replica (inline)"
        progress(f"ledger projection by {shape}")
        bench = Bench(opts, run, stack, topology, redis, postgres)
        print(await bench.report())
    if topology.own:
        progress(f"cleaned up: servers and the {topology.kind} topology stopped, database dropped")
    else:
        progress("cleaned up: servers stopped, database dropped, redis keys unlinked")
    if bench.failures:
        sys.exit(1)


if __name__ == "__main__":
    run_benchmark(main(parse_options()))
