"""DNS rebinding (issue 20, item 4): with authentication off, a page of another site whose name
resolves to 127.0.0.1 reaches the HTTP listener with its own name in Host; it is refused 421,
RPCs (writes too) and the console alike, and nothing changes. Loopback names are served; with
authentication on, tokens guard the RPCs and any name is served."""

from __future__ import annotations

import pytest
from google.protobuf import json_format

from tests.support.servers import Client
from tests.support.sockets import ADMIT, body_of, connected, head, status_of
from turngate.service.server import TurngateServer
from turngate.v1 import turngate_pb2 as pb

FOREIGN = ("attacker.example", "attacker.example:80", "127.0.0.1.nip.io", "localhost.attacker.example", "")
WAIT_S = 5.0


async def admit_with_host(port: int, host: str, session: pb.SessionRef) -> bytes:
    request = pb.AdmitTurnRequest(session=session, turn_id="t-rebound", runner_id="r1")
    body = json_format.MessageToJson(request).encode()
    async with connected(port) as (connection,):
        await connection.send(
            head(ADMIT, host=host, content_length=len(body), headers={"connection": "close"}) + body
        )
        return await connection.until_closed(WAIT_S)


async def console_with_host(port: int, host: str) -> bytes:
    async with connected(port) as (connection,):
        await connection.send(f"GET / HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n".encode())
        return await connection.until_closed(WAIT_S)


@pytest.mark.parametrize("host", FOREIGN)
async def test_with_authentication_off_a_foreign_host_name_is_refused_421_and_nothing_changes(
    server: TurngateServer, client: Client, session: pb.SessionRef, host: str
) -> None:
    before = await client.sessions.GetSession(pb.GetSessionRequest(session=session))
    answer = await admit_with_host(server.http_port, host, session)
    assert status_of(answer) == 421
    assert b"misdirected request" in body_of(answer)
    assert status_of(await console_with_host(server.http_port, host)) == 421
    assert await client.sessions.GetSession(pb.GetSessionRequest(session=session)) == before


@pytest.mark.parametrize("name", ["localhost", "127.0.0.1", "[::1]", "LocalHost"])
async def test_with_authentication_off_loopback_host_names_are_served(
    server: TurngateServer, session: pb.SessionRef, name: str
) -> None:
    host = f"{name}:{server.http_port}"
    assert status_of(await admit_with_host(server.http_port, host, session)) == 200
    assert status_of(await console_with_host(server.http_port, host)) == 200


async def test_with_authentication_on_any_host_name_is_served_and_tokens_guard_the_rpcs(
    guarded: TurngateServer,
) -> None:
    assert status_of(await console_with_host(guarded.http_port, "turngate.internal.example")) == 200
    session = pb.SessionRef(project_id="p-sec-a", session_id="s-rebound")
    assert status_of(await admit_with_host(guarded.http_port, "attacker.example", session)) == 401
