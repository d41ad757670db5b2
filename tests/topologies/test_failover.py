"""Failovers under load (issue 11, item 9): a Redis Cluster (node timeout 1 s) and a Sentinel
setup (down-after 1 s) of this module's own, each failover with a fresh PostgreSQL ledger and 2
`turngate serve` replicas (every Redis call bounded by 1 s) under 16 runners (tests/topologies/
load.py). The harness forces each interleaving: a master is frozen (SIGSTOP) or killed (SIGKILL),
the test waits for the topology to fail over, and brings the old master back as a replica.

Without WAIT, the service must serve again without the old master, within node timeout (or
down-after) + 5 s of the fault: the old master comes back only after the load. With WAIT 1, the
failed shard's new master has no replica until its old master rejoins (each master of these
topologies has one replica), so nothing written there can be acknowledged before: the old master
comes back once the shard's runners have called its successor, and the tests then prove that no
acknowledged write was lost, and that nothing was acknowledged while the shard had no replica.

What each failover proves is one test; several tests read the same failover (one module fixture
each, run once). Run with -s for the numbers: time to fail over, to serve again, calls failed by
code, and acknowledged writes lost with and without WAIT (TURNGATE_REDIS_WAIT_REPLICAS=1).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from tests.support.calls import events_after, get_turn, snapshot
from tests.support.logs import ledger_logs, redis_logs
from tests.support.postgres import postgres_database, postgres_url
from tests.support.replicas import BUCKETS, Deployment
from tests.support.servers import Client
from tests.support.shared_redis import unique_prefix
from tests.support.topologies import RedisCluster, RedisProcess, RedisSentinel
from tests.support.waiting import POLL_INTERVAL_S, eventually
from tests.topologies.load import (
    Call,
    Load,
    Runner,
    Write,
    admit_expiring,
    key_of,
    lost_writes,
    replicas_with,
    session_log,
    sessions_by_bucket,
)
from turngate.service.core import Event, SessionKey, SettledBy, TurnOutcome, TurnSettled
from turngate.service.store.redis.connection import Client as RedisClient
from turngate.service.store.redis.connection import connect
from turngate.service.store.redis.keys import Keyspace
from turngate.v1 import turngate_pb2 as pb

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

Topology = RedisCluster | RedisSentinel

RUNNERS = 16
REPLICAS = 2
# How long a master may be silent before it is failed over, from the fault until the failover:
NODE_TIMEOUT_MS = 1_000
DOWN_AFTER_MS = 1_000
# and at every other time, so that a busy machine stalling a healthy master for a second (as it
# once did in CI, while the old primary resynced) does not fail it over a second time.
CALM_TIMEOUT_MS = 10_000
# The bound: every runner gets a call through within node timeout (down-after) + this.
SERVE_AGAIN_MARGIN_S = 5.0
# Turns nobody heartbeats, admitted before the fault: they expire while the topology fails over.
EXPIRING_LEASE_S = 2.0
# The load's leases outlast any failover's outage, also on a busy machine (with WAIT, nothing is
# acknowledged until the old master rejoins): a lease that ran out meanwhile would rightly refuse
# its runner's next write (TURN_NOT_ACTIVE), which is not what these tests measure.
LOAD_LEASE_S = 60.0
WITHOUT_WAIT = {"TURNGATE_REDIS_TIMEOUT": "1"}
WITH_WAIT = {**WITHOUT_WAIT, "TURNGATE_REDIS_WAIT_REPLICAS": "1"}
# Bounds of waits that end long before them unless a test fails.
WARM_UP_TIMEOUT_S = 20.0
RECOVERY_TIMEOUT_S = 30.0
LEDGER_TIMEOUT_S = 20.0
SETTLE_TIMEOUT_S = 20.0
READ_TIMEOUT_S = 2.0
# With WAIT, the failed shard's new master has no replica until the old one rejoins: the old
# master is brought back once each runner of that shard has sent it this many calls.
CALLS_TO_THE_LONE_MASTER = 3


class Fault(Enum):
    FREEZE = "frozen"  # SIGSTOP, then SIGCONT
    KILL = "killed"  # SIGKILL, then started again


class Return(Enum):
    """When the old master is brought back (thawed or restarted) to rejoin as a replica."""

    AFTER_THE_LOAD = "after the load"  # the service had to serve again without it
    ONCE_CALLED = "once the runners of its shard have called its lone successor"
    AT_ONCE = "as soon as the topology failed over"  # Sentinel split brain: before it is demoted


# --- one failover under load -----------------------------------------------------------------


@dataclass
class Expiring:
    """A turn nobody heartbeats, admitted before the fault, and what became of it."""

    session: pb.SessionRef
    on_failed_shard: bool
    master_port: int
    lease_expires_at: float  # seconds since the epoch, as the admission said
    log: list[Event] = field(default_factory=list)
    record: pb.TurnRecord | None = None
    settled_after_expiry_s: float | None = None


@dataclass
class Failover:
    """One failover under load, and everything measured and read after it."""

    title: str
    wait: bool
    tmp: Path
    bound_s: float  # node timeout (or down-after) + the margin
    masters: int
    load: Load
    failed_shard: set[int]  # runners whose session's master failed
    fault_at: float = 0.0
    failed_over_at: float = 0.0
    returned_at: float = 0.0  # the old master thawed or restarted
    rejoined_at: float = 0.0
    old_master_scripts: int | None = None
    expiring: list[Expiring] = field(default_factory=list)
    logs: dict[SessionKey, list[Event]] = field(default_factory=dict)
    lost: list[tuple[int, Write]] = field(default_factory=list)
    replica_differs: list[str] = field(default_factory=list)
    listing_differs: list[str] = field(default_factory=list)
    ledger_differs: list[SessionKey] = field(default_factory=list)
    tracebacks: list[str] = field(default_factory=list)

    # --- what the tests assert ----------------------------------------------------------------

    def since_fault(self) -> list[Call]:
        return [call for call in self.load.calls() if call.started >= self.fault_at]

    def failed(self) -> list[Call]:
        return [call for call in self.load.calls() if call.failed]

    def refused(self) -> list[Call]:
        return [call for call in self.load.calls() if call.refused]

    def misled(self) -> list[list[Call]]:
        """The steps whose failed attempts all said "nothing was changed", though the step's answer
        shows one of them took effect (load.py)."""
        return [failures for runner in self.load.runners for failures in runner.misled]

    def served_again_s(self) -> float | None:
        return self.load.every_runner_succeeded_since(self.fault_at)

    def first_success_on_failed_shard_s(self) -> float | None:
        return self.load.first_success_since(self.fault_at, self.failed_shard)

    def unreplicated_acknowledgements(self) -> list[Call]:
        """Calls of the failed shard's runners acknowledged between the fault and the old master's
        return: its successor, the shard's only data node then, had no replica to confirm them."""
        return [
            call
            for call in self.load.calls(self.failed_shard)
            if call.ok and call.started >= self.fault_at and call.ended < self.returned_at
        ]

    def gaps(self) -> list[str]:
        return [
            f"{key.session_id}: {[event.seq for event in log]}"
            for key, log in self.logs.items()
            if [event.seq for event in log] != list(range(1, len(log) + 1))
        ]

    def described(self, calls: Sequence[Call]) -> list[str]:
        """Each call, its times since the fault, and the call its runner made before it."""
        described = []
        for call in calls:
            history = self.load.runners[call.runner].calls
            before = history[history.index(call) - 1] if history.index(call) else None
            described.append(
                f"r{call.runner} {call.step} {call.code} +{call.started - self.fault_at:.3f}..+"
                f"{call.ended - self.fault_at:.3f} s"
                + (
                    f" (after {before.step} {before.code} in {before.ended - before.started:.2f} s)"
                    if before
                    else ""
                )
            )
        return described

    def lost_described(self) -> list[str]:
        """Each acknowledged write lost, and the call that was told it was written."""
        return [
            f"{write.kind} {write.turn_id} (status {write.status}): "
            + self.described([self.load.runners[runner].acknowledged_by[write]])[0]
            for runner, write in self.lost
        ]

    def lost_by_kind(self) -> Counter[str]:
        return Counter(write.kind for _, write in self.lost)

    def acknowledged_by_kind(self) -> Counter[str]:
        return Counter(write.kind for runner in self.load.runners for write in runner.acknowledged)

    def report(self) -> None:
        """Prints every number measured (pytest -s)."""
        calls, failed, refused = self.load.calls(), self.failed(), self.refused()
        slowest_failure = max((call.ended - call.started for call in failed), default=0.0)
        slowest_success = max((c.ended - c.started for c in self.since_fault() if c.ok), default=0.0)
        acknowledged, lost = self.acknowledged_by_kind(), self.lost_by_kind()
        lost_shares = ", ".join(f"{kind} {lost[kind]}/{acknowledged[kind]}" for kind in sorted(acknowledged))
        old_master = (
            ""
            if self.old_master_scripts is None
            else f"; EVALSHA calls it served from just before the fault on: {self.old_master_scripts}"
        )
        lines = [
            f"[{self.title}] (replica logs: {self.tmp}/serve-*.log)",
            f"failover {self.failed_over_at - self.fault_at:.2f} s after the fault; first success on the "
            f"failed shard ({len(self.failed_shard)} of {RUNNERS} runners) "
            f"{_s(self.first_success_on_failed_shard_s())}; every runner succeeding "
            f"{_s(self.served_again_s())} (bound {self.bound_s:.1f} s)",
            f"old master back {self.returned_at - self.fault_at:.2f} s after the fault, rejoined as a "
            f"replica {self.rejoined_at - self.returned_at:.2f} s later{old_master}",
            f"calls: {len(calls)}, {sum(call.ok for call in calls)} acknowledged, {len(failed)} failed "
            f"{dict(Counter(f'{c.code} {c.reason}'.strip() for c in failed))} "
            f"(slowest failure {slowest_failure:.2f} s; "
            f"slowest success since the fault {slowest_success:.2f} s), {len(refused)} refused "
            f"{dict(Counter(call.reason for call in refused))}, "
            f"{sum(runner.abandoned for runner in self.load.runners)} heartbeats answered ABANDON",
            f"acknowledged writes lost: {len(self.lost)} of {sum(acknowledged.values())} ({lost_shares}); "
            f"acknowledged on the failed shard between the fault and the old master's return: "
            f"{len(self.unreplicated_acknowledgements())}",
            f"logs with gaps: {len(self.gaps())}; differing through a replica: {len(self.replica_differs)}; "
            f"completions missing from ListTurns: {len(self.listing_differs)}; sessions whose ledger "
            f"differs from their log: {len(self.ledger_differs)}; replica logs with a traceback: "
            f"{self.tracebacks}; steps told 'nothing was changed' of a write that took effect: "
            f"{len(self.misled())}",
        ]
        if self.lost:
            lines.append(f"lost: {self.lost_described()}")
        if self.expiring:
            lines.append(
                "expired turns settled, after their lease ended: "
                + ", ".join(
                    f"{_s(turn.settled_after_expiry_s)}{' (failed shard)' if turn.on_failed_shard else ''}"
                    for turn in self.expiring
                )
            )
        print("\n" + "\n  ".join(lines))


