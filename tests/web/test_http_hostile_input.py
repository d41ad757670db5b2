"""Malformed input to the HTTP listener (issue 20, items 5 and 6): a header that is not text (over
HTTP/1.1 and HTTP/2), a lone surrogate in Connect JSON, a body that is not a request, and a body
framed twice, each answered 4xx with a message that repeats nothing of the input, and without a
traceback (no ERROR log line); decoding comes after authentication, as on gRPC."""

from __future__ import annotations

import json
import logging

import pytest
from google.protobuf import json_format

from tests.support.principals import RUNNER_A, bearer
from tests.support.servers import Client
from tests.support.sockets import ADMIT, GET_SESSION, connected, head, post, status_of
from turngate.service.server import TurngateServer
from turngate.v1 import turngate_pb2 as pb

WAIT_S = 5.0
# Values no header may carry, by the HTTP versions whose parsers let them reach the application
# (HTTP/1.1's h11 refuses control characters itself, with a 400).
NOT_TEXT = {
    "not-utf8": (b"Bearer \xff\xfe\xfd", ("http/1.1", "h2")),
    "latin1": (b"caf\xe9 cr\xe8me", ("http/1.1", "h2")),
    "control": (b"a\x01b\x1b[2J", ("h2",)),
    "delete": (b"ab\x7f", ("h2",)),
}
CASES = [(name, wire) for name, (_, wires) in NOT_TEXT.items() for wire in wires]


@pytest.fixture(autouse=True)
def _errors_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR)


def assert_no_error_logged(caplog: pytest.LogCaptureFixture) -> None:
    errors = [record for record in caplog.records if record.levelno >= logging.ERROR]
    assert not errors, [record.getMessage() for record in errors]


def request_body(session: pb.SessionRef) -> bytes:
    return json_format.MessageToJson(pb.GetSessionRequest(session=session)).encode()


def connect_error(body: bytes) -> tuple[str, str]:
    error = json.loads(body)
    return error["code"], error.get("message", "")


@pytest.mark.parametrize(("value", "wire"), CASES, ids=[f"{name}-{wire}" for name, wire in CASES])
@pytest.mark.parametrize("header", ["authorization", "traceparent", "tracestate", "x-anything"])
async def test_a_header_that_is_not_text_is_a_4xx_naming_no_value_and_logs_no_traceback(
    guarded: TurngateServer, caplog: pytest.LogCaptureFixture, header: str, value: str, wire: str
) -> None:
    raw = NOT_TEXT[value][0]
    credentials = [] if header == "authorization" else [(b"authorization", bearer(RUNNER_A).encode())]
    session = pb.SessionRef(project_id="p-sec-a", session_id="s-headers")
    status, body = await post(
        guarded.http_port, wire, [*credentials, (header.encode(), raw)], request_body(session)
    )
    code, message = connect_error(body)
    if header == "authorization":
        assert (status, code) == (401, "unauthenticated")
    else:
        assert (status, code) == (400, "invalid_argument")
        assert (header in message) == (header != "x-anything"), message
    assert raw.decode("latin-1") not in message
    assert_no_error_logged(caplog)


async def test_with_authentication_off_an_authorization_that_is_not_text_is_invalid_argument(
    server: TurngateServer, session: pb.SessionRef, caplog: pytest.LogCaptureFixture
) -> None:
    status, body = await post(
        server.http_port, "http/1.1", [(b"authorization", b"Bearer \xff")], request_body(session)
    )
    assert (status, connect_error(body)[0]) == (400, "invalid_argument")
    assert_no_error_logged(caplog)


# A lone surrogate, spelled as JSON's escape: valid JSON, but no string of Unicode text.
SURROGATE = "\\ud800"
SURROGATES = {
    "duration": f'{{"session": {{"projectId": "p"}}, "turnId": "t", "leaseTtl": "{SURROGATE}"}}',
    "duration-inside": f'{{"turnId": "t", "leaseTtl": "1{SURROGATE}s"}}',
    "key": f'{{"{SURROGATE}": 1}}',
    "nested-key": f'{{"session": {{"{SURROGATE}": "p"}}}}',
    "enum": f'{{"mode": "{SURROGATE}"}}',
    "string": f'{{"turnId": "{SURROGATE}"}}',
}


@pytest.mark.parametrize("where", SURROGATES)
async def test_a_lone_surrogate_in_connect_json_is_invalid_argument_naming_no_input(
    server: TurngateServer,
    client: Client,
    session: pb.SessionRef,
    caplog: pytest.LogCaptureFixture,
    where: str,
) -> None:
    before = await client.sessions.GetSession(pb.GetSessionRequest(session=session))
    status, body = await post(server.http_port, "http/1.1", [], SURROGATES[where].encode(), ADMIT)
    assert status == 400
    code, message = connect_error(body)
    assert code == "invalid_argument"
    assert message == "the request is not a turngate.v1.AdmitTurnRequest in protobuf's JSON form"
    assert await client.sessions.GetSession(pb.GetSessionRequest(session=session)) == before
    assert_no_error_logged(caplog)


@pytest.mark.parametrize(
    "body",
    [b'{"turnIdd": "SECRET-0123456789"}', b'{"turnId": 12, "x": "SECRET-0123456789"}', b"{SECRET-0123456789"],
    ids=["unknown-field", "wrong-type", "not-json"],
)
async def test_connect_decode_errors_repeat_no_input_and_come_after_authentication(
    server: TurngateServer, guarded: TurngateServer, body: bytes
) -> None:
    status, answer = await post(server.http_port, "http/1.1", [], body, ADMIT)
    code, message = connect_error(answer)
    assert (status, code) == (400, "invalid_argument")
    assert "SECRET" not in message
    assert "turnIdd" not in message
    # Without a token the answer is that, whatever the body (docs/security.md, The order of checks).
    status, answer = await post(guarded.http_port, "http/1.1", [], body, ADMIT)
    assert (status, connect_error(answer)[0]) == (401, "unauthenticated")


async def test_a_request_with_both_content_length_and_transfer_encoding_is_refused_and_its_connection_closed(
    server: TurngateServer, session: pb.SessionRef
) -> None:
    """RFC 9112 §6.3: a request-smuggling sign; the server must close the connection after it."""
    body = request_body(session)
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    smuggled = head(GET_SESSION, content_length=len(body), headers={"transfer-encoding": "chunked"}) + chunked
    next_request = head(GET_SESSION, content_length=len(body)) + body
    async with connected(server.http_port) as (connection,):
        await connection.send(smuggled + next_request)
        answer = await connection.until_closed(WAIT_S)
    assert status_of(answer) == 400
    assert answer.count(b"HTTP/1.1 ") == 1, "the request after it is not served"
