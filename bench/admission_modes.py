"""Admission modes and the turn queue (issue 13) against floors measured in the same run:
`python bench/admission_modes.py [--store redis]` (about a minute).

REJECT admission, before and after the queue: AdmitTurn on a new session with no mode (the request
every client sent before issue 13), with mode=REJECT, with mode=ENQUEUE (admitted at once: the
session is idle), and AdmitTurn refused (another turn holds the session), on `turngate serve` of
the code this process imports and, unless `--before ''`, on `turngate serve` of `--before`'s
revision (the commit before the queue landed: its service/ and clients/, exported by `git archive`
into the run's folder, first on that server's PYTHONPATH), against the floor's store call (one
SQLite write transaction, or one Redis GET) and a bare gRPC call. The contenders take turns,
`--rounds` times, so drift on the machine spreads over all of them.

ENQUEUE → promotion: a turn t1 active, a turn t2 queued behind it by a runner that watches the
session; from CompleteTurn(t1) sent (and from its answer) until t2's runner holds its
turn_admitted{from_queue} event, and until its AdmitTurn, sent again, returns the lease. Against
Stop → runner notified on the same server (a write's push to the runner that watches) and a bare
gRPC call. See bench/README.md for how to read the tables.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import itertools
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from redis.asyncio import Redis

import turngate.service
from turngate.v1 import turngate_pb2 as pb

from embedded import ADMIT_P50_TARGET as EMBEDDED_ADMIT_P50_TARGET
from embedded import floor_writes
from environment import (
    create_database,
    delete_prefix,
    drop_database,
    load_average,
    machine_facts,
)
from floor_server import EMPTY, REDIS_GET
from measure import Call, Contender, Latency, paired, run_round
from redis_mode import ADMIT_P50_TARGET as REDIS_ADMIT_P50_TARGET
from redis_mode import STANDALONE_REDIS
from report import Target, facts_lines, fmt_ms, fmt_times, progress, run_benchmark, table, target_table
from rpcs import Caller, Stubs, admit, admit_lease, complete, floor_calls, session
from servers import (
    HERE,
    SERVE_FLAGS,
    Endpoint,
    Run,
    code_env,
    drain_ledger,
    export_revision,
    floor_answers,
    launch,
    start_floor,
    start_replicas,
    turngate_command,
    turngate_serving,
)
from sqlite_floor import SQLITE_WRITE
from watching import Inbox, Watcher, close_all, stop_to_notified

# The last commit before the queue (issue 13's core and contract, 0ebc60b).
BEFORE_QUEUE = "0ebc60b^"
SETTLE_S = 1.0
# This code's REJECT admission against the code before the queue, both measured in this run.
BEFORE_AFTER_TARGET = 1.1
QUEUED_RUNNER = "bench-runner-2"
# Where the turngate this process imports comes from (the servers of "this code" import the same).
CODE = Path(turngate.service.__file__).resolve().parents[2]


@dataclass(frozen=True, slots=True)
class Options:
    store: str
    redis: str
    postgres: str
    before: str
    rounds: int
    calls: int
    warmup: int
    promotions: int
    sessions: int


def parse_options(argv: Sequence[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add(
        "--store",
        choices=("embedded", "redis"),
        default="embedded",
        help="embedded: a fresh SQLite file per server; redis: --redis (a key prefix per server) "
        "with a PostgreSQL ledger database per server, one `turngate project` each (default: %(default)s)",
    )
    add("--redis", default=STANDALONE_REDIS, help="with --store redis (default: %(default)s)")
    add("--postgres", default="postgresql://postgres@127.0.0.1:5432", help="server for the ledger databases")
    add(
        "--before",
        default=BEFORE_QUEUE,
        metavar="REVISION",
        help="the revision to compare REJECT admission with ('' for none; default: %(default)s, the "
        "commit before the queue)",
    )
    add("--rounds", type=int, default=8, help="rounds over the contenders (default: %(default)s)")
    add("--calls", type=int, default=200, help="timed calls per contender per round (default: %(default)s)")
    add("--warmup", type=int, default=20, help="untimed calls before them, each round (default: %(default)s)")
    add("--promotions", type=int, default=400, help="promotions timed over all rounds (default: %(default)s)")
    add("--sessions", type=int, default=8, help="watched sessions the promotions rotate over")
    return Options(**vars(parser.parse_args(argv)))


# ---------------------------------------------------------------------------------------------
# The servers


@dataclass(frozen=True, slots=True)
class Servers:
    floor: Endpoint
    floor_method: str  # the floor's store call
    floor_name: str
    now: Endpoint
    before: Endpoint | None
    # Waits until every server's ledger caught up (redis mode), so no phase pays for another's.
    drain: Callable[[], Awaitable[None]]


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("TURNGATE_", "OTEL_"))}


async def _nothing_to_drain() -> None:
    return None


async def embedded_servers(stack: AsyncExitStack, folder: Path, before: Path | None) -> Servers:
    """The SQLite floor, and `turngate serve` on a fresh SQLite file for this code and for
    `before`'s."""

    def floor_argv(port: int) -> list[str]:
        return [sys.executable, str(HERE / "sqlite_floor.py"), str(port), str(folder / "floor.db")]

    def turngate(name: str, code: Path | None) -> Awaitable[Endpoint]:
        def argv(port: int) -> list[str]:
            store = ["--store", f"sqlite+aiosqlite:///{folder / name}.db"]
            return [*turngate_command(code), "serve", "--listen", f"127.0.0.1:{port}", *store, *SERVE_FLAGS]

        env = code_env(clean_env(), code)
        return launch(stack, name, argv, turngate_serving, env, folder / f"{name}.log")

    floor, now, *old = await asyncio.gather(
        launch(stack, "floor", floor_argv, floor_answers, clean_env(), folder / "floor.log"),
        turngate("now", None),
        *([turngate("before", before)] if before else []),
    )
    return Servers(floor, SQLITE_WRITE, "gRPC + SQLite txn", now, old[0] if old else None, _nothing_to_drain)


