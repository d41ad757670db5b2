"""Watch fan-out and watch memory against their floors, measured in one run: `python bench/fanout.py`.

Fan-out: `--watchers` streams each on the fan-out floor (bench/fanout_floor.py: a bare grpc.aio
server streaming the same pre-serialized bytes to every stream), on `turngate serve` with the
embedded SQLite store and, with `--redis`, on `turngate serve` in redis mode; each server in its
own process. An event is a tool call opened on the watched session (turngate) or a publish of
that same event's bytes (the floor); the next one goes once every stream has the last. A sample is
trigger sent → one stream has the event; the three take turns, round after round, so drift on the
machine spreads over all of them.

Memory: a fresh `turngate serve` (SQLite) and a fresh floor server, each holding `--streams` idle
streams (spread over `--stream-sessions` sessions and `--stream-processes` client processes of
`--stream-channels` connections each): RSS after minus RSS before, per stream.
See bench/README.md for how to read the tables.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

# Before grpc loads: its core would log a line for every connection a server closes at the end.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

import grpc
from redis.asyncio import Redis

from turngate.v1 import turngate_pb2 as pb

from environment import (
    OWN_CONNECTION,
    ServerProcess,
    cpu_seconds,
    delete_prefix,
    load_average,
)
from fanout_floor import PUBLISH, READY, WATCH
from idle_watchers import raise_fd_limit
from measure import Latency
from report import Target, progress, run_benchmark, table, target_table
from rpcs import Stubs, admit, session
from servers import HERE, SERVE_FLAGS, TURNGATE, turngate_serving
from servers import launch as launch_endpoint
from watching import FanOut, OnEvent, Watcher, turngate_fan_out

FAN_OUT_TARGET = 1.5
RSS_PER_STREAM_TARGET_KIB = 16.0
# Seconds for the servers to settle before RSS is read (grpc-core's and Python's allocators).
SETTLE_S = 2.0
WARM_STREAMS = 500
OPEN_TIMEOUT_S = 300.0


@dataclass(frozen=True, slots=True)
class Options:
    watchers: int
    watch_channels: int
    events: int
    rounds: int
    warmup: int
    redis: str | None
    streams: int
    stream_sessions: int
    stream_processes: int
    stream_channels: int
    phases: tuple[str, ...]


def parse_options(argv: Sequence[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--watchers", type=int, default=1_000, help="streams of the fan-out, on each server")
    add("--watch-channels", type=int, default=8, help="gRPC connections those streams share, per server")
    add("--events", type=int, default=20, help="events timed per server")
    add("--rounds", type=int, default=4, help="turns the servers take (the events split over them)")
    add("--warmup", type=int, default=2, help="untimed events per server first")
    add(
        "--redis",
        help="also fan out from turngate in redis mode on this Redis (e.g. redis://127.0.0.1:6379/0)",
    )
    add("--streams", type=int, default=10_000, help="idle streams held open in the memory phase")
    add("--stream-sessions", type=int, default=100, help="sessions those streams watch")
    add("--stream-processes", type=int, default=4, help="client processes holding them")
    add("--stream-channels", type=int, default=5, help="gRPC connections per client process")
    add("--phases", default="fanout,memory", help="comma-separated: fanout, memory (default: %(default)s)")
    args = parser.parse_args(argv)
    args.phases = tuple(p for p in args.phases.split(",") if p)
    if not set(args.phases) <= {"fanout", "memory"} or not args.phases:
        parser.error("--phases takes fanout and/or memory")
    if args.events % args.rounds:
        parser.error("--events must be a multiple of --rounds")
    return Options(**vars(args))


@dataclass(frozen=True, slots=True)
class Server:
    name: str
    process: ServerProcess
    address: str

    @property
    def pid(self) -> int:
        return self.process.process.pid


async def launch(
    stack: AsyncExitStack,
    logs: Path,
    name: str,
    argv: Callable[[int], list[str]],
    probe: Callable[[grpc.aio.Channel], Awaitable[bool]],
    env: dict[str, str],
) -> Server:
    endpoint = await launch_endpoint(stack, name, argv, probe, env, logs / f"{name}.log")
    return Server(name, endpoint.process, endpoint.address)


class Servers:
    """Starts the run's servers: floors and turngates, each in its own process."""

    def __init__(self, stack: AsyncExitStack, logs: Path, opts: Options, prefix: str) -> None:
        self._stack = stack
        self._logs = logs
        self._prefix = prefix
        watches = str(2 * max(opts.streams, opts.watchers))
        self._env = {k: v for k, v in os.environ.items() if not k.startswith(("TURNGATE_", "OTEL_"))}
        # Every stream of the run comes from one (anonymous) principal; the memory phase puts
        # streams / sessions on each session.
        self._env.update(TURNGATE_MAX_WATCHES_PER_PRINCIPAL=watches, TURNGATE_MAX_WATCHES_PER_SESSION=watches)
        self._count = 0

    async def floor(self, name: str) -> Server:
        script = str(HERE / "fanout_floor.py")
        return await launch(
            self._stack,
            self._logs,
            name,
            lambda port: [sys.executable, script, str(port)],
            _floor_answers,
            self._env,
        )

    async def turngate(self, name: str, redis: str | None = None) -> Server:
        """`turngate serve` on a SQLite file of its own; with `redis`, in redis mode as in
        production (`--no-projector`, and a `turngate project` process writing a SQLite ledger)."""
        self._count += 1
        root = self._logs / f"turngate-{self._count}"
        root.mkdir()
        store = ["--store", f"sqlite+aiosqlite:///{root / 'turngate.db'}"]
        if redis is not None:
            store = ["--store", redis, "--ledger", f"sqlite+aiosqlite:///{root / 'ledger.db'}"]
        env = {**self._env, "TURNGATE_REDIS_PREFIX": f"{self._prefix}-{self._count}"}
        projection = [] if redis is None else ["--no-projector"]

        def argv(port: int) -> list[str]:
            return [TURNGATE, "serve", "--listen", f"127.0.0.1:{port}", *store, *SERVE_FLAGS, *projection]

        server = await launch(self._stack, self._logs, name, argv, turngate_serving, env)
        if redis is not None:  # serving: the server has migrated the ledger
            argv_projector = [TURNGATE, "project", *store, "--no-migrate"]
            log = self._logs / f"{name}-projector.log"
            projector = await ServerProcess.start(f"{name}-projector", argv_projector, env, log)
            self._stack.push_async_callback(projector.stop)
        return server