def _s(value: float | None) -> str:
    return "never" if value is None else f"{value:.2f} s"


async def master_under(topology: Topology, keys: Keyspace, session: pb.SessionRef) -> RedisProcess:
    """The master holding the session's keys."""
    if isinstance(topology, RedisCluster):
        return await topology.master_of(keys.doc(key_of(session)))
    return await topology.primary()


async def scripts_run(node: RedisProcess) -> int:
    stats = await node.query("INFO", "commandstats")
    return sum(int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in ("evalsha", "eval"))


async def waited_for(what: str, check: Callable[[], bool], timeout_s: float) -> None:
    try:
        await eventually(check, timeout_s=timeout_s)
    except TimeoutError:
        raise AssertionError(f"waited {timeout_s} s for {what}") from None


async def fail_over_under_load(
    topology: Topology, tmp: Path, *, title: str, fault: Fault, wait: bool, back: Return
) -> Failover:
    """Runs the load on 2 fresh replicas (a fresh ledger, a prefix of their own), fails the master
    of the first runner's session, waits for the failover and for every runner to get a call
    through (and complete a turn) again, brings the old master back when `back` says, and reads
    everything the tests assert."""
    timeout_ms = NODE_TIMEOUT_MS if isinstance(topology, RedisCluster) else DOWN_AFTER_MS
    async with postgres_database("turngate_failover") as database:
        deployment = Deployment(topology.url, unique_prefix(), postgres_url(database), lease_ttl=LOAD_LEASE_S)
        keys = deployment.keys
        async with replicas_with(deployment, tmp, REPLICAS, WITH_WAIT if wait else WITHOUT_WAIT) as servers:
            clients = [server.client for server in servers]
            sessions = sessions_by_bucket(keys, RUNNERS, "run")
            owners = [await master_under(topology, keys, session) for session in sessions]
            target = owners[0]
            run = Failover(
                title=title,
                wait=wait,
                tmp=tmp,
                bound_s=timeout_ms / 1000 + SERVE_AGAIN_MARGIN_S,
                masters=len(set(owners)),
                load=Load(clients, sessions),
                failed_shard={i for i, owner in enumerate(owners) if owner is target},
            )
            try:
                async with run.load as load:
                    await waited_for(
                        "every runner to complete a turn",
                        lambda: all(runner.completed_at for runner in load.runners),
                        WARM_UP_TIMEOUT_S,
                    )
                    if wait:
                        run.expiring = await admit_expiring_turns(topology, keys, clients, target)
                    scripts_before = await scripts_run(target)

                    await topology.detect_failures_within(timeout_ms)
                    run.fault_at = time.monotonic()
                    if fault is Fault.FREEZE:
                        topology.freeze(target)
                    else:
                        await topology.kill(target)
                    await topology.wait_for_failover(target)
                    run.failed_over_at = time.monotonic()
                    await topology.detect_failures_within(CALM_TIMEOUT_MS)

                    if back is Return.ONCE_CALLED:
                        await waited_for(
                            f"each runner of the failed shard to call it {CALLS_TO_THE_LONE_MASTER} times",
                            lambda: all(
                                len([c for c in load.runners[i].calls if c.started >= run.failed_over_at])
                                >= CALLS_TO_THE_LONE_MASTER
                                for i in run.failed_shard
                            ),
                            RECOVERY_TIMEOUT_S,
                        )
                    if back is not Return.AFTER_THE_LOAD:
                        await bring_back(run, topology, target, fault)
                    await waited_for(
                        "every runner to get a call through and complete a turn again",
                        lambda: (
                            run.served_again_s() is not None
                            and load.every_runner_completed_since(run.fault_at)
                        ),
                        RECOVERY_TIMEOUT_S,
                    )
                if back is Return.AFTER_THE_LOAD:
                    await bring_back(run, topology, target, fault)
            finally:
                if run.fault_at and not run.returned_at:  # a failure on the way: leave the topology whole
                    await bring_back(run, topology, target, fault)
            if fault is Fault.FREEZE:
                run.old_master_scripts = await scripts_run(target) - scripts_before

            redis = connect(topology.url, READ_TIMEOUT_S)
            ledger = create_async_engine(deployment.ledger_url)
            try:
                await read_back(run, keys, clients, redis, ledger)
            finally:
                await redis.aclose()
                await ledger.dispose()
    run.tracebacks = tracebacks_in(tmp)
    run.report()
    return run