async def redis_servers(stack: AsyncExitStack, opts: Options, folder: Path, before: Path | None) -> Servers:
    """The Redis floor, and one `turngate serve --no-projector` with one `turngate project` for
    this code and for `before`'s, each on a key prefix and a ledger database of its own."""
    run_id = uuid.uuid4().hex[:10]
    client = Redis.from_url(opts.redis)
    stack.push_async_callback(client.aclose)

    async def private(name: str, code: Path | None) -> Run:
        logs = folder / name
        logs.mkdir()
        prefix, database = f"tgbench-{run_id}-{name}", f"turngate_bench_{run_id}_{name}"
        run = Run(opts.redis, opts.postgres, prefix, database, logs, code=code)
        await create_database(run.postgres_admin, run.database)
        stack.push_async_callback(drop_database, run.postgres_admin, run.database)
        stack.push_async_callback(delete_prefix, client, run.prefix)
        return run

    runs = [await private("now", None)]
    if before:
        runs.append(await private("before", before))
    print(facts_lines(await machine_facts(client, runs[0].postgres_admin)))
    progress(f"redis prefixes {', '.join(r.prefix for r in runs)}")

    async def replica(run: Run) -> Endpoint:
        (endpoint,) = await start_replicas(stack, run, ("turngate",), separate_projector=True)
        return endpoint

    floor, now, *old = await asyncio.gather(start_floor(stack, runs[0]), *(replica(run) for run in runs))

    async def drain() -> None:
        for run in runs:
            await drain_ledger(client, run.keys)

    return Servers(floor, REDIS_GET, "gRPC + 1 Redis GET", now, old[0] if old else None, drain)


async def has_queue(stubs: Stubs, name: str) -> bool:
    """Whether the server queues an ENQUEUE behind an active turn (this code does; code from
    before the queue does not know the field, so refuses it as REJECT): proves which code runs."""
    ref = session(f"{name}-probe-queue")
    await admit_lease(stubs, ref, "holder")
    try:
        reply = await admit(stubs, ref, "queued", pb.ADMISSION_MODE_ENQUEUE, QUEUED_RUNNER)
    except grpc.aio.AioRpcError as error:
        if error.code() != grpc.StatusCode.ABORTED:
            raise
        return False
    return reply.HasField("queued")


# ---------------------------------------------------------------------------------------------
# REJECT admission, before and after


async def refused(stubs: Stubs, ref: pb.SessionRef, turn_id: str) -> None:
    """AdmitTurn on a session another turn holds: refused (SESSION_TURN_IN_USE)."""
    try:
        reply = await admit(stubs, ref, turn_id)
    except grpc.aio.AioRpcError as error:
        if error.code() != grpc.StatusCode.ABORTED:
            raise
        return
    raise RuntimeError(f"{turn_id} was admitted on a busy session: {reply}")


