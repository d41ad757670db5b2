"""Small steps of the e2e tests: runner, gateway and client calls, refusals, events, forced races."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Collection, Coroutine, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from tests.support.servers import Client
from tests.support.waiting import POLL_INTERVAL_S, WAIT_TIMEOUT_S
from turngate.service.core import Command, SessionKey
from turngate.service.server import TurngateServer
from turngate.v1 import turngate_pb2 as pb

DOMAIN = "turngate.v1"

M = TypeVar("M", bound=Message)

# --- runner (AdmissionService) -------------------------------------------------------------


def seconds(value: float) -> Duration:
    duration = Duration()
    duration.FromNanoseconds(round(value * 1e9))
    return duration


async def admit(
    client: Client,
    session: pb.SessionRef,
    turn_id: str = "t1",
    runner_id: str = "r1",
    lease_ttl: float | None = None,
    *,
    mode: pb.AdmissionMode.ValueType = pb.ADMISSION_MODE_UNSPECIFIED,
    expected_active_turn_id: str = "",
    max_queue_wait: float | None = None,
) -> pb.AdmitTurnResponse:
    request = pb.AdmitTurnRequest(
        session=session,
        turn_id=turn_id,
        runner_id=runner_id,
        mode=mode,
        expected_active_turn_id=expected_active_turn_id,
    )
    if lease_ttl is not None:
        request.lease_ttl.CopyFrom(seconds(lease_ttl))
    if max_queue_wait is not None:
        request.max_queue_wait.CopyFrom(seconds(max_queue_wait))
    return await client.admission.AdmitTurn(request)


def runner_of(turn_id: str) -> str:
    """The runner the queue tests give each turn: one per turn."""
    return f"r-{turn_id}"


async def enqueue(
    client: Client,
    session: pb.SessionRef,
    turn_id: str,
    *,
    runner_id: str = "",
    lease_ttl: float | None = None,
    max_queue_wait: float | None = None,
) -> pb.AdmitTurnResponse:
    """AdmitTurn with ENQUEUE by `runner_id` (the turn's own runner by default): a lease at once
    on an idle session with an empty queue, else a place in the queue. Sent again, the same
    request answers the place while the turn waits and its lease once promoted (Q5)."""
    return await admit(
        client,
        session,
        turn_id,
        runner_id or runner_of(turn_id),
        lease_ttl,
        mode=pb.ADMISSION_MODE_ENQUEUE,
        max_queue_wait=max_queue_wait,
    )


async def with_queue(client: Client, session: pb.SessionRef, *turn_ids: str) -> pb.TurnLease:
    """t1 runs (admitted by ENQUEUE); `turn_ids` wait behind it, in that order. Returns t1's lease."""
    lease = (await enqueue(client, session, "t1")).lease
    for position, turn_id in enumerate(turn_ids, start=1):
        queued = (await enqueue(client, session, turn_id)).queued
        assert (queued.turn_id, queued.position) == (turn_id, position)
    return lease


async def picked_up(client: Client, session: pb.SessionRef, turn_id: str) -> pb.AdmitTurnResponse:
    """The promoted turn's runner sends its ENQUEUE again and is answered with the lease (Q2, Q5)."""
    again = await enqueue(client, session, turn_id)
    assert again.HasField("lease"), again
    assert not again.HasField("queued")
    assert (again.lease.turn_id, again.replayed) == (turn_id, True)
    return again


async def interrupt(
    client: Client, session: pb.SessionRef, turn_id: str, expected_active_turn_id: str = ""
) -> pb.AdmitTurnResponse:
    """AdmitTurn with INTERRUPT by the turn's own runner, guarded when `expected_active_turn_id`
    is given."""
    return await admit(
        client,
        session,
        turn_id,
        runner_of(turn_id),
        mode=pb.ADMISSION_MODE_INTERRUPT,
        expected_active_turn_id=expected_active_turn_id,
    )


async def heartbeat(client: Client, lease: pb.TurnLease) -> pb.HeartbeatResponse:
    return await client.admission.Heartbeat(pb.HeartbeatRequest(lease=lease))


async def record_call(
    client: Client,
    lease: pb.TurnLease,
    call_id: str,
    status: pb.ToolCallStatus.ValueType = pb.TOOL_CALL_STATUS_OPEN,
    error: str = "",
) -> pb.RecordToolCallResponse:
    request = pb.RecordToolCallRequest(
        lease=lease, call_id=call_id, name="search", status=status, error=error
    )
    return await client.admission.RecordToolCall(request)


async def record_interaction(
    client: Client, lease: pb.TurnLease, interaction_id: str
) -> pb.RecordInteractionResponse:
    request = pb.RecordInteractionRequest(lease=lease, interaction_id=interaction_id, kind="approval")
    return await client.admission.RecordInteraction(request)


async def complete(
    client: Client,
    lease: pb.TurnLease,
    outcome: pb.TurnOutcome.ValueType = pb.TURN_OUTCOME_COMPLETED,
    error: str = "",
) -> pb.CompleteTurnResponse:
    return await client.admission.CompleteTurn(
        pb.CompleteTurnRequest(lease=lease, outcome=outcome, error=error)
    )


# --- gateway (ControlService) --------------------------------------------------------------


async def stop(
    client: Client,
    session: pb.SessionRef,
    expected_turn_id: str = "",
    *,
    force: bool = False,
    reason: str = "user pressed stop",
    request_id: str = "",
    queue: pb.QueueAction.ValueType = pb.QUEUE_ACTION_UNSPECIFIED,
) -> pb.CancelTurnResponse:
    request = pb.CancelTurnRequest(
        session=session,
        expected_turn_id=expected_turn_id,
        reason=reason,
        force=force,
        request_id=request_id,
        queue=queue,
    )
    return await client.control.CancelTurn(request)


async def resume_queue(client: Client, session: pb.SessionRef) -> pb.ResumeQueueResponse:
    return await client.control.ResumeQueue(pb.ResumeQueueRequest(session=session))


async def resolve(
    client: Client, session: pb.SessionRef, interaction_id: str, resolution: str = "approved"
) -> pb.ResolveInteractionResponse:
    request = pb.ResolveInteractionRequest(
        session=session, interaction_id=interaction_id, resolution=resolution
    )
    return await client.control.ResolveInteraction(request)


# --- client (SessionService) ---------------------------------------------------------------


async def snapshot(
    client: Client, session: pb.SessionRef, within_s: float | None = None
) -> pb.SessionSnapshot:
    """The session's snapshot; with `within_s`, the call's deadline."""
    request = pb.GetSessionRequest(session=session)
    return (await client.sessions.GetSession(request, timeout=within_s)).snapshot


async def get_turn(client: Client, session: pb.SessionRef, turn_id: str) -> pb.TurnRecord:
    return (await client.sessions.GetTurn(pb.GetTurnRequest(session=session, turn_id=turn_id))).turn


async def state_of(client: Client, session: pb.SessionRef, *turn_ids: str) -> list[bytes]:
    """The session's snapshot and the named turns, serialized: equal lists mean nothing changed."""
    messages = [await snapshot(client, session), *[await get_turn(client, session, t) for t in turn_ids]]
    return [m.SerializeToString(deterministic=True) for m in messages]


async def events_after(client: Client, session: pb.SessionRef, after_seq: int) -> list[pb.SessionEvent]:
    """The session's log after `after_seq` (> 0) up to the current head, replayed by WatchSession."""
    assert after_seq > 0, "after_seq 0 starts with a snapshot, not with the log"
    head = (await snapshot(client, session)).seq
    events: list[pb.SessionEvent] = []
    if head == after_seq:
        return events
    call = client.sessions.WatchSession(pb.WatchSessionRequest(session=session, after_seq=after_seq))
    try:
        async with asyncio.timeout(WAIT_TIMEOUT_S):
            async for response in call:
                events.append(response.event)
                if response.event.seq >= head:
                    break
    finally:
        call.cancel()
    assert [e.seq for e in events] == list(range(after_seq + 1, head + 1)), "the log has a gap"
    return events


def kinds(events: list[pb.SessionEvent]) -> list[str]:
    return [str(e.WhichOneof("kind")) for e in events]


def settlements(events: list[pb.SessionEvent]) -> list[pb.TurnSettled]:
    return [e.turn_settled for e in events if e.HasField("turn_settled")]


def admissions(events: list[pb.SessionEvent]) -> list[pb.TurnAdmitted]:
    return [e.turn_admitted for e in events if e.HasField("turn_admitted")]


async def head_of(client: Client, session: pb.SessionRef) -> int:
    """The seq of the session's last event."""
    return (await snapshot(client, session)).seq


async def wait_for_phase(
    client: Client, session: pb.SessionRef, phase: pb.SessionPhase.ValueType
) -> pb.SessionSnapshot:
    """Polls GetSession until the session is in `phase` (the watchdog acts on its own time)."""
    async with asyncio.timeout(WAIT_TIMEOUT_S):
        while True:
            current = await snapshot(client, session)
            if current.phase == phase:
                return current
            await asyncio.sleep(POLL_INTERVAL_S)


async def sleep_past(instant: Timestamp) -> None:
    """Sleeps until `instant` has passed on the store clock (an embedded SQLite's is the host's)."""
    await asyncio.sleep(max(0.0, instant.ToNanoseconds() / 1e9 - time.time()) + 0.01)


def advance_store_clock(monkeypatch: pytest.MonkeyPatch, ahead_s: float) -> None:
    """Moves the store clock `ahead_s` seconds ahead until monkeypatch undoes it: an embedded
    SQLite store's clock is the host's `time.time_ns`."""
    host_ns = time.time_ns
    monkeypatch.setattr(time, "time_ns", lambda: host_ns() + round(ahead_s * 1e9))


def freeze_store_clock(monkeypatch: pytest.MonkeyPatch, at_ns: int) -> None:
    """Stops the store clock at `at_ns` (since the epoch) until monkeypatch undoes it."""
    monkeypatch.setattr(time, "time_ns", lambda: at_ns)


# --- refusals ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Refused:
    """A refused call: its code and the details of its google.rpc.Status."""

    code: grpc.StatusCode
    status: status_pb2.Status
    info: error_details_pb2.ErrorInfo | None
    retry: error_details_pb2.RetryInfo | None
    admission: pb.AdmissionRefusal | None
    bad_request: error_details_pb2.BadRequest | None

    @property
    def fields(self) -> set[str]:
        assert self.bad_request is not None, f"no BadRequest in {self.status}"
        return {v.field for v in self.bad_request.field_violations}


def _detail(status: status_pb2.Status, kind: type[M]) -> M | None:
    """The status's one detail of type `kind`, if any."""
    packed = [detail for detail in status.details if detail.Is(kind.DESCRIPTOR)]
    assert len(packed) <= 1, f"{len(packed)} {kind.__name__} details"
    if not packed:
        return None
    message = kind()
    packed[0].Unpack(message)
    return message


def refusal_of(error: grpc.aio.AioRpcError) -> Refused:
    status = rpc_status.from_call(error)
    assert status is not None, f"{error.code()} without a google.rpc.Status: {error.details()}"
    return Refused(
        error.code(),
        status,
        _detail(status, error_details_pb2.ErrorInfo),
        _detail(status, error_details_pb2.RetryInfo),
        _detail(status, pb.AdmissionRefusal),
        _detail(status, error_details_pb2.BadRequest),
    )


async def refused(call: Awaitable[object]) -> Refused:
    """The refusal of a call that must fail."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return refusal_of(caught.value)


_CODES = {
    "SESSION_TURN_IN_USE": grpc.StatusCode.ABORTED,
    "SESSION_STOPPING": grpc.StatusCode.ABORTED,
    "TURN_CANCELLED": grpc.StatusCode.FAILED_PRECONDITION,
    "TURN_ALREADY_SETTLED": grpc.StatusCode.FAILED_PRECONDITION,
    "TURN_OWNED_BY_OTHER_RUNNER": grpc.StatusCode.FAILED_PRECONDITION,
    "TURN_NOT_ACTIVE": grpc.StatusCode.FAILED_PRECONDITION,
    "INTERACTION_NOT_PENDING": grpc.StatusCode.FAILED_PRECONDITION,
    "LIMIT_EXCEEDED": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "TURN_HELD_BY_OTHER_PRINCIPAL": grpc.StatusCode.PERMISSION_DENIED,
    "SESSION_QUEUE_FULL": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "SESSION_QUEUE_PAUSED": grpc.StatusCode.ABORTED,
    "ACTIVE_TURN_MISMATCH": grpc.StatusCode.FAILED_PRECONDITION,
    "STEER_NOT_FOUND": grpc.StatusCode.FAILED_PRECONDITION,
    "QUEUE_VERSION_MISMATCH": grpc.StatusCode.ABORTED,
    "TURN_NOT_QUEUED": grpc.StatusCode.FAILED_PRECONDITION,
}
# The refusals that carry RetryInfo: the session frees on its own, at the active turn's deadline
# at the latest. (SESSION_QUEUE_PAUSED is ABORTED too, but waits for a ResumeQueue.)
_RETRYABLE = {"SESSION_TURN_IN_USE", "SESSION_STOPPING"}


def assert_reason(refusal: Refused, reason: str, *, admission: bool = False) -> None:
    """The contract's code and ErrorInfo for `reason`; RetryInfo exactly on the retryable ones;
    an AdmissionRefusal (with the same reason) exactly on AdmitTurn refusals."""
    assert refusal.code == _CODES[reason], refusal.status
    assert refusal.info is not None
    assert (refusal.info.domain, refusal.info.reason) == (DOMAIN, reason)
    assert (refusal.retry is not None) == (reason in _RETRYABLE)
    if admission:
        assert refusal.admission is not None
        assert pb.ErrorReason.Name(refusal.admission.reason) == f"ERROR_REASON_{reason}"
    else:
        assert refusal.admission is None


async def admission_refused(
    client: Client,
    session: pb.SessionRef,
    turn_id: str,
    runner_id: str,
    reason: str,
    *,
    mode: pb.AdmissionMode.ValueType = pb.ADMISSION_MODE_UNSPECIFIED,
    expected_active_turn_id: str = "",
) -> pb.AdmissionRefusal:
    """Admits (in `mode`) and expects the refusal `reason`; returns its AdmissionRefusal."""
    admission = admit(
        client, session, turn_id, runner_id, mode=mode, expected_active_turn_id=expected_active_turn_id
    )
    refusal = await refused(admission)
    assert_reason(refusal, reason, admission=True)
    assert refusal.admission is not None
    return refusal.admission


# --- forced interleavings ------------------------------------------------------------------


class Gate:
    """A `before_write` hook holding every write of the given command types on one session.

    `wait_full()` returns once at least `wanted[type]` writes of each type have been decided and
    are waiting; nothing is written until `open()`. Other sessions and command types pass.
    """

    def __init__(self, session: pb.SessionRef, wanted: Mapping[type[Command], int]) -> None:
        self._key = SessionKey(session.project_id, session.session_id)
        self._wanted = dict(wanted)
        self._arrived: Counter[type[Command]] = Counter()
        self._full = asyncio.Event()
        self._open = asyncio.Event()

    async def __call__(self, key: SessionKey, command: Command) -> None:
        if key != self._key or type(command) not in self._wanted or self._open.is_set():
            return
        self._arrived[type(command)] += 1
        if all(self._arrived[kind] >= n for kind, n in self._wanted.items()):
            self._full.set()
        await self._open.wait()

    async def wait_full(self) -> None:
        async with asyncio.timeout(WAIT_TIMEOUT_S):
            await self._full.wait()

    def open(self) -> None:
        self._open.set()


def gate_for(session: pb.SessionRef, held: tuple[str, ...], commands: Mapping[str, type[Command]]) -> Gate:
    """Holds one write of each held call's command on `session`."""
    return Gate(session, {commands[name]: 1 for name in held})


async def forced(
    gate: Gate, calls: Mapping[str, Coroutine[Any, Any, Any]], held: Collection[str]
) -> dict[str, Any]:
    """The calls named in `held` start and decide; once `gate` is full, the others run to their end
    (their writes commit first); then the gate opens and the held writes, refused by the version or
    the clock their decision was made on, are decided again on what is now written. (With every
    call held, they race from one state.) Returns each call's result by name."""
    waiting = {name: asyncio.create_task(call) for name, call in calls.items() if name in held}
    await gate.wait_full()
    done = {name: await call for name, call in calls.items() if name not in held}
    gate.open()
    return {**done, **{name: await task for name, task in waiting.items()}}


@contextmanager
def gated(server: TurngateServer, gate: Gate) -> Iterator[Gate]:
    """Installs `gate` as the store's before_write hook; always opens and removes it."""
    server.store.before_write = gate
    try:
        yield gate
    finally:
        gate.open()
        server.store.before_write = None