def tracebacks_in(tmp: Path) -> list[str]:
    """The replica logs in `tmp` holding a traceback."""
    return [log.name for log in sorted(tmp.glob("serve-*.log")) if "Traceback" in log.read_text()]


async def bring_back(run: Failover, topology: Topology, target: RedisProcess, fault: Fault) -> None:
    run.returned_at = time.monotonic()
    if fault is Fault.FREEZE:
        topology.thaw(target)
    else:
        await topology.restart(target)
    await topology.wait_for_rejoin(target)
    run.rejoined_at = time.monotonic()
    await topology.detect_failures_within(CALM_TIMEOUT_MS)  # the returned node too


async def admit_expiring_turns(
    topology: Topology, keys: Keyspace, clients: Sequence[Client], target: RedisProcess
) -> list[Expiring]:
    """A turn nobody heartbeats in a session of every bucket (so on every master)."""
    expiring = []
    for i, session in enumerate(sessions_by_bucket(keys, BUCKETS, "expiring")):
        master = await master_under(topology, keys, session)
        admitted = await admit_expiring(clients[i % len(clients)], session, EXPIRING_LEASE_S)
        expires_at = admitted.lease_expires_at.ToNanoseconds() / 1e9
        expiring.append(Expiring(session, master is target, master.port, expires_at))
    return expiring