async def refusals(stubs: Stubs, name: str) -> Iterator[Call]:
    """Endless refused admissions: a turn holds the session, each call asks for another."""
    ref = session(f"{name}-busy")
    await admit_lease(stubs, ref, "holder")
    return (functools.partial(refused, stubs, ref, f"refused-{i}") for i in itertools.count())


ADMIT, REJECT = "AdmitTurn, no mode", "AdmitTurn, mode=REJECT"
ENQUEUE, REFUSED = "AdmitTurn, mode=ENQUEUE (idle)", "AdmitTurn refused (in use)"
# Timed in turn, this code's and the code before the queue's: AdmitTurn with no mode, the refusal.
ADMIT_NOW, ADMIT_BEFORE = "in turn, this code: AdmitTurn, no mode", "in turn, before: AdmitTurn, no mode"
REFUSED_NOW, REFUSED_BEFORE = "in turn, this code: AdmitTurn refused", "in turn, before: AdmitTurn refused"


async def contenders(servers: Servers) -> list[list[Contender]]:
    """The units a round times: the floor's two calls and turngate's, each alone; then (if the
    code before the queue is measured) AdmitTurn with no mode and the refusal, each in turn with
    the same call on the code before the queue (otherwise the refusal alone)."""
    now, before, floor = servers.now, servers.before, servers.floor

    def alone(name: str, server: Endpoint, calls: Iterator[Call]) -> list[Contender]:
        return [Contender(name, calls=calls, meters=server.meters())]

    def pair(
        name: str, calls: Iterator[Call], name_before: str, calls_before: Iterator[Call]
    ) -> list[Contender]:
        """This code's call and the code before the queue's, in turn."""
        assert before is not None
        return [
            Contender(name_before, calls=calls_before, meters=before.meters(), in_turn=True),
            Contender(name, name_before, calls=calls, meters=now.meters(), in_turn=True),
        ]

    units = [
        alone("floor: empty gRPC call", floor, floor_calls(floor.channel, EMPTY)),
        alone(f"floor: {servers.floor_name}", floor, floor_method_calls(servers)),
        alone(ADMIT, now, Caller(now.stubs, "unset").admits()),
        alone(REJECT, now, Caller(now.stubs, "reject", pb.ADMISSION_MODE_REJECT).admits()),
        alone(ENQUEUE, now, Caller(now.stubs, "enqueue", pb.ADMISSION_MODE_ENQUEUE).admits()),
    ]
    if before is None:
        return [*units, alone(REFUSED, now, await refusals(now.stubs, "now"))]
    return [
        *units,
        pair(
            ADMIT_NOW,
            Caller(now.stubs, "paired").admits(),
            ADMIT_BEFORE,
            Caller(before.stubs, "before").admits(),
        ),
        pair(
            REFUSED_NOW,
            await refusals(now.stubs, "now"),
            REFUSED_BEFORE,
            await refusals(before.stubs, "before"),
        ),
    ]


def floor_method_calls(servers: Servers) -> Iterator[Call]:
    """The floor's store call: a SQLite write of a new row each call (as each AdmitTurn here is of
    a new session), or a Redis GET."""
    if servers.floor_method == SQLITE_WRITE:
        return floor_writes(servers.floor.channel, "floor")
    return floor_calls(servers.floor.channel, servers.floor_method)


def admission_table(rows: Sequence[Contender]) -> str:
    empty, floor = rows[0].latency, rows[1].latency
    by_name = {row.name: row for row in rows}

    def against_before(row: Contender) -> str:
        if row.paired_with is None:
            return "-"
        ratios = paired(row, by_name[row.paired_with])
        return f"{statistics.median(ratios):.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f})"

    def line(row: Contender) -> list[str]:
        lat = row.latency
        floors = [lat.p50 / floor.p50, lat.p99 / floor.p99, lat.p50 / empty.p50]
        return [
            row.name,
            str(lat.n),
            fmt_ms(lat.p50),
            fmt_ms(lat.p99),
            *(["-"] * len(floors) if row.in_turn else [fmt_times(ratio) for ratio in floors]),
            against_before(row),
            f"{lat.cpu_us_per_call('server'):.0f}",
        ]

    headers = ["1 caller, sequential", "n", "p50 ms", "p99 ms", "p50/floor", "p99/floor", "p50/empty"]
    headers += ["p50/before: median of rounds (range)", "server CPU us/call"]
    return table("REJECT admission, before and after the queue", headers, [line(row) for row in rows])


