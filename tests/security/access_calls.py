"""One well-formed request per RPC, and calls of each as a principal (its bearer token, or
none) over native gRPC and the HTTP listener's Connect and gRPC-Web: the status each gets."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import grpc
from google.protobuf.message import Message

from tests.support.http_calls import code_of
from tests.support.principals import PROJECT_A, client_as
from turngate.service.server import TurngateServer
from turngate.v1 import turngate_pb2 as pb

DENIED = {grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED}
LEASE = pb.TurnLease(
    session=pb.SessionRef(project_id=PROJECT_A, session_id="s-matrix"), turn_id="t1", generation=1
)
SESSION = LEASE.session

# One well-formed request per RPC, on project A.
SAMPLES: dict[str, Callable[[], Message]] = {
    "AdmitTurn": lambda: pb.AdmitTurnRequest(
        session=SESSION, turn_id=f"t-{uuid.uuid4().hex[:8]}", runner_id="r"
    ),
    "Heartbeat": lambda: pb.HeartbeatRequest(lease=LEASE),
    "RecordToolCall": lambda: pb.RecordToolCallRequest(
        lease=LEASE, call_id="c1", name="search", status=pb.TOOL_CALL_STATUS_OPEN
    ),
    "RecordInteraction": lambda: pb.RecordInteractionRequest(
        lease=LEASE, interaction_id="i1", kind="approval"
    ),
    "CompleteTurn": lambda: pb.CompleteTurnRequest(lease=LEASE, outcome=pb.TURN_OUTCOME_COMPLETED),
    "AcknowledgeSteer": lambda: pb.AcknowledgeSteerRequest(
        lease=LEASE, steer_id="s1", status=pb.STEER_STATUS_CONSUMED
    ),
    "CancelTurn": lambda: pb.CancelTurnRequest(session=SESSION, expected_turn_id="t-never"),
    "ResolveInteraction": lambda: pb.ResolveInteractionRequest(
        session=SESSION, interaction_id="i1", resolution="y"
    ),
    "ResumeQueue": lambda: pb.ResumeQueueRequest(session=SESSION),
    "ClearQueue": lambda: pb.ClearQueueRequest(session=SESSION),
    "SteerTurn": lambda: pb.SteerTurnRequest(
        session=SESSION, expected_turn_id="t-never", steer_id=f"s-{uuid.uuid4().hex[:8]}", content="go"
    ),
    "MoveQueuedTurn": lambda: pb.MoveQueuedTurnRequest(session=SESSION, turn_id="t-never"),
    "MintSessionToken": lambda: pb.MintSessionTokenRequest(session=SESSION, allow_stop=True),
    "WatchSession": lambda: pb.WatchSessionRequest(session=SESSION),
    "GetSession": lambda: pb.GetSessionRequest(session=SESSION),
    "GetTurn": lambda: pb.GetTurnRequest(session=SESSION, turn_id="t1"),
    "ListTurns": lambda: pb.ListTurnsRequest(session=SESSION),
    "ListActiveSessions": lambda: pb.ListActiveSessionsRequest(project_id=PROJECT_A),
    "ListSessions": lambda: pb.ListSessionsRequest(project_id=PROJECT_A),
    "ListProjects": lambda: pb.ListProjectsRequest(),
}
# Native gRPC, and the HTTP listener's Connect (JSON) and gRPC-Web (binary) for browsers.
TRANSPORTS = ("grpc", "connect-json", "grpc-web-proto")


def short(method: str) -> str:
    return method.rsplit("/", 1)[1]


async def call(port: int, header: str | None, method: str, request: Message) -> grpc.StatusCode:
    """The status of one call (OK also for a stream whose first message arrived)."""
    async with client_as(port, header) as client:
        service = {"Admission": client.admission, "Control": client.control, "Session": client.sessions}
        stub = service[method.split(".")[-1].split("Service/")[0]]
        rpc = getattr(stub, short(method))
        try:
            if short(method) == "WatchSession":
                stream = rpc(request)
                await stream.read()
                stream.cancel()
            else:
                await rpc(request, timeout=5)
        except grpc.aio.AioRpcError as error:
            return error.code()
    return grpc.StatusCode.OK


async def call_over(
    transport: str, server: TurngateServer, header: str | None, method: str, request: Message
) -> grpc.StatusCode:
    if transport == "grpc":
        return await call(server.port, header, method, request)
    return await code_of(server.http_port, transport, header, method, request)