async def read_back(
    run: Failover, keys: Keyspace, clients: Sequence[Client], redis: RedisClient, ledger: AsyncEngine
) -> None:
    """The expired turns' settlements, the session logs (in Redis, and through the replicas), the
    ledger once the projectors have caught up, and then ListTurns (which shows a settled turn from
    the ledger, or from the few the session document keeps until it is projected)."""
    for turn in run.expiring:
        await settled_by_the_watchdog(turn, clients, keys, redis)
        run.logs[key_of(turn.session)] = turn.log
    for runner in run.load.runners:
        log = await session_log(redis, keys, runner.key)
        run.logs[runner.key] = log
        run.lost += [(runner.index, write) for write in lost_writes(runner, log)]
        client = clients[runner.index % len(clients)]
        if (difference := await differs_through(client, runner.session, log)) is not None:
            run.replica_differs.append(f"{runner.session.session_id}: {difference}")
    timeout_s = LEDGER_TIMEOUT_S if run.wait else LEDGER_TIMEOUT_S / 2
    run.ledger_differs = await ledger_differences(ledger, redis, keys, list(run.logs), timeout_s)
    for runner in run.load.runners:
        other = clients[(runner.index + 1) % len(clients)]
        if missing := await completions_not_listed(other, runner):
            run.listing_differs.append(f"{runner.session.session_id}: {missing}")


