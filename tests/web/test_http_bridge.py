"""The bridge between the HTTP listener and the gRPC server (a private Unix socket), issue 20,
item 7: a directory that a killed server left behind is removed at the next start; calls are
logged with the browser's address, not the socket's (spans too: tests/telemetry/test_traces.py),
and with the setting, one access log line each."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.http_calls import code_of, http_client, unary
from tests.support.processes import free_port, spawn_server
from tests.support.servers import OwnServer
from turngate.service.server import TurngateServer
from turngate.service.web.private_socket import PREFIX, PrivateSocket
from turngate.v1 import turngate_pb2 as pb


@pytest.fixture
def short_tmpdir() -> Iterator[Path]:
    """A TMPDIR of the test's own, short: the bridge's socket path in it must fit a Unix socket
    address (108 bytes), which one under pytest's per-worker, per-test directories may not."""
    temp = Path(tempfile.mkdtemp(prefix="tg-"))
    yield temp
    shutil.rmtree(temp, ignore_errors=True)


async def test_a_bridge_directory_left_by_a_killed_server_is_removed_at_the_next_start(
    tmp_path: Path, short_tmpdir: Path
) -> None:
    temp = short_tmpdir
    env = {"TMPDIR": str(temp)}
    async with spawn_server(tmp_path, "--http-listen", f"127.0.0.1:{free_port()}", env=env) as killed:
        left = set(temp.iterdir())
        assert left, "the bridge's directory is in TMPDIR"
        await killed.kill()
    assert set(temp.iterdir()) == left, "SIGKILL leaves it behind"
    async with spawn_server(tmp_path, "--http-listen", f"127.0.0.1:{free_port()}", env=env):
        now = set(temp.iterdir())
        assert not now & left, "the killed server's directory is removed"
        assert len(now) == 1, "the running server's own is there"
    assert not set(temp.iterdir()), "a server that stops removes its own"


def test_a_bridge_directory_whose_process_runs_or_that_is_not_one_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead = tmp_path / f"{PREFIX}{ended.stdout.strip()}-old"
    running = tmp_path / f"{PREFIX}{os.getppid()}-in-use"
    link = tmp_path / f"{PREFIX}{ended.stdout.strip()}-link"
    unrelated = tmp_path / f"{PREFIX}not-a-pid-x"
    for directory in (dead, running, unrelated):
        directory.mkdir()
    link.symlink_to(running)
    made = PrivateSocket()
    try:
        assert {path.name for path in tmp_path.iterdir()} == {
            made.directory.name,
            running.name,
            link.name,
            unrelated.name,
        }
    finally:
        made.remove()
    assert not made.directory.exists()


GET_SESSION = "/turngate.v1.SessionService/GetSession"


async def test_a_refused_http_call_is_logged_with_the_browsers_address_not_the_private_socket(
    guarded: TurngateServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="turngate.auth")
    request = pb.GetSessionRequest(session=pb.SessionRef(project_id="p-sec-a", session_id="s-peer"))
    await code_of(guarded.http_port, "connect-json", None, GET_SESSION, request)
    [line] = [
        record.getMessage()
        for record in caplog.records
        if "missing or unknown bearer token" in record.getMessage()
    ]
    assert " from ipv4:127.0.0.1:" in line
    assert "unix:" not in line


async def test_with_http_access_log_each_http_call_is_logged_with_the_browsers_address(
    own_server: OwnServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="turngate.http.access")
    request = pb.GetSessionRequest(session=pb.SessionRef(project_id="p-access", session_id="s-1"))
    for logged in (False, True):
        caplog.clear()
        async with (
            own_server(http_listen="127.0.0.1:0", http_access_log=logged) as (server, _),
            http_client(server.http_port) as http,
        ):
            await unary(http, GET_SESSION, request)
        lines = [record.getMessage() for record in caplog.records if record.name == "turngate.http.access"]
        if not logged:
            assert lines == [], "off by default"
            continue
        [line] = lines
        assert line.startswith("127.0.0.1:")
        assert f'"POST {GET_SESSION} 1.1" 200 ' in line
