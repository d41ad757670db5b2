"""CORS on the HTTP listener: only the configured origins, never `*`, and a server with none
configured answers no cross-origin request at all (same-origin pages, the console, still work)."""

from __future__ import annotations

import pytest

from tests.support.servers import OwnServer
from tests.web.conftest import ALLOWED_ORIGIN
from tests.web.raw import Answer, request
from turngate.service.server import TurngateServer

GET_SESSION = "/turngate.v1.SessionService/GetSession"
BODY = b'{"session": {"projectId": "p-cors", "sessionId": "s1"}}'


def preflight(origin: str) -> dict[str, str]:
    return {
        "origin": origin,
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type, connect-protocol-version",
    }


async def cross_origin_call(port: int, origin: str) -> Answer:
    return await request(
        port, "POST", GET_SESSION, BODY, {"origin": origin, "content-type": "application/json"}
    )


async def test_a_preflight_from_an_allowed_origin_names_it_and_lets_the_bearer_token_through(
    server: TurngateServer,
) -> None:
    answer = await request(server.http_port, "OPTIONS", GET_SESSION, headers=preflight(ALLOWED_ORIGIN))
    assert answer.status == 200
    assert answer.headers["access-control-allow-origin"] == ALLOWED_ORIGIN
    allowed = {name.strip() for name in answer.headers["access-control-allow-headers"].lower().split(",")}
    assert {"authorization", "content-type", "connect-protocol-version", "x-grpc-web"} <= allowed
    assert "POST" in answer.headers["access-control-allow-methods"]


async def test_a_call_from_an_allowed_origin_may_read_the_answer_and_the_grpc_web_status(
    server: TurngateServer,
) -> None:
    answer = await cross_origin_call(server.http_port, ALLOWED_ORIGIN)
    assert answer.status == 200
    assert answer.headers["access-control-allow-origin"] == ALLOWED_ORIGIN
    assert "grpc-status" in answer.headers["access-control-expose-headers"].lower()


@pytest.mark.parametrize("origin", ["https://evil.example.com", "https://app.example.com.evil.com", "null"])
async def test_a_preflight_from_another_origin_is_refused_and_names_no_origin(
    server: TurngateServer, origin: str
) -> None:
    answer = await request(server.http_port, "OPTIONS", GET_SESSION, headers=preflight(origin))
    assert answer.status == 400
    assert answer.headers.get("access-control-allow-origin") != origin


async def test_a_call_from_another_origin_gets_no_cors_header_so_its_page_cannot_read_it(
    server: TurngateServer,
) -> None:
    answer = await cross_origin_call(server.http_port, "https://evil.example.com")
    assert "access-control-allow-origin" not in answer.headers


async def test_no_answer_ever_allows_every_origin(server: TurngateServer) -> None:
    for origin in (ALLOWED_ORIGIN, "https://evil.example.com"):
        for method, body in (("OPTIONS", None), ("POST", BODY)):
            headers = {**preflight(origin), "content-type": "application/json"}
            answer = await request(server.http_port, method, GET_SESSION, body, headers)
            assert answer.headers.get("access-control-allow-origin") != "*"


async def test_with_no_origins_configured_no_cross_origin_call_is_allowed(own_server: OwnServer) -> None:
    async with own_server(http_listen="127.0.0.1:0") as (plain, _):
        answer = await request(plain.http_port, "OPTIONS", GET_SESSION, headers=preflight(ALLOWED_ORIGIN))
        same_origin = await request(
            plain.http_port, "POST", GET_SESSION, BODY, {"content-type": "application/json"}
        )
    assert "access-control-allow-origin" not in answer.headers
    assert same_origin.status == 200