async def _floor_answers(channel: grpc.aio.Channel) -> bool:
    ready: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(READY)
    return await ready(b"", timeout=0.5) == b""


def own_channels(stack: AsyncExitStack, address: str, n: int) -> list[grpc.aio.Channel]:
    channels = [grpc.aio.insecure_channel(address, options=OWN_CONNECTION) for _ in range(n)]
    for channel in channels:
        stack.push_async_callback(channel.close)
    return channels


# --- fan-out ----------------------------------------------------------------------------------


@dataclass
class Contender:
    """One server of the fan-out, its streams, and what it measured."""

    server: Server
    fan: FanOut
    samples: list[float]
    cpu: dict[str, float]

    def latency(self) -> Latency:
        return Latency(self.samples, self.cpu)


def floor_payload(template: pb.SessionEvent, call_id: str) -> bytes:
    """Turngate's event `template` as the event named `call_id` would be: the same size."""
    event = pb.SessionEvent()
    event.CopyFrom(template)
    event.tool_call.tool_call.call_id = call_id
    return pb.WatchSessionResponse(event=event).SerializeToString()


async def floor_fan_out(
    channels: Sequence[grpc.aio.Channel],
    writer: grpc.aio.Channel,
    *,
    watchers: int,
    snapshot: pb.SessionEvent,
    template: pb.SessionEvent,
) -> FanOut:
    first = pb.WatchSessionResponse(event=snapshot).SerializeToString()
    publish: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = writer.unary_unary(PUBLISH)

    def streams(on_event: OnEvent) -> list[Watcher]:
        opened = []
        for i in range(watchers):
            watch: grpc.aio.UnaryStreamMultiCallable[bytes, pb.WatchSessionResponse] = channels[
                i % len(channels)
            ].unary_stream(WATCH, response_deserializer=pb.WatchSessionResponse.FromString)
            opened.append(Watcher(watch(first), on_event))
        return opened

    async def trigger(call_id: str) -> None:
        await publish(floor_payload(template, call_id))

    return FanOut(watchers, streams, trigger)


