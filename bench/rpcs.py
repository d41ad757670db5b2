"""The calls the benchmark makes: turngate's RPCs through its generated stubs (or through its HTTP
listener in their place), and the floor's."""

from __future__ import annotations

import asyncio
import functools
import itertools
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import grpc
from connectrpc.client import ConnectClient
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from connectrpc.method import MethodInfo, StreamType
from google.protobuf.message import Message

from turngate.service.web.bridge import method_info
from turngate.v1 import turngate_pb2 as pb
from turngate.v1 import turngate_pb2_grpc as pb_grpc

from measure import Call

PROJECT = "bench"


@dataclass(frozen=True, slots=True)
class Stubs:
    admission: pb_grpc.AdmissionServiceAsyncStub
    control: pb_grpc.ControlServiceAsyncStub
    sessions: pb_grpc.SessionServiceAsyncStub

    @classmethod
    def on(cls, channel: grpc.aio.Channel) -> Stubs:
        return cls(
            pb_grpc.AdmissionServiceStub(channel),
            pb_grpc.ControlServiceStub(channel),
            pb_grpc.SessionServiceStub(channel),
        )

    @classmethod
    def over_http(cls, client: ConnectClient) -> Stubs:
        """The same RPCs through a turngate HTTP listener, in `client`'s protocol and codec. Each
        service is an HttpService in its gRPC stub's place: the same method names, an awaitable
        reply or an async-iterable stream, which is all the bench's calls use of a stub."""
        return cls(
            cast("pb_grpc.AdmissionServiceAsyncStub", HttpService(client, "AdmissionService")),
            cast("pb_grpc.ControlServiceAsyncStub", HttpService(client, "ControlService")),
            cast("pb_grpc.SessionServiceAsyncStub", HttpService(client, "SessionService")),
        )


class HttpService:
    """Each RPC of one service of the contract as an attribute of its name calling it through a
    Connect client (connectrpc's, speaking Connect or gRPC-Web), as a gRPC stub's do."""

    def __init__(self, client: ConnectClient, service: str) -> None:
        for method in pb.DESCRIPTOR.services_by_name[service].methods:
            setattr(self, method.name, _http_call(client, method_info(method)))


def _http_call(client: ConnectClient, info: MethodInfo[Any, Any]) -> Callable[[Message], object]:
    if info.stream_type is StreamType.SERVER_STREAM:
        return lambda request: _http_stream(client, info, request)
    return lambda request: client.execute_unary(request=request, method=info)


async def _http_stream(
    client: ConnectClient, info: MethodInfo[Any, Any], request: Message
) -> AsyncIterator[Any]:
    """The stream's replies; a read cancelled stays cancelled (as a gRPC stream's), where connectrpc
    raises ConnectError(CANCELED) instead."""
    try:
        async for response in client.execute_server_stream(request=request, method=info):
            yield response
    except ConnectError as error:
        task = asyncio.current_task()
        if error.code is Code.CANCELED and task is not None and task.cancelling():
            raise asyncio.CancelledError from error
        raise


def session(session_id: str) -> pb.SessionRef:
    return pb.SessionRef(project_id=PROJECT, session_id=session_id)


async def admit(
    stubs: Stubs,
    ref: pb.SessionRef,
    turn_id: str,
    mode: pb.AdmissionMode.ValueType = pb.ADMISSION_MODE_UNSPECIFIED,
    runner_id: str = "bench-runner",
) -> pb.AdmitTurnResponse:
    """AdmitTurn; `mode` unset (the default) sends the request a client before issue 13 sent."""
    request = pb.AdmitTurnRequest(session=ref, turn_id=turn_id, runner_id=runner_id, mode=mode)
    return await stubs.admission.AdmitTurn(request)


async def admit_lease(stubs: Stubs, ref: pb.SessionRef, turn_id: str) -> pb.TurnLease:
    """The lease of a turn admitted at once (an idle session, no mode)."""
    return (await admit(stubs, ref, turn_id)).lease


async def heartbeat(stubs: Stubs, lease: pb.TurnLease) -> None:
    await stubs.admission.Heartbeat(pb.HeartbeatRequest(lease=lease))


async def cancel(stubs: Stubs, lease: pb.TurnLease) -> None:
    request = pb.CancelTurnRequest(session=lease.session, expected_turn_id=lease.turn_id, reason="user")
    reply = await stubs.control.CancelTurn(request)
    if reply.WhichOneof("outcome") != "cancelled":
        raise RuntimeError(f"stop of {lease.turn_id} was not accepted: {reply}")


async def complete(
    stubs: Stubs, lease: pb.TurnLease, outcome: pb.TurnOutcome.ValueType = pb.TURN_OUTCOME_CANCELLED
) -> None:
    request = pb.CompleteTurnRequest(lease=lease, outcome=outcome)
    await stubs.admission.CompleteTurn(request)


async def open_tool_call(stubs: Stubs, lease: pb.TurnLease, call_id: str) -> None:
    request = pb.RecordToolCallRequest(
        lease=lease, call_id=call_id, name="bench", status=pb.TOOL_CALL_STATUS_OPEN
    )
    await stubs.admission.RecordToolCall(request)


def floor_calls(channel: grpc.aio.Channel, method: str) -> Iterator[Call]:
    """Endless calls of one floor method (raw bytes in and out)."""
    multicallable: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(method)
    return itertools.repeat(functools.partial(multicallable, b""))


@dataclass
class Caller:
    """One caller on sessions of its own: admits a turn on a new session per call (in `mode`),
    then can heartbeat those turns (round and round) and stop each of them once."""

    stubs: Stubs
    name: str
    mode: pb.AdmissionMode.ValueType = pb.ADMISSION_MODE_UNSPECIFIED
    leases: list[pb.TurnLease] = field(default_factory=list)
    _sessions: Iterator[int] = field(default_factory=itertools.count)

    async def _admit_next(self) -> None:
        ref = session(f"{self.name}-{next(self._sessions)}")
        reply = await admit(self.stubs, ref, "turn-1", self.mode)
        if not reply.HasField("lease"):
            raise RuntimeError(f"{ref.session_id} is new, yet its turn was not admitted: {reply}")
        self.leases.append(reply.lease)

    def admits(self) -> Iterator[Call]:
        return itertools.repeat(self._admit_next)

    def heartbeats(self) -> Iterator[Call]:
        return (functools.partial(heartbeat, self.stubs, lease) for lease in itertools.cycle(self.leases))

    def cancels(self) -> Iterator[Call]:
        return (functools.partial(cancel, self.stubs, lease) for lease in self.leases)