async def differs_through(client: Client, session: pb.SessionRef, log: list[Event]) -> str | None:
    """How the log read through a replica (its head, and the events after seq 1 replayed by a
    watch) differs from the log in Redis; None if it does not."""
    head = (await snapshot(client, session)).seq
    if head != len(log):
        return f"head {head} through the replica, {len(log)} events in Redis"
    if head < 2:
        return None
    seen = [(event.seq, str(event.WhichOneof("kind"))) for event in await events_after(client, session, 1)]
    stored = [(event.seq, event.body.kind) for event in log[1:]]
    return None if seen == stored else f"replayed {seen}, stored {stored}"


async def completions_not_listed(client: Client, runner: Runner) -> list[str]:
    """Completions acknowledged to `runner` that ListTurns (through `client`) does not show."""
    listing = await client.sessions.ListTurns(pb.ListTurnsRequest(session=runner.session, page_size=500))
    completed = {
        (turn.turn_id, turn.generation)
        for turn in listing.turns
        if turn.outcome == pb.TURN_OUTCOME_COMPLETED and turn.settled_by == pb.SETTLED_BY_RUNNER
    }
    return [
        write.turn_id
        for write in runner.acknowledged
        if write.kind == "completed" and (write.turn_id, write.generation) not in completed
    ]


async def settled_by_the_watchdog(
    turn: Expiring, clients: Sequence[Client], keys: Keyspace, redis: RedisClient
) -> None:
    """Waits until the turn's session is idle again, then reads its log and its record."""
    client = clients[0]

    async def idle() -> bool:
        return (await snapshot(client, turn.session)).phase == pb.SESSION_PHASE_IDLE

    with contextlib.suppress(TimeoutError):  # the test says so: the log shows no settlement
        await eventually(idle, timeout_s=SETTLE_TIMEOUT_S)
    turn.log = await session_log(redis, keys, key_of(turn.session))
    turn.record = await get_turn(clients[1], turn.session, "x1")
    if turn.record.HasField("settled_at"):
        turn.settled_after_expiry_s = turn.record.settled_at.ToNanoseconds() / 1e9 - turn.lease_expires_at


async def ledger_differences(
    ledger: AsyncEngine, redis: RedisClient, keys: Keyspace, sessions: list[SessionKey], timeout_s: float
) -> list[SessionKey]:
    """The sessions whose ledger rows still differ from their Redis log after `timeout_s` (none,
    once the projectors have caught up)."""
    deadline = time.monotonic() + timeout_s
    while True:
        source, projected = await redis_logs(redis, keys), await ledger_logs(ledger)
        differing = [key for key in sessions if source.get(key, []) != projected.get(key, [])]
        if not differing or time.monotonic() > deadline:
            return differing
        await asyncio.sleep(POLL_INTERVAL_S * 10)


# --- topologies and failovers, each run once -------------------------------------------------


@pytest.fixture(scope="module")
async def cluster(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RedisCluster]:
    async with RedisCluster.started(
        tmp_path_factory.mktemp("cluster"), node_timeout_ms=CALM_TIMEOUT_MS
    ) as topology:
        yield topology


