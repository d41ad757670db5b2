"""Hypothesis fuzzing of the HTTP listener's edge (issue 20, item 5), on real servers on real
ports, over HTTP/1.1 and HTTP/2: every unary RPC of the contract with one hostile header (any
bytes, not UTF-8, control characters, encoded lone surrogates) among those the listener reads,
and a Connect JSON body whose keys and strings may hold lone surrogates at any depth. Every
answer is below 500 (or the HTTP/2 layer's own reset), a refusal repeats no fuzzed header value,
nothing is logged at ERROR (no traceback), and both servers keep serving. One server has
authentication off (loopback host names only), the other requires tokens: there a valid token
rides along unless the fuzzed header is the token itself.

Examples follow TURNGATE_HYPOTHESIS_PROFILE, as tests/security/test_fuzz.py's (fuzz_settings.py)."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.security.fuzz_settings import FUZZ, SECRET_LENGTH, THOROUGH
from tests.security.fuzz_strategies import HTTP_HEADERS, METHODS, connect_json, header_values
from tests.support.principals import ADMIN, bearer
from tests.support.servers import running, settings_for
from tests.support.sockets import WIRES, post
from turngate.service.server import TurngateServer

EXAMPLES_PER_WIRE = 1_000 if THOROUGH else 60
UNARY = [(path, method) for path, method in METHODS if not method.server_streaming]
pytestmark = pytest.mark.timeout(3_600 if THOROUGH else 120)


@pytest.fixture(scope="module")
async def open_http(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[TurngateServer]:
    """Authentication off, the HTTP listener on."""
    settings = settings_for(str(tmp_path_factory.mktemp("fuzz-http")), http_listen="127.0.0.1:0")
    async for server, _ in running(settings):
        yield server


def echoed(value: bytes, body: bytes) -> bool:
    """Whether a refusal's body repeats `value` (a value as long as a token, or its text)."""
    if len(value) < SECRET_LENGTH:
        return False
    return value in body or value.decode("latin-1") in body.decode("utf-8", "replace")


@pytest.mark.parametrize("wire", WIRES)
@settings(
    FUZZ,
    max_examples=EXAMPLES_PER_WIRE,
    suppress_health_check=[*FUZZ.suppress_health_check, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
async def test_fuzzed_http_headers_and_lone_surrogates_never_get_a_5xx_an_echo_or_a_traceback(
    open_http: TurngateServer,
    guarded: TurngateServer,
    wire: str,
    data: st.DataObject,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR)
    logged = len(caplog.records)  # the same capture serves every example
    server = data.draw(st.sampled_from((open_http, guarded)), label="server")
    path, method = data.draw(st.sampled_from(UNARY), label="rpc")
    name = data.draw(st.sampled_from(HTTP_HEADERS), label="header")
    # Over HTTP/1.1 a CR or LF is framing, not part of a value: it makes another request.
    framed = wire == "http/1.1"
    value = data.draw(
        header_values()
        .map(lambda v: v.replace(b"\r", b"").replace(b"\n", b"") if framed else v)
        .filter(bool),
        label="value",
    )
    body = data.draw(connect_json(method.input_type), label="body")
    token = (
        [] if server is open_http or name == "authorization" else [(b"authorization", bearer(ADMIN).encode())]
    )
    status, answer = await post(server.http_port, wire, [*token, (name.encode(), value)], body, path)
    assert status < 500, f"{status} {answer[:300]!r}"
    assert not echoed(value, answer), answer[:300]
    if status >= 400 and answer.startswith(b"{"):
        assert "\\ud" not in json.loads(answer).get("message", ""), "a refusal repeats a lone surrogate"
    assert not [record.getMessage() for record in caplog.records[logged:] if record.levelno >= logging.ERROR]


async def test_both_http_servers_keep_serving_after_fuzzing(
    open_http: TurngateServer, guarded: TurngateServer
) -> None:
    request = json.dumps({"session": {"projectId": "p-sec-a", "sessionId": "after-fuzz"}}).encode()
    for server, token in ((open_http, []), (guarded, [(b"authorization", bearer(ADMIN).encode())])):
        for wire in WIRES:
            status, answer = await post(server.http_port, wire, token, request)
            assert status == 200, answer
            assert json.loads(answer)["snapshot"]["phase"] == "SESSION_PHASE_IDLE"
