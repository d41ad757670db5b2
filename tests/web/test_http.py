"""The contract over HTTP (Connect and gRPC-Web, JSON and binary): the same answers, refusals and
error details as gRPC, watches that stream and resume, deadlines, and bad input that changes
nothing. The authorization matrix over HTTP is in tests/security/test_access.py."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from connectrpc.errors import ConnectError
from google.protobuf.message import Message
from google.rpc import error_details_pb2

from tests.support.calls import admit, refused
from tests.support.http_calls import WIRES, http_client, status, stream, unary
from tests.support.servers import Client, OwnServer
from tests.support.waiting import eventually
from tests.web.raw import post
from turngate.service.server import TurngateServer
from turngate.v1 import turngate_pb2 as pb

GET_SESSION = "/turngate.v1.SessionService/GetSession"
WATCH = "/turngate.v1.SessionService/WatchSession"
ADMIT = "/turngate.v1.AdmissionService/AdmitTurn"
CANCEL = "/turngate.v1.ControlService/CancelTurn"


@pytest.mark.parametrize("wire", WIRES)
async def test_a_read_over_http_answers_what_grpc_answers(
    server: TurngateServer, client: Client, session: pb.SessionRef, wire: str
) -> None:
    await admit(client, session, "t1", "r1")
    request = pb.GetSessionRequest(session=session)
    over_grpc = await client.sessions.GetSession(request)
    async with http_client(server.http_port, wire) as http:
        assert await unary(http, GET_SESSION, request) == over_grpc


@pytest.mark.parametrize("wire", WIRES)
async def test_a_runner_admits_and_a_gateway_stops_over_http(
    server: TurngateServer, client: Client, session: pb.SessionRef, wire: str
) -> None:
    async with http_client(server.http_port, wire) as http:
        admitted: pb.AdmitTurnResponse = await unary(
            http, ADMIT, pb.AdmitTurnRequest(session=session, turn_id="t1", runner_id="r1")
        )
        assert admitted.lease.turn_id == "t1"
        stopped: pb.CancelTurnResponse = await unary(
            http, CANCEL, pb.CancelTurnRequest(session=session, expected_turn_id="t1")
        )
    assert stopped.WhichOneof("outcome") == "cancelled"
    state = await client.sessions.GetSession(pb.GetSessionRequest(session=session))
    assert state.snapshot.active.phase == pb.TURN_PHASE_STOPPING


@pytest.mark.parametrize("wire", WIRES)
async def test_a_refusal_over_http_carries_grpcs_code_message_and_details(
    server: TurngateServer, client: Client, session: pb.SessionRef, wire: str
) -> None:
    await admit(client, session, "t1", "r1")
    second = pb.AdmitTurnRequest(session=session, turn_id="t2", runner_id="r2")
    over_grpc = await refused(client.admission.AdmitTurn(second))
    async with http_client(server.http_port, wire) as http:
        with pytest.raises(ConnectError) as over_http:
            await unary(http, ADMIT, second)
    assert status(over_http.value) == over_grpc.code
    assert over_http.value.message == over_grpc.status.message
    grpc_details = [
        (item.type_url.removeprefix("type.googleapis.com/"), item.value) for item in over_grpc.status.details
    ]
    # The same details, but for the retry delays, which count down between the two calls.
    assert _without_delays(_details(over_http.value)) == _without_delays(grpc_details)


async def test_invalid_input_over_http_is_invalid_argument_with_the_field_violations(
    server: TurngateServer, session: pb.SessionRef
) -> None:
    bad = pb.AdmitTurnRequest(session=pb.SessionRef(project_id="no spaces", session_id=session.session_id))
    async with http_client(server.http_port) as http:
        with pytest.raises(ConnectError) as error:
            await unary(http, ADMIT, bad)
    assert status(error.value) is grpc.StatusCode.INVALID_ARGUMENT
    ((kind, value),) = _details(error.value)
    assert kind == "google.rpc.BadRequest"
    detail = error_details_pb2.BadRequest.FromString(value)
    fields = {violation.field for violation in detail.field_violations}
    assert {"session.project_id", "turn_id", "runner_id"} <= fields


@pytest.mark.parametrize(
    "body",
    [b"{not json", b'{"session": {"projectId": "p"}, "turnIdd": "t1"}', b'{"session": 7}', b"\xff\xfe"],
    ids=["malformed", "unknown-field", "wrong-type", "not-utf8"],
)
async def test_a_body_that_is_not_a_request_is_invalid_argument_and_changes_nothing(
    server: TurngateServer, client: Client, session: pb.SessionRef, body: bytes
) -> None:
    before = await client.sessions.GetSession(pb.GetSessionRequest(session=session))
    answer = await post(server.http_port, ADMIT, body)
    assert answer.status == 400
    assert answer.json()["code"] == "invalid_argument"
    assert await client.sessions.GetSession(pb.GetSessionRequest(session=session)) == before


@pytest.mark.parametrize("wire", WIRES)
async def test_a_watch_over_http_streams_the_snapshot_then_events_and_resumes_from_its_cursor(
    server: TurngateServer, client: Client, session: pb.SessionRef, wire: str
) -> None:
    async with http_client(server.http_port, wire) as http:
        responses = stream(http, WATCH, pb.WatchSessionRequest(session=session))
        first = await anext(aiter(responses))
        assert first.event.WhichOneof("kind") == "snapshot"
        await admit(client, session, "t1", "r1")
        event = await anext(aiter(responses))
        assert event.event.WhichOneof("kind") == "turn_admitted"
        await responses.aclose()  # type: ignore[attr-defined]

        await client.control.CancelTurn(pb.CancelTurnRequest(session=session, expected_turn_id="t1"))
        resumed = stream(http, WATCH, pb.WatchSessionRequest(session=session, after_seq=event.event.seq))
        missed = await anext(aiter(resumed))
        await resumed.aclose()  # type: ignore[attr-defined]
    assert missed.event.seq == event.event.seq + 1
    assert missed.event.WhichOneof("kind") == "stop_requested"


async def test_a_browser_that_goes_away_ends_its_watch_on_the_server(
    server: TurngateServer, session: pb.SessionRef
) -> None:
    async with http_client(server.http_port) as http:
        responses = stream(http, WATCH, pb.WatchSessionRequest(session=session))
        await anext(aiter(responses))
        watching = server.hub.watchers
        await responses.aclose()  # type: ignore[attr-defined]
    await eventually(lambda: server.hub.watchers == watching - 1)


async def test_the_browsers_deadline_reaches_the_server(
    server: TurngateServer, session: pb.SessionRef
) -> None:
    async with http_client(server.http_port) as http:
        responses = stream(http, WATCH, pb.WatchSessionRequest(session=session), timeout_ms=300)
        await anext(aiter(responses))
        with pytest.raises(ConnectError) as ended:
            await anext(aiter(responses))
    assert status(ended.value) is grpc.StatusCode.DEADLINE_EXCEEDED


async def test_a_draining_server_ends_http_watches_unavailable_so_they_resume_elsewhere(
    own_server: OwnServer, session: pb.SessionRef
) -> None:
    async with (
        own_server(http_listen="127.0.0.1:0") as (drained, _),
        http_client(drained.http_port) as http,
    ):
        responses = stream(http, WATCH, pb.WatchSessionRequest(session=session))
        await anext(aiter(responses))
        stopping = asyncio.create_task(drained.stop())
        with pytest.raises(ConnectError) as ended:
            await anext(aiter(responses))
        await stopping
    assert status(ended.value) is grpc.StatusCode.UNAVAILABLE


def _details(error: ConnectError) -> list[tuple[str, bytes]]:
    return [(detail.type_name, detail.message_bytes) for detail in error.details]


def _without_delays(details: list[tuple[str, bytes]]) -> list[Message]:
    kinds: dict[str, type[Message]] = {
        "google.rpc.ErrorInfo": error_details_pb2.ErrorInfo,
        "google.rpc.RetryInfo": error_details_pb2.RetryInfo,
        "turngate.v1.AdmissionRefusal": pb.AdmissionRefusal,
    }
    parsed = []
    for kind, value in details:
        message = kinds[kind].FromString(value)
        for field in ("retry_delay", "retry_after"):
            if field in message.DESCRIPTOR.fields_by_name:
                message.ClearField(field)
        parsed.append(message)
    return parsed