@pytest.fixture(scope="module")
async def sentinel(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RedisSentinel]:
    async with RedisSentinel.started(
        tmp_path_factory.mktemp("sentinel"), down_after_ms=CALM_TIMEOUT_MS
    ) as topology:
        yield topology


async def _run(
    topology: Topology,
    factory: pytest.TempPathFactory,
    title: str,
    fault: Fault,
    *,
    wait: bool,
    back: Return,
) -> Failover:
    tmp = factory.mktemp(title.replace(" ", "-").replace(",", ""))
    return await fail_over_under_load(topology, tmp, title=title, fault=fault, wait=wait, back=back)


@pytest.fixture(scope="module")
async def cluster_master_frozen(cluster: RedisCluster, tmp_path_factory: pytest.TempPathFactory) -> Failover:
    return await _run(
        cluster,
        tmp_path_factory,
        "cluster, master frozen",
        Fault.FREEZE,
        wait=False,
        back=Return.AFTER_THE_LOAD,
    )


@pytest.fixture(scope="module")
async def cluster_master_killed(cluster: RedisCluster, tmp_path_factory: pytest.TempPathFactory) -> Failover:
    return await _run(
        cluster,
        tmp_path_factory,
        "cluster, master killed",
        Fault.KILL,
        wait=False,
        back=Return.AFTER_THE_LOAD,
    )


@pytest.fixture(scope="module")
async def cluster_master_frozen_with_wait(
    cluster: RedisCluster, tmp_path_factory: pytest.TempPathFactory
) -> Failover:
    return await _run(
        cluster,
        tmp_path_factory,
        "cluster, master frozen, with WAIT",
        Fault.FREEZE,
        wait=True,
        back=Return.ONCE_CALLED,
    )


@pytest.fixture(scope="module")
async def sentinel_primary_frozen(
    sentinel: RedisSentinel, tmp_path_factory: pytest.TempPathFactory
) -> Failover:
    return await _run(
        sentinel,
        tmp_path_factory,
        "sentinel, primary frozen",
        Fault.FREEZE,
        wait=False,
        back=Return.AFTER_THE_LOAD,
    )


@pytest.fixture(scope="module")
async def sentinel_primary_killed(
    sentinel: RedisSentinel, tmp_path_factory: pytest.TempPathFactory
) -> Failover:
    return await _run(
        sentinel,
        tmp_path_factory,
        "sentinel, primary killed",
        Fault.KILL,
        wait=False,
        back=Return.AFTER_THE_LOAD,
    )


@pytest.fixture(scope="module")
async def sentinel_primary_frozen_with_wait(
    sentinel: RedisSentinel, tmp_path_factory: pytest.TempPathFactory
) -> Failover:
    return await _run(
        sentinel,
        tmp_path_factory,
        "sentinel, primary frozen, with WAIT",
        Fault.FREEZE,
        wait=True,
        back=Return.ONCE_CALLED,
    )


@pytest.fixture(scope="module")
async def sentinel_split_brain_with_wait(
    sentinel: RedisSentinel, tmp_path_factory: pytest.TempPathFactory
) -> Failover:
    return await _run(
        sentinel,
        tmp_path_factory,
        "sentinel, split brain, with WAIT",
        Fault.FREEZE,
        wait=True,
        back=Return.AT_ONCE,
    )


@pytest.fixture(scope="module")
async def sentinel_split_brain(sentinel: RedisSentinel, tmp_path_factory: pytest.TempPathFactory) -> Failover:
    return await _run(
        sentinel, tmp_path_factory, "sentinel, split brain", Fault.FREEZE, wait=False, back=Return.AT_ONCE
    )


def print_lost(run: Failover) -> None:
    wait = "with" if run.wait else "without"
    print(f"\n[{run.title}] acknowledged writes lost {wait} WAIT: {len(run.lost)} {dict(run.lost_by_kind())}")


# --- what every failover must show ----------------------------------------------------------


