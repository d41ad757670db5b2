"""What a stranger may hold on the HTTP listeners (issue 20, item 1; docs/security.md, The HTTP
edge), with real sockets, bounded in count and time: a request's headers and then its body must
each arrive within the request timeout, a caller without a valid token is refused before its
body is read, connections are capped in all and per address, a flood at the process's file limit
leaves gRPC serving and the log short, accept failures are logged once per interval, and the
metrics listener holds no thread per connection."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import socket
from pathlib import Path

import pytest

from tests.support.http_calls import http_client, stream
from tests.support.principals import WATCHER_A, bearer
from tests.support.processes import connect, free_port, serve_log, spawn_server
from tests.support.servers import OwnServer
from tests.support.sockets import ADMIT, GET_SESSION, Raw, body_of, connected, head, status_of
from tests.support.waiting import eventually
from turngate.service.server import TurngateServer
from turngate.service.web.accept_errors import AcceptErrors
from turngate.v1 import turngate_pb2 as pb
from turngate.v1 import turngate_pb2_grpc as pb_grpc

TIMEOUT_S = 1.0
# How much later than its bound a cut-off may come (timers, a busy machine); never waited out
# when the server keeps its bound.
SLACK_S = 2.0
FLOOD = 20


def connect_code(answer: bytes) -> str:
    code: str = json.loads(body_of(answer))["code"]
    return code


async def trickle(connections: list[Raw], data: bytes, every: float = 0.1) -> None:
    """Sends `data` a byte at a time to each connection, until cancelled or the data runs out."""
    for byte in data:
        for connection in connections:
            with contextlib.suppress(ConnectionError):
                await connection.send(bytes([byte]))
        await asyncio.sleep(every)


async def test_slow_body_is_cut_off_within_the_request_timeout(own_server: OwnServer) -> None:
    async with (
        own_server(http_listen="127.0.0.1:0", http_request_timeout=TIMEOUT_S) as (server, _),
        connected(server.http_port, FLOOD) as slow,
    ):
        for connection in slow:
            await connection.send(head(ADMIT, content_length=100_000))
        sending = asyncio.create_task(trickle(slow, b"{" + b" " * 1000))
        try:
            answers = await asyncio.gather(*(c.until_closed(TIMEOUT_S + SLACK_S) for c in slow))
        finally:
            sending.cancel()
    for answer in answers:
        assert status_of(answer) == 504
        assert connect_code(answer) == "deadline_exceeded"


async def test_slow_headers_and_idle_connections_are_cut_off_within_the_request_timeout(
    own_server: OwnServer,
) -> None:
    async with (
        own_server(http_listen="127.0.0.1:0", http_request_timeout=TIMEOUT_S) as (server, _),
        connected(server.http_port, FLOOD) as slow,
        connected(server.http_port, FLOOD) as idle,
    ):
        sending = asyncio.create_task(trickle(slow, head(GET_SESSION) * 10))
        try:
            await asyncio.gather(*(c.until_closed(TIMEOUT_S + SLACK_S) for c in (*slow, *idle)))
        finally:
            sending.cancel()


@pytest.mark.parametrize(
    "authorization", [None, "Bearer not-a-token", bearer(WATCHER_A)], ids=["none", "unknown", "role"]
)
async def test_a_caller_without_a_valid_token_is_refused_before_its_body_is_read(
    guarded: TurngateServer, authorization: str | None
) -> None:
    headers = {} if authorization is None else {"authorization": authorization}
    async with connected(guarded.http_port, FLOOD) as strangers:
        for stranger in strangers:
            await stranger.send(head(ADMIT, content_length=100_000, headers=headers))  # no body follows
        answers = await asyncio.gather(*(s.until_closed(SLACK_S) for s in strangers))
    expected = (401, "unauthenticated") if authorization != bearer(WATCHER_A) else (403, "permission_denied")
    assert {(status_of(answer), connect_code(answer)) for answer in answers} == {expected}


async def served_to(port: int, count: int, source: str = "127.0.0.1") -> bool:
    """Whether `count` connections from `source` at once each get an answer to a read."""
    body = json.dumps({"session": {"projectId": "p-limits", "sessionId": "s-1"}}).encode()
    request = head(GET_SESSION, content_length=len(body), headers={"connection": "close"}) + body
    async with connected(port, count, source=source) as connections:
        for connection in connections:
            await connection.send(request)
        answers = await asyncio.gather(*(c.until_closed(SLACK_S) for c in connections))
    return all(status_of(answer) == 200 for answer in answers)


async def test_connections_beyond_the_caps_are_refused_503_and_their_places_come_back(
    own_server: OwnServer,
) -> None:
    limits = {"http_max_connections": 6, "http_max_connections_per_peer": 4}
    # A connection its client closed keeps its place until the server closes it too: hypercorn
    # does once the idle timer (the request timeout) has run out.
    idle_s = 3.0
    async with own_server(http_listen="127.0.0.1:0", http_request_timeout=idle_s, **limits) as (server, _):
        port = server.http_port
        async with connected(port, 4) as at_cap:
            async with connected(port, 1) as (over,):
                answer = await over.until_closed(SLACK_S)
            assert status_of(answer) == 503
            assert b"too many connections" in body_of(answer)
            async with connected(port, 2, source="127.0.0.2") as others:
                async with connected(port, 1, source="127.0.0.3") as (beyond_total,):
                    assert status_of(await beyond_total.until_closed(SLACK_S)) == 503
                for held in (*at_cap, *others):
                    assert await held.still_open(0.2), "admitted connections stay"
        await eventually(lambda: served_to(port, 4), timeout_s=idle_s + SLACK_S)


async def test_a_flood_of_connections_at_the_file_limit_leaves_grpc_serving_and_the_log_short(
    tmp_path: Path,
) -> None:
    """In a child process whose file limit is 256, 400 connections to the HTTP port: before, they
    took every descriptor, gRPC calls failed and asyncio logged a traceback per accept."""
    http_port, grpc_port = free_port(), free_port()
    flags = ("--http-listen", f"127.0.0.1:{http_port}", "--http-max-connections-per-peer", "1000")
    async with spawn_server(tmp_path, *flags, port=grpc_port, open_files=256):
        flood = []
        try:
            for _ in range(400):
                with contextlib.suppress(OSError, TimeoutError):
                    async with asyncio.timeout(1):
                        flood.append(await asyncio.open_connection("127.0.0.1", http_port))
            async with connect(grpc_port) as channel:
                sessions = pb_grpc.SessionServiceStub(channel)
                request = pb.GetSessionRequest(session=pb.SessionRef(project_id="p", session_id="s"))
                await sessions.GetSession(request, timeout=5, wait_for_ready=True)
        finally:
            for _, writer in flood:
                writer.close()
    log = serve_log(tmp_path, grpc_port).read_text()
    assert "Traceback" not in log
    about_connections = [
        line for line in log.splitlines() if " turngate.http: " in line or " asyncio: " in line
    ]
    assert len(about_connections) <= 4, log
    assert "HTTP connections limited to 128, half the process's file limit (256)" in log
    assert "refused an HTTP connection from 127.0.0.1" in log


async def test_accept_failures_for_want_of_descriptors_are_logged_once_per_interval_with_a_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """As asyncio reports them: a context per failed accept(), each retried a second later."""
    loop = asyncio.get_running_loop()
    handler = AcceptErrors(None, interval=0.2)
    out_of_files = {
        "message": "socket.accept() out of system resource",
        "exception": OSError(errno.EMFILE, "Too many open files"),
        "socket": socket.socket(),
    }
    caplog.set_level(logging.ERROR, logger="turngate.http")
    try:
        for _ in range(1000):
            handler(loop, out_of_files)
        await eventually(lambda: len(caplog.records) == 2)
    finally:
        out_of_files["socket"].close()  # type: ignore[attr-defined]
    first, summary = (record.getMessage() for record in caplog.records)
    assert (
        first
        == "cannot accept connections: Too many open files (the process is out of file descriptors or memory)"
    )
    assert summary.endswith("(999 more in the last 0.2s)")
    assert not [record for record in caplog.records if record.exc_info]


def threads_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no Threads line")


async def test_the_metrics_listener_holds_no_thread_per_connection_and_cuts_idle_ones_off(
    tmp_path: Path,
) -> None:
    metrics = free_port()
    env = {"TURNGATE_HTTP_REQUEST_TIMEOUT": str(TIMEOUT_S)}
    async with spawn_server(tmp_path, "--metrics-listen", f"127.0.0.1:{metrics}", env=env) as spawned:
        before = threads_of(spawned.process.pid)
        async with connected(metrics, FLOOD) as idle, connected(metrics, FLOOD, source="127.0.0.2") as more:
            for connection in idle:
                await connection.send(b"GET /metrics HTTP/1.1\r\n")  # and never the rest
            assert threads_of(spawned.process.pid) < before + 5
            await asyncio.gather(*(c.until_closed(TIMEOUT_S + SLACK_S) for c in (*idle, *more)))


async def test_a_watch_streams_on_past_the_request_timeout(own_server: OwnServer) -> None:
    """Only the request is timed: a watch's response goes on as long as it likes."""
    session = pb.SessionRef(project_id="p-limits", session_id="s-watch")
    async with (
        own_server(http_listen="127.0.0.1:0", http_request_timeout=0.5) as (server, client),
        http_client(server.http_port) as http,
    ):
        responses = stream(
            http, "/turngate.v1.SessionService/WatchSession", pb.WatchSessionRequest(session=session)
        )
        assert (await anext(aiter(responses))).event.WhichOneof("kind") == "snapshot"
        await asyncio.sleep(1.5)
        await client.admission.AdmitTurn(pb.AdmitTurnRequest(session=session, turn_id="t1", runner_id="r1"))
        assert (await anext(aiter(responses))).event.WhichOneof("kind") == "turn_admitted"
        await responses.aclose()  # type: ignore[attr-defined]