async def fan_out_phase(
    stack: AsyncExitStack, servers: Servers, opts: Options
) -> tuple[list[Contender], int]:
    """Every contender's samples; and the size of turngate's event (bytes on the wire, as sent)."""
    progress("starting the fan-out floor and turngate")
    floor, embedded = await asyncio.gather(servers.floor("fanout-floor"), servers.turngate("turngate-sqlite"))
    turngates = [embedded]
    if opts.redis is not None:
        turngates.append(await servers.turngate("turngate-redis", opts.redis))
    contenders: list[Contender] = []
    for server in turngates:
        writer = own_channels(stack, server.address, 1)[0]
        channels = [Stubs.on(channel) for channel in own_channels(stack, server.address, opts.watch_channels)]
        fan = await turngate_fan_out(
            Stubs.on(writer), channels, watchers=opts.watchers, name=f"fan-out-{uuid.uuid4().hex[:6]}"
        )
        stack.push_async_callback(fan.close)
        progress(f"{server.name}: {opts.watchers} streams opening")
        await fan.ready()
        for i in range(opts.warmup):
            await fan.deliver(f"warmup-{i}")
        contenders.append(Contender(server, fan, [], {"server": 0.0, "client": 0.0}))
    tally = contenders[0].fan.tally
    snapshot, template = tally.first[""], tally.first["warmup-0"]
    writer = own_channels(stack, floor.address, 1)[0]
    fan = await floor_fan_out(
        own_channels(stack, floor.address, opts.watch_channels),
        writer,
        watchers=opts.watchers,
        snapshot=snapshot,
        template=template,
    )
    stack.push_async_callback(fan.close)
    progress(f"{floor.name}: {opts.watchers} streams opening")
    await fan.ready()
    for i in range(opts.warmup):
        await fan.deliver(f"warmup-{i}")
    contenders.insert(0, Contender(floor, fan, [], {"server": 0.0, "client": 0.0}))

    per_round = opts.events // opts.rounds
    for r in range(opts.rounds):
        progress(f"fan-out round {r + 1} of {opts.rounds}")
        for contender in contenders:
            server_before, client_before = cpu_seconds(contender.server.pid), time.process_time()
            for i in range(per_round):
                contender.samples += await contender.fan.deliver(f"call-{r * per_round + i}")
            contender.cpu["server"] += cpu_seconds(contender.server.pid) - server_before
            contender.cpu["client"] += time.process_time() - client_before
    size = len(floor_payload(template, "call-0"))
    return contenders, size


def fan_out_table(contenders: Sequence[Contender], watchers: int) -> str:
    floor = contenders[0].latency()

    def row(c: Contender) -> list[str]:
        lat = c.latency()
        return [
            c.server.name,
            str(lat.n),
            f"{lat.p50:.1f}",
            f"{lat.p99:.1f}",
            f"{lat.max:.1f}",
            f"{lat.p99 / floor.p99:.2f}x",
            f"{lat.cpu_us_per_call('server'):.0f}",
            f"{lat.cpu_us_per_call('client'):.0f}",
        ]

    headers = [f"one event → {watchers} streams", "n", "p50 ms", "p99 ms", "max ms", "p99/floor"]
    headers += ["server CPU us", "client CPU us"]
    return table(
        "Fan-out (trigger sent → each stream has the event; CPU per delivery)",
        headers,
        [row(c) for c in contenders],
    )


# --- memory -----------------------------------------------------------------------------------


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


@dataclass(frozen=True, slots=True)
class Memory:
    name: str
    streams: int
    before: int
    after: int

    @property
    def per_stream_kib(self) -> float:
        return (self.after - self.before) / self.streams / 1024


async def _open_and_close(address: str, method: str, requests: list[bytes], n: int) -> None:
    """`n` streams opened, each read to its first message, then cancelled (warms the server up)."""
    async with grpc.aio.insecure_channel(address, options=OWN_CONNECTION) as channel:
        watch: grpc.aio.UnaryStreamMultiCallable[bytes, bytes] = channel.unary_stream(method)
        calls = [watch(requests[i % len(requests)]) for i in range(n)]
        async with asyncio.timeout(OPEN_TIMEOUT_S):
            await asyncio.gather(*(call.read() for call in calls))
        for call in calls:
            call.cancel()