def assert_failed_fast_and_served_again(run: Failover) -> None:
    """Every failed call failed UNAVAILABLE (never INTERNAL, UNKNOWN or a deadline); a refusal
    only where an acknowledged write was lost (the runner was told of a state Redis no longer
    has); every runner got a call through within the bound; no replica logged a traceback."""
    failed = Counter(call.code for call in run.failed())
    assert set(failed) <= {"UNAVAILABLE"}, f"calls failed {dict(failed)}"
    refused = Counter(f"{call.step}: {call.reason}" for call in run.refused())
    assert not refused or run.lost, f"refused {dict(refused)} though no acknowledged write was lost"
    assert run.since_fault(), "no call was made after the fault"
    served_again = run.served_again_s()
    assert served_again is not None, "some runner never had a call through after the fault"
    assert served_again <= run.bound_s, (
        f"every runner had a call through {_s(served_again)} after the fault, not within {run.bound_s} s"
    )
    assert not run.tracebacks, f"tracebacks in {run.tmp}: {run.tracebacks}"


def assert_nothing_acknowledged_lost(run: Failover) -> None:
    """Every acknowledged admission, tool call and completion is in its session's log, which is
    gapless, reads the same through the replicas, and equals the ledger."""
    assert not run.lost, f"acknowledged writes lost: {run.lost_described()}"
    assert not run.gaps(), f"logs with gaps: {run.gaps()}"
    assert not run.replica_differs, f"read through a replica: {run.replica_differs}"
    assert not run.listing_differs, f"acknowledged completions ListTurns does not show: {run.listing_differs}"
    assert not run.ledger_differs, f"the ledger differs from the logs of {run.ledger_differs}"
    failed = Counter(call.code for call in run.failed())
    assert set(failed) <= {"UNAVAILABLE"}, f"calls failed {dict(failed)}"
    assert not run.refused(), f"refused: {Counter(call.reason for call in run.refused())}"
    assert not run.tracebacks, f"tracebacks in {run.tmp}: {run.tracebacks}"


def assert_nothing_claimed_unchanged_took_effect(run: Failover) -> None:
    """No step was told "nothing was changed" by every failed attempt when one of them took effect
    (docs/design.md §3.2): a WAIT that confirmed too few replicas, a reply lost to the failover, is
    WRITE_OUTCOME_UNKNOWN."""
    misled = run.misled()
    assert not misled, (
        f"{len(misled)} steps told nothing was changed, wrongly; the first: {run.described(misled[0])[:3]}"
    )


def assert_the_watchdog_settled_each_expired_turn_once(run: Failover) -> None:
    assert run.expiring, "no expiring turn was admitted"
    assert any(turn.on_failed_shard for turn in run.expiring), "no expiring turn on the failed shard"
    for turn in run.expiring:
        name = f"{turn.session.session_id} (master {turn.master_port}, failed shard: {turn.on_failed_shard})"
        assert [event.body.kind for event in turn.log] == ["turn_admitted", "turn_settled"], (
            f"{name}: {[event.body for event in turn.log]}"
        )
        settled = turn.log[1].body
        assert isinstance(settled, TurnSettled)
        assert (settled.turn.turn_id, settled.turn.outcome, settled.turn.settled_by) == (
            "x1",
            TurnOutcome.LOST,
            SettledBy.WATCHDOG,
        ), name
        assert turn.record is not None
        assert (turn.record.outcome, turn.record.settled_by) == (
            pb.TURN_OUTCOME_LOST,
            pb.SETTLED_BY_WATCHDOG,
        ), name


# --- Redis Cluster ---------------------------------------------------------------------------


async def test_cluster_master_frozen_past_node_timeout_fails_calls_fast_and_serves_again_without_restart(
    cluster_master_frozen: Failover,
) -> None:
    assert cluster_master_frozen.masters == 3, "the runners' sessions are spread over every master"
    assert_failed_fast_and_served_again(cluster_master_frozen)


async def test_cluster_master_killed_fails_calls_fast_and_serves_again_without_restart(
    cluster_master_killed: Failover,
) -> None:
    assert_failed_fast_and_served_again(cluster_master_killed)


async def test_cluster_failover_without_wait_keeps_logs_gapless_and_reports_acknowledged_writes_lost(
    cluster_master_frozen: Failover, cluster_master_killed: Failover
) -> None:
    """Documents what a failover loses without WAIT (printed, not asserted: asynchronous
    replication may lose what the old master acknowledged last); the logs stay gapless."""
    for run in (cluster_master_frozen, cluster_master_killed):
        print_lost(run)
        assert not run.gaps(), f"{run.title}: logs with gaps: {run.gaps()}"


