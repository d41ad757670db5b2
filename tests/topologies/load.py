"""A load of runners on `turngate serve` replicas while a Redis topology fails under them, and
what it was told: every call's outcome and time, and every write acknowledged to it.

Each runner has a session of its own and goes turn after turn (admit, heartbeat, open a tool call,
close it, complete), each call on the next replica in turn, as a load balancer would spread them.
A call that fails (UNAVAILABLE, or anything else that is not a refusal) is retried, the same step
with the same request, until it is answered: the service's writes are idempotent, so a retry of a
write that landed is acknowledged as that write. A refusal (a reason of the contract) is an answer:
the runner gives up the turn and starts the next one. Nothing here sleeps for a guessed time
except the short pause before a retry.

A step whose answer shows that one of its failed attempts took effect (an admission replayed, a
record or completion already recorded) while every failed attempt said "nothing was changed" was
misled: the service promised what it did not know (docs/design.md §3.2).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, TypeVar

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from tests.support.calls import seconds
from tests.support.processes import Spawned, spawn_server
from tests.support.replicas import BUCKETS, Deployment
from tests.support.servers import Client
from turngate.service.core import (
    Event,
    SessionKey,
    SettledBy,
    ToolCallChanged,
    ToolCallStatus,
    TurnAdmitted,
    TurnOutcome,
    TurnSettled,
)
from turngate.service.store.redis.connection import Client as RedisClient
from turngate.service.store.redis.keys import Keyspace, LogEntries, log_event
from turngate.v1 import turngate_pb2 as pb

PROJECT = "p-failover"
DOMAIN = "turngate.v1"
# A call unanswered this long has hung: it fails DEADLINE_EXCEEDED, which the tests refuse.
CALL_TIMEOUT_S = 10.0
# The pause before retrying a failed call: short, so a runner notices the service back at once.
RETRY_DELAY_S = 0.05
# The tool call every turn opens and closes.
CALL_ID = "c1"
# The ErrorInfo reason of an UNAVAILABLE whose write may have taken effect: a failure, not a refusal.
OUTCOME_UNKNOWN = "WRITE_OUTCOME_UNKNOWN"
# What an UNAVAILABLE says when the service knows the write was not applied.
NOTHING_CHANGED = "nothing was changed"
R = TypeVar("R")

# --- replicas ------------------------------------------------------------------------------


@asynccontextmanager
async def replicas_with(
    deployment: Deployment, tmp: Path, count: int, env: Mapping[str, str]
) -> AsyncIterator[list[Spawned]]:
    """`count` `turngate serve` replicas on `deployment` (its settings, as `Deployment.replica`
    passes them) plus `env`, started at once, all SERVING; their logs are `tmp`/serve-*.log."""
    settings = {
        "TURNGATE_REDIS_PREFIX": deployment.prefix,
        "TURNGATE_REDIS_BUCKETS": str(BUCKETS),
        "TURNGATE_LEASE_TTL": str(deployment.lease_ttl),
        "TURNGATE_STOP_GRACE": str(deployment.stop_grace),
        "TURNGATE_RECLAIM_IDLE": str(deployment.reclaim_idle),
        **env,
    }
    args = ("--store", deployment.redis_url, "--ledger", deployment.ledger_url)
    async with AsyncExitStack() as stack:
        async with asyncio.TaskGroup() as group:
            starting = [
                group.create_task(stack.enter_async_context(spawn_server(tmp, *args, env=settings)))
                for _ in range(count)
            ]
        yield [task.result() for task in starting]


# --- sessions ------------------------------------------------------------------------------


def sessions_by_bucket(keys: Keyspace, count: int, label: str) -> list[pb.SessionRef]:
    """`count` new sessions, the i-th in bucket i % buckets: they cover every bucket (and so every
    cluster master's slots) as soon as count >= buckets."""
    sessions = []
    for i in range(count):
        while True:
            session = pb.SessionRef(project_id=PROJECT, session_id=f"{label}-{i}-{uuid.uuid4().hex[:8]}")
            if keys.bucket(key_of(session)) == i % keys.buckets:
                sessions.append(session)
                break
    return sessions


def key_of(session: pb.SessionRef) -> SessionKey:
    return SessionKey(session.project_id, session.session_id)


# --- what the runners were told --------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One call a runner made: when, and how it was answered ("OK", or the status code's name and,
    for a refusal, its reason)."""

    runner: int
    step: str
    started: float  # time.monotonic()
    ended: float
    code: str
    reason: str = ""
    details: str = ""

    @property
    def ok(self) -> bool:
        return self.code == "OK"

    @property
    def refused(self) -> bool:
        return bool(self.reason) and self.reason != OUTCOME_UNKNOWN

    @property
    def failed(self) -> bool:
        """Not answered: the runner retries it."""
        return not self.ok and not self.refused

    @property
    def said_nothing_changed(self) -> bool:
        return self.code == "UNAVAILABLE" and NOTHING_CHANGED in self.details


class Write(NamedTuple):
    """A write acknowledged to a runner, as the session log must show it."""

    kind: str  # "admitted", "tool_call" or "completed"
    turn_id: str
    generation: int
    status: int = 0  # a tool call's ToolCallStatus value


@dataclass(frozen=True)
class Refused:
    """A refusal: the reason (ErrorInfo) and, for an admission, the turn holding the session."""

    reason: str
    active_turn_id: str = ""


class Stopping(Exception):
    """The load stopped while a runner was retrying a step."""


@dataclass
class Runner:
    index: int
    session: pb.SessionRef
    calls: list[Call] = field(default_factory=list)
    acknowledged: list[Write] = field(default_factory=list)
    acknowledged_by: dict[Write, Call] = field(default_factory=dict)  # the call that was told
    completed_at: list[float] = field(default_factory=list)
    abandoned: int = 0  # heartbeats answered ABANDON: the turn's admission was lost
    sent: int = 0
    misled: list[list[Call]] = field(default_factory=list)  # steps told "nothing was changed" wrongly

    @property
    def key(self) -> SessionKey:
        return key_of(self.session)

    def told(self, write: Write) -> None:
        """`write` was acknowledged by the call just answered."""
        self.acknowledged.append(write)
        self.acknowledged_by[write] = self.calls[-1]


class Load:
    """`len(sessions)` runners on `clients`, from `async with` on until the block ends (each
    finishes the call it is in)."""

    def __init__(self, clients: Sequence[Client], sessions: Sequence[pb.SessionRef]) -> None:
        self.clients = list(clients)
        self.runners = [Runner(i, session) for i, session in enumerate(sessions)]
        self._stopping = False
        self._tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> Load:
        self._tasks = [asyncio.create_task(self._run(runner)) for runner in self.runners]
        return self

    async def __aexit__(self, *_: object) -> None:
        self._stopping = True
        async with asyncio.timeout(CALL_TIMEOUT_S * 2):
            await asyncio.gather(*self._tasks)

    # --- what happened ----------------------------------------------------------------------

    def calls(self, runners: Iterable[int] | None = None) -> list[Call]:
        chosen = range(len(self.runners)) if runners is None else runners
        return [call for i in chosen for call in self.runners[i].calls]

    def first_success_since(self, since: float, runners: Iterable[int] | None = None) -> float | None:
        """When the first call started at `since` or later was acknowledged (seconds after `since`)."""
        ends = [call.ended for call in self.calls(runners) if call.ok and call.started >= since]
        return min(ends) - since if ends else None

    def every_runner_succeeded_since(self, since: float) -> float | None:
        """How long after `since` the last runner had a call started then acknowledged, or None."""
        firsts = [self.first_success_since(since, [runner.index]) for runner in self.runners]
        if any(first is None for first in firsts):
            return None
        return max(first for first in firsts if first is not None)

    def every_runner_completed_since(self, since: float) -> bool:
        return all(any(at >= since for at in runner.completed_at) for runner in self.runners)

    def codes(self, since: float = 0.0) -> Counter[str]:
        """Failed and refused calls started at `since` or later, by code (and reason)."""
        return Counter(
            f"{call.code}:{call.reason}" if call.refused else call.code
            for call in self.calls()
            if not call.ok and call.started >= since
        )

    def acknowledged(self) -> int:
        return sum(len(runner.acknowledged) for runner in self.runners)

    # --- the runners ------------------------------------------------------------------------

    async def _run(self, runner: Runner) -> None:
        try:
            await self._turns(runner)
        except Stopping:
            return

    async def _turns(self, runner: Runner) -> None:
        """Turn after turn until the load stops; a refused step gives the turn up."""
        session, runner_id = runner.session, f"r{runner.index}"
        # Every lease this runner was given: the session is its alone, so a turn holding it is one
        # of these, which it completed or gave up and whose end a failover lost.
        leases: dict[str, pb.TurnLease] = {}
        n = 0
        while not self._stopping:
            n += 1
            turn_id = f"t{n}"
            request = pb.AdmitTurnRequest(session=session, turn_id=turn_id, runner_id=runner_id)
            admitted = await self._step(runner, "admit", _admitting(request), lambda reply: reply.replayed)
            if isinstance(admitted, Refused):
                if (held := leases.get(admitted.active_turn_id)) is not None:
                    # Completing it (again) frees the session for the next turn.
                    await self._complete(runner, held)
                continue
            lease = leases[turn_id] = admitted.lease
            runner.told(Write("admitted", turn_id, lease.generation))
            beat = await self._step(
                runner, "heartbeat", _heartbeating(pb.HeartbeatRequest(lease=lease)), _shows_nothing
            )
            if isinstance(beat, Refused) or beat.directive != pb.DIRECTIVE_CONTINUE:
                runner.abandoned += 1
                continue
            if await self._tool_call(runner, lease):
                await self._complete(runner, lease)

    async def _tool_call(self, runner: Runner, lease: pb.TurnLease) -> bool:
        """Opens the call and closes it; False if refused."""
        for status in (pb.TOOL_CALL_STATUS_OPEN, pb.TOOL_CALL_STATUS_SUCCEEDED):
            request = pb.RecordToolCallRequest(lease=lease, call_id=CALL_ID, name="search", status=status)
            recorded = await self._step(
                runner, "tool_call", _recording(request), lambda reply: not reply.recorded
            )
            if isinstance(recorded, Refused):
                return False
            runner.told(Write("tool_call", lease.turn_id, lease.generation, status))
        return True

    async def _complete(self, runner: Runner, lease: pb.TurnLease) -> bool:
        request = pb.CompleteTurnRequest(lease=lease, outcome=pb.TURN_OUTCOME_COMPLETED)
        completed = await self._step(runner, "complete", _completing(request), _completed_before)
        if isinstance(completed, Refused):
            return False
        runner.told(Write("completed", lease.turn_id, lease.generation))
        runner.completed_at.append(time.monotonic())
        return True

    async def _step(
        self,
        runner: Runner,
        step: str,
        send: Callable[[Client], Awaitable[R]],
        done_before: Callable[[R], bool],
    ) -> R | Refused:
        """The step's reply, or its refusal; a failure is retried (on the next replica). A reply
        that `done_before` says shows an earlier attempt's effect, after failures that all said
        nothing was changed, is noted as misleading (`Runner.misled`)."""
        failures: list[Call] = []
        while True:
            if self._stopping:
                raise Stopping
            client = self.clients[(runner.index + runner.sent) % len(self.clients)]
            runner.sent += 1
            started = time.monotonic()
            try:
                reply = await send(client)
            except grpc.aio.AioRpcError as error:
                refusal = refusal_of(error)
                code = error.code().name
                call = Call(
                    runner.index,
                    step,
                    started,
                    time.monotonic(),
                    code,
                    refusal.reason if refusal else "",
                    error.details() or "",
                )
                runner.calls.append(call)
                if call.refused:
                    assert refusal is not None
                    return refusal
                failures.append(call)
                await asyncio.sleep(RETRY_DELAY_S)
                continue
            runner.calls.append(Call(runner.index, step, started, time.monotonic(), "OK"))
            if failures and done_before(reply) and all(call.said_nothing_changed for call in failures):
                runner.misled.append(failures)
            return reply


Send = Callable[[Client], Awaitable[R]]


def _shows_nothing(_: pb.HeartbeatResponse) -> bool:
    """A heartbeat writes no event: its answer does not tell whether an earlier attempt extended the lease."""
    return False


def _completed_before(reply: pb.CompleteTurnResponse) -> bool:
    """Already settled by this runner as it asks, so by an earlier attempt of its own."""
    turn = reply.turn
    return not reply.recorded and (turn.settled_by, turn.outcome) == (
        pb.SETTLED_BY_RUNNER,
        pb.TURN_OUTCOME_COMPLETED,
    )


def _admitting(request: pb.AdmitTurnRequest) -> Send[pb.AdmitTurnResponse]:
    return lambda client: client.admission.AdmitTurn(request, timeout=CALL_TIMEOUT_S)


def _heartbeating(request: pb.HeartbeatRequest) -> Send[pb.HeartbeatResponse]:
    return lambda client: client.admission.Heartbeat(request, timeout=CALL_TIMEOUT_S)


def _recording(request: pb.RecordToolCallRequest) -> Send[pb.RecordToolCallResponse]:
    return lambda client: client.admission.RecordToolCall(request, timeout=CALL_TIMEOUT_S)


def _completing(request: pb.CompleteTurnRequest) -> Send[pb.CompleteTurnResponse]:
    return lambda client: client.admission.CompleteTurn(request, timeout=CALL_TIMEOUT_S)


def refusal_of(error: grpc.aio.AioRpcError) -> Refused | None:
    """The refusal an error carries (an ErrorInfo of the contract's domain), or None."""
    status = rpc_status.from_call(error)
    if status is None:
        return None
    reason, active = "", ""
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            if info.domain == DOMAIN:
                reason = info.reason
        elif detail.Is(pb.AdmissionRefusal.DESCRIPTOR):
            refusal = pb.AdmissionRefusal()
            detail.Unpack(refusal)
            active = refusal.active_turn_id
    return Refused(reason, active) if reason else None


# --- expiring turns --------------------------------------------------------------------------


async def admit_expiring(client: Client, session: pb.SessionRef, lease_ttl: float) -> pb.AdmitTurnResponse:
    """A turn of a runner that will never heartbeat: its lease ends after `lease_ttl` seconds."""
    request = pb.AdmitTurnRequest(
        session=session, turn_id="x1", runner_id="silent", lease_ttl=seconds(lease_ttl)
    )
    return await client.admission.AdmitTurn(request, timeout=CALL_TIMEOUT_S)


# --- the session logs ------------------------------------------------------------------------


async def session_log(redis: RedisClient, keys: Keyspace, key: SessionKey) -> list[Event]:
    """The session's log as Redis holds it, in order."""
    entries = await redis.xrange(keys.log(key))
    return [log_event(entry_id, fields) for entry_id, fields in _entries(entries)]


def _entries(entries: object) -> LogEntries:
    assert isinstance(entries, list)
    return entries


def written(log: Sequence[Event]) -> set[Write]:
    """The writes a log shows, in the form acknowledgements take."""
    shown: set[Write] = set()
    for event in log:
        body = event.body
        if isinstance(body, TurnAdmitted):
            shown.add(Write("admitted", body.turn_id, body.generation))
        elif isinstance(body, ToolCallChanged):
            status = _PB_TOOL_CALL_STATUS[body.call.status]
            shown.add(Write("tool_call", body.turn_id, body.generation, status))
            if status != pb.TOOL_CALL_STATUS_OPEN:  # closing a call shows it was opened
                shown.add(Write("tool_call", body.turn_id, body.generation, pb.TOOL_CALL_STATUS_OPEN))
        elif isinstance(body, TurnSettled):
            turn = body.turn
            if turn.settled_by is SettledBy.RUNNER and turn.outcome is TurnOutcome.COMPLETED:
                shown.add(Write("completed", turn.turn_id, turn.generation))
    return shown


_PB_TOOL_CALL_STATUS = {
    ToolCallStatus.OPEN: pb.TOOL_CALL_STATUS_OPEN,
    ToolCallStatus.SUCCEEDED: pb.TOOL_CALL_STATUS_SUCCEEDED,
    ToolCallStatus.FAILED: pb.TOOL_CALL_STATUS_FAILED,
    ToolCallStatus.INTERRUPTED: pb.TOOL_CALL_STATUS_INTERRUPTED,
}


def lost_writes(runner: Runner, log: Sequence[Event]) -> list[Write]:
    """The writes acknowledged to `runner` that its session's log does not show."""
    shown = written(log)
    return [write for write in runner.acknowledged if write not in shown]