# ---------------------------------------------------------------------------------------------
# ENQUEUE → promotion


@dataclass(frozen=True, slots=True)
class Promotion:
    """One promotion's moments (perf_counter seconds)."""

    sent: float  # CompleteTurn(t1) sent
    answered: float  # its answer arrived
    told: float  # t2's runner's stream yielded turn_admitted{from_queue} for t2
    holds: float  # t2's AdmitTurn, sent again on that event, returned the lease


async def _answered(call: Awaitable[object]) -> float:
    await call
    return time.perf_counter()


async def promote_once(stubs: Stubs, ref: pb.SessionRef, inbox: Inbox, i: int) -> Promotion:
    """t1 admitted, t2 queued behind it by a second runner whose watch (`inbox`) has seen it
    queued; then t1 completes, and t2's runner, told by its watch, sends its AdmitTurn again. The
    session is idle again at the end (t2 completed, its watch has seen it)."""
    first, second = f"first-{i}", f"second-{i}"
    lease = await admit_lease(stubs, ref, first)
    queued = await admit(stubs, ref, second, pb.ADMISSION_MODE_ENQUEUE, QUEUED_RUNNER)
    if not queued.HasField("queued"):
        raise RuntimeError(f"{second} was not queued behind {first}: {queued}")
    await inbox.next_event("turn_queued", lambda e: e.turn_queued.turn.turn_id == second)
    sent = time.perf_counter()
    completion = asyncio.create_task(_answered(complete(stubs, lease, pb.TURN_OUTCOME_COMPLETED)))
    told, event = await inbox.next_event("turn_admitted", lambda e: e.turn_admitted.turn.turn_id == second)
    again = await admit(stubs, ref, second, pb.ADMISSION_MODE_ENQUEUE, QUEUED_RUNNER)
    holds = time.perf_counter()
    answered = await completion
    if not (event.turn_admitted.from_queue and again.HasField("lease") and again.replayed):
        raise RuntimeError(f"{second} was not promoted from the queue: {event}, then {again}")
    await complete(stubs, again.lease, pb.TURN_OUTCOME_COMPLETED)
    await inbox.next_event("turn_settled", lambda e: e.turn_settled.turn.turn_id == second)
    return Promotion(sent, answered, told, holds)


async def promotions(stubs: Stubs, *, name: str, sessions: int, count: int, warmup: int) -> list[Promotion]:
    """Promotions one at a time, round-robin over `sessions` sessions, each watched by the
    queued turns' runner."""
    refs = [session(f"{name}-{i}") for i in range(sessions)]
    inboxes = [Inbox() for _ in refs]
    watchers = [Watcher.of_session(stubs, ref, inbox.put) for ref, inbox in zip(refs, inboxes, strict=True)]
    try:
        for inbox in inboxes:
            await inbox.next("snapshot")
        rounds = zip(range(warmup + count), itertools.cycle(zip(refs, inboxes, strict=True)), strict=False)
        done = [await promote_once(stubs, ref, inbox, i) for i, (ref, inbox) in rounds]
    finally:
        await close_all(watchers)
    return done[warmup:]


@dataclass
class PromotionResults:
    promoted: list[Promotion] = field(default_factory=list)
    stops: list[float] = field(default_factory=list)

    def rows(self) -> list[tuple[str, Latency, bool]]:
        """Each measure, and whether it runs from a sent call (so compares with the floors)."""
        p = self.promoted
        return [
            ("CompleteTurn(t1): sent → answered", Latency([x.answered - x.sent for x in p]), True),
            ("told: CompleteTurn sent → watch has it", Latency([x.told - x.sent for x in p]), True),
            ("told: CompleteTurn answered → watch has it", Latency([x.told - x.answered for x in p]), False),
            ("holds lease: CompleteTurn sent → lease", Latency([x.holds - x.sent for x in p]), True),
            ("holds lease: CompleteTurn answered → lease", Latency([x.holds - x.answered for x in p]), False),
        ]