async def test_cluster_failover_with_wait_loses_no_acknowledged_write_and_the_ledger_equals_the_logs(
    cluster_master_frozen_with_wait: Failover,
) -> None:
    assert_nothing_acknowledged_lost(cluster_master_frozen_with_wait)


async def test_cluster_with_wait_acknowledges_no_write_while_the_failed_shard_has_no_replica(
    cluster_master_frozen_with_wait: Failover,
) -> None:
    """Between the freeze and the old master's return, the failed shard's new master is its only
    data node: WAIT 1 cannot be met, so nothing written there may be acknowledged (a second
    failure of that node would lose it)."""
    run = cluster_master_frozen_with_wait
    acknowledged = run.unreplicated_acknowledgements()
    assert not acknowledged, f"acknowledged without a replica: {run.described(acknowledged)}"


async def test_cluster_failover_with_wait_never_says_nothing_changed_of_a_write_that_took_effect(
    cluster_master_frozen_with_wait: Failover,
) -> None:
    assert_nothing_claimed_unchanged_took_effect(cluster_master_frozen_with_wait)


async def test_cluster_watchdog_settles_expired_turns_on_every_shard_exactly_once_after_a_failover(
    cluster_master_frozen_with_wait: Failover,
) -> None:
    run = cluster_master_frozen_with_wait
    assert len({turn.master_port for turn in run.expiring}) == 3, "an expiring turn on every master"
    assert_the_watchdog_settled_each_expired_turn_once(run)


# --- Sentinel --------------------------------------------------------------------------------


async def test_sentinel_primary_frozen_past_down_after_fails_calls_fast_and_serves_again_without_restart(
    sentinel_primary_frozen: Failover,
) -> None:
    assert_failed_fast_and_served_again(sentinel_primary_frozen)


async def test_sentinel_primary_killed_fails_calls_fast_and_serves_again_without_restart(
    sentinel_primary_killed: Failover,
) -> None:
    assert_failed_fast_and_served_again(sentinel_primary_killed)


async def test_sentinel_failover_without_wait_keeps_logs_gapless_and_reports_acknowledged_writes_lost(
    sentinel_primary_frozen: Failover, sentinel_primary_killed: Failover
) -> None:
    for run in (sentinel_primary_frozen, sentinel_primary_killed):
        print_lost(run)
        assert not run.gaps(), f"{run.title}: logs with gaps: {run.gaps()}"


async def test_sentinel_failover_with_wait_loses_no_acknowledged_write_and_the_ledger_equals_the_logs(
    sentinel_primary_frozen_with_wait: Failover,
) -> None:
    assert_nothing_acknowledged_lost(sentinel_primary_frozen_with_wait)


async def test_sentinel_with_wait_acknowledges_no_write_while_the_new_primary_has_no_replica(
    sentinel_primary_frozen_with_wait: Failover,
) -> None:
    run = sentinel_primary_frozen_with_wait
    acknowledged = run.unreplicated_acknowledgements()
    assert not acknowledged, f"acknowledged without a replica: {run.described(acknowledged)}"


async def test_sentinel_failover_with_wait_never_says_nothing_changed_of_a_write_that_took_effect(
    sentinel_primary_frozen_with_wait: Failover, sentinel_split_brain_with_wait: Failover
) -> None:
    for run in (sentinel_primary_frozen_with_wait, sentinel_split_brain_with_wait):
        assert_nothing_claimed_unchanged_took_effect(run)


async def test_sentinel_watchdog_settles_expired_turns_exactly_once_after_a_failover(
    sentinel_primary_frozen_with_wait: Failover,
) -> None:
    assert_the_watchdog_settled_each_expired_turn_once(sentinel_primary_frozen_with_wait)


async def test_sentinel_split_brain_with_wait_loses_no_write_the_old_primary_acknowledged(
    sentinel_split_brain_with_wait: Failover,
) -> None:
    """The primary frozen just past down-after, then continued as soon as the sentinels have
    promoted its replica, before they demote it: for a while it believes it is primary."""
    run = sentinel_split_brain_with_wait
    print_lost(run)
    assert_nothing_acknowledged_lost(run)


async def test_sentinel_split_brain_without_wait_counts_the_acknowledged_writes_lost(
    sentinel_split_brain: Failover,
) -> None:
    run = sentinel_split_brain
    print_lost(run)
    assert not run.gaps(), f"logs with gaps: {run.gaps()}"