async def held_streams(
    server: Server, method: str, requests: list[bytes], opts: Options, logs: Path
) -> Memory:
    """RSS of `server` before and while `opts.streams` idle streams are held open."""
    await _open_and_close(server.address, method, requests, WARM_STREAMS)
    await asyncio.sleep(SETTLE_S)
    before = rss_bytes(server.pid)
    per_process = -(-opts.streams // opts.stream_processes)
    holders = []
    try:
        remaining = opts.streams
        for i in range(opts.stream_processes):  # one after the other: see idle_watchers.BATCH
            n = min(per_process, remaining)
            remaining -= n
            argv = [sys.executable, str(HERE / "idle_watchers.py"), server.address, method, str(n)]
            argv += [str(opts.stream_channels), *(request.hex() for request in requests)]
            log = logs / f"{server.name}-holder-{i}.log"
            with log.open("wb") as err:
                holder = await asyncio.create_subprocess_exec(
                    *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=err
                )
            holders.append(holder)
            assert holder.stdout is not None
            async with asyncio.timeout(OPEN_TIMEOUT_S):
                line = await holder.stdout.readline()
            if not line.startswith(b"open"):
                await holder.wait()
                tail = log.read_text()[-2_000:]
                raise RuntimeError(f"a client process holding streams of {server.name} failed:\n{tail}")
        await asyncio.sleep(SETTLE_S)
        server.process.check_alive()
        after = rss_bytes(server.pid)
    finally:
        for holder in holders:
            if holder.stdin is not None:
                holder.stdin.close()
        for holder in holders:
            with contextlib.suppress(ProcessLookupError):
                await asyncio.wait_for(holder.wait(), 60)
    return Memory(server.name, opts.streams, before, after)


async def memory_phase(servers: Servers, opts: Options, logs: Path) -> list[Memory]:
    progress("starting a fresh floor and turngate for the memory phase")
    floor, server = await asyncio.gather(servers.floor("memory-floor"), servers.turngate("memory-turngate"))
    refs = [session(f"idle-{i}") for i in range(opts.stream_sessions)]
    async with grpc.aio.insecure_channel(server.address) as channel:
        stubs = Stubs.on(channel)
        for ref in refs:  # each session has a document, its stream a snapshot of a running turn
            await admit(stubs, ref, "turn-1")
    watch_requests = [pb.WatchSessionRequest(session=ref).SerializeToString() for ref in refs]
    progress(f"{server.name}: holding {opts.streams} idle WatchSession streams")
    turngate = await held_streams(
        server, "/turngate.v1.SessionService/WatchSession", watch_requests, opts, logs
    )
    # The floor's streams start with a snapshot of the same size.
    snapshot = pb.WatchSessionResponse(event=pb.SessionEvent(snapshot=pb.SessionSnapshot(session=refs[0])))
    progress(f"{floor.name}: holding {opts.streams} idle streams")
    bare = await held_streams(floor, WATCH, [snapshot.SerializeToString()], opts, logs)
    return [bare, turngate]


def memory_table(rows: Sequence[Memory]) -> str:
    mib = 1024 * 1024

    def row(m: Memory) -> list[str]:
        return [
            m.name,
            str(m.streams),
            f"{m.before / mib:.1f}",
            f"{m.after / mib:.1f}",
            f"{m.per_stream_kib:.1f}",
        ]

    headers = ["idle streams held", "streams", "RSS before MiB", "RSS after MiB", "KiB per stream"]
    return table("Memory (server RSS)", headers, [row(m) for m in rows])


# --- the run ----------------------------------------------------------------------------------


async def main(opts: Options) -> int:
    raise_fd_limit()
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    prefix = f"tgfanout-{uuid.uuid4().hex[:10]}"
    out = [
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, grpcio {grpc.__version__}",
        f"load average at start: {load_average()} (1, 5, 15 min)",
        "",
    ]
    targets: list[Target] = []
    async with AsyncExitStack() as stack:
        logs = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tgfanout-")))
        if opts.redis is not None:
            redis = Redis.from_url(opts.redis)
            stack.push_async_callback(redis.aclose)
            stack.push_async_callback(delete_prefix, redis, prefix)
        servers = Servers(stack, logs, opts, prefix)
        if "fanout" in opts.phases:
            async with AsyncExitStack() as phase:  # streams and channels closed at its end
                contenders, size = await fan_out_phase(phase, servers, opts)
            out.append(fan_out_table(contenders, opts.watchers))
            out.append(f"event: {size} bytes on the wire (a tool call opened), the same bytes from the floor")
            floor = contenders[0].latency()
            for c in contenders[1:]:
                ratio = c.latency().p99 / floor.p99
                targets.append(
                    Target(f"fan-out p99 / floor p99 ({c.server.name})", ratio, FAN_OUT_TARGET, "x")
                )
            for c in contenders:  # the memory phase has servers of its own
                await c.server.process.stop()
        if "memory" in opts.phases:
            memory = await memory_phase(servers, opts, logs)
            out += ["", memory_table(memory)]
            turngate = memory[-1]
            targets.append(
                Target(
                    f"RSS per idle watch stream at {opts.streams:,}",
                    turngate.per_stream_kib,
                    RSS_PER_STREAM_TARGET_KIB,
                    " KiB",
                )
            )
    out += [
        "",
        target_table(targets),
        f"load average at end: {load_average()} (1, 5, 15 min; other work moves the figures)",
    ]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    run_benchmark(main(parse_options()))