def promotion_table(empty: Latency, results: PromotionResults) -> str:
    push = Latency(results.stops)

    def line(name: str, lat: Latency, from_sent: bool) -> list[str]:
        ratios = (
            [fmt_times(lat.p50 / push.p50), fmt_times(lat.p99 / push.p99), fmt_times(lat.p50 / empty.p50)]
            if from_sent
            else ["-", "-", "-"]
        )
        return [name, str(lat.n), fmt_ms(lat.p50), fmt_ms(lat.p99), fmt_ms(lat.max), *ratios]

    headers = ["ENQUEUE → promotion", "n", "p50 ms", "p99 ms", "max ms", "p50/push", "p99/push", "p50/empty"]
    rows = [
        line("floor: empty gRPC call", empty, True),
        line("push: Stop sent → runner's watch has it", push, True),
        *(line(name, lat, from_sent) for name, lat, from_sent in results.rows()),
    ]
    return table("Promotion latency (t2's runner watches; this code)", headers, rows)


# ---------------------------------------------------------------------------------------------
# The run


def targets(store: str, rows: Sequence[Contender], before_commit: str) -> list[Target]:
    """REJECT admission against the issue-12 target of its store, and against the code before the
    queue in this run."""
    limit = EMBEDDED_ADMIT_P50_TARGET if store == "embedded" else REDIS_ADMIT_P50_TARGET
    by_name = {row.name: row for row in rows}
    floor = rows[1].latency.p50
    found = [
        Target(
            f"{store}: REJECT AdmitTurn p50 / floor p50 ({mode})",
            by_name[name].latency.p50 / floor,
            limit,
            "x",
        )
        for mode, name in (("no mode", ADMIT), ("mode=REJECT", REJECT))
    ]
    if before_commit:
        found += [
            Target(
                f"{store}: {what} p50, this code / before the queue ({before_commit})",
                statistics.median(paired(by_name[name], by_name[before])),
                BEFORE_AFTER_TARGET,
                "x",
            )
            for what, name, before in (
                ("REJECT AdmitTurn", ADMIT_NOW, ADMIT_BEFORE),
                ("AdmitTurn refused", REFUSED_NOW, REFUSED_BEFORE),
            )
        ]
    return found


async def measure(opts: Options, servers: Servers) -> tuple[list[Contender], PromotionResults]:
    units = await contenders(servers)
    for r in range(opts.rounds):
        progress(f"REJECT admission, round {r + 1} of {opts.rounds}")
        await run_round(units, r, opts.calls, opts.warmup, servers.drain)
    rows = [row for unit in units for row in unit]
    results = PromotionResults()
    stubs = servers.now.stubs
    per_round = max(1, opts.promotions // opts.rounds)
    for r in range(opts.rounds):
        progress(f"ENQUEUE → promotion and Stop → notified, round {r + 1} of {opts.rounds}")
        await servers.drain()
        stops = await stop_to_notified(
            stubs,
            stubs,
            stubs,
            name=f"stop-{r}",
            sessions=opts.sessions,
            stops=per_round,
            warmup=per_round // 10,
        )
        results.stops += stops.samples
        await servers.drain()
        results.promoted += await promotions(
            stubs, name=f"queue-{r}", sessions=opts.sessions, count=per_round, warmup=per_round // 10
        )
    return rows, results


async def main(opts: Options) -> int:
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    print(f"load average at start: {load_average()} (1, 5, 15 min; other work moves the figures)")
    async with AsyncExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tgbench-modes-")))
        before_code, before_commit, before_note = None, "", "not measured"
        if opts.before:
            try:
                before_commit = export_revision(opts.before, folder / "before-code")
                before_code = folder / "before-code"
            except LookupError as error:
                before_note = f"not measured ({error})"
        progress(f"this code: {CODE}; before: {before_commit or before_note}")
        if opts.store == "embedded":
            servers = await embedded_servers(stack, folder, before_code)
        else:
            servers = await redis_servers(stack, opts, folder, before_code)
        if not await has_queue(servers.now.stubs, "now"):
            raise RuntimeError(f"the server of {CODE} has no turn queue: not issue 13's code")
        if servers.before is not None:
            found = "has the queue" if await has_queue(servers.before.stubs, "before") else "no queue"
            before_note = f"{before_commit} ({found})"
        await asyncio.sleep(SETTLE_S)
        rows, results = await measure(opts, servers)
        for endpoint in (servers.floor, servers.now, servers.before):
            if endpoint is not None:
                endpoint.process.check_alive()
        print(
            "\n".join(
                [
                    admission_table(rows),
                    promotion_table(rows[0].latency, results),
                    target_table(targets(opts.store, rows, before_commit)),
                    f"store: {opts.store}; this code: {CODE}; before: {before_note}",
                    f"load average at end: {load_average()}",
                ]
            )
        )
    return 0


if __name__ == "__main__":
    run_benchmark(main(parse_options()))
