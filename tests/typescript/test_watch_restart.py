"""The TypeScript client's watch across a restart of the real server: it reconnects by itself and
resumes from its cursor, so the events written while it was away arrive once, in order, none
missed (a Node process prints what the client's SessionWatch yields)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from asyncio.subprocess import PIPE
from pathlib import Path
from typing import Any

import pytest

from tests.support.calls import admit, complete, record_call
from tests.support.processes import free_port, spawn_server
from tests.support.waiting import eventually
from tests.typescript.npm import INSTALL_TIMEOUT_S, PACKAGE, accepts_connections, needs_npm, npm
from turngate.v1 import turngate_pb2 as pb

PROJECT = "p-ts-restart"
SESSION = pb.SessionRef(project_id=PROJECT, session_id="s-restart")
# Longer than the restart takes, so the turn is still running when the server is back.
OUTLASTING_A_RESTART = "30"
# How long a line of the watcher may take: reached only when the test fails (a reconnection
# backs off 2 s at most, a Node start takes a few).
LINE_TIMEOUT_S = 60.0
GENERATE_TIMEOUT_S = 120.0

pytestmark = needs_npm


class Watcher:
    """`print-watch.ts` for SESSION: its JSON lines, one at a time."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def line(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        async with asyncio.timeout(LINE_TIMEOUT_S):
            raw = await self.process.stdout.readline()
        assert raw, f"the watcher exited ({await self.process.wait()})"
        parsed: dict[str, Any] = json.loads(raw)
        return parsed

    async def event(self) -> dict[str, Any]:
        """The next event, past any reconnection lines."""
        while "seq" not in (line := await self.line()):
            pass
        return line


@pytest.mark.timeout(INSTALL_TIMEOUT_S + GENERATE_TIMEOUT_S + 4 * LINE_TIMEOUT_S)
async def test_the_watch_resumes_from_its_cursor_across_a_server_restart(tmp_path: Path) -> None:
    await npm("run", "generate", timeout_s=GENERATE_TIMEOUT_S)
    grpc_port, http_port = free_port(), free_port()
    args = ("--http-listen", f"127.0.0.1:{http_port}", "--lease-ttl", OUTLASTING_A_RESTART)
    env = {"TURNGATE_TEST_HTTP_URL": f"http://127.0.0.1:{http_port}", "TURNGATE_TEST_PROJECT": PROJECT}
    process = await asyncio.create_subprocess_exec(
        str(PACKAGE / "node_modules" / ".bin" / "tsx"),
        "test/support/print-watch.ts",
        SESSION.session_id,
        cwd=PACKAGE,
        env={**os.environ, **env},
        stdout=PIPE,
        start_new_session=True,
    )
    watcher = Watcher(process)
    try:
        async with spawn_server(tmp_path, *args, port=grpc_port) as first:
            admitted = await admit(first.client, SESSION, "t1", lease_ttl=float(OUTLASTING_A_RESTART))
            await record_call(first.client, admitted.lease, "c1")
            await eventually(lambda: accepts_connections(http_port))
            # The watcher may start before or after those writes: its snapshot reflects those before.
            seen = [await watcher.event()]
            assert seen[0]["kind"] == "snapshot"
            while seen[-1]["seq"] < 2:
                seen.append(await watcher.event())
            first.terminate()  # drains: the watch stream ends UNAVAILABLE, the client retries
        reconnect = await watcher.line()
        assert reconnect["reconnect"] == 2, reconnect

        async with spawn_server(tmp_path, *args, port=grpc_port) as second:
            # Written before or after the watcher is back: either way it gets them from its cursor.
            await record_call(second.client, admitted.lease, "c1", pb.TOOL_CALL_STATUS_SUCCEEDED)
            await complete(second.client, admitted.lease, pb.TURN_OUTCOME_CANCELLED)
            resumed = [await watcher.event(), await watcher.event()]
    finally:
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGKILL)
            await process.wait()

    assert [(e["seq"], e["kind"], e["resync"]) for e in resumed] == [
        (3, "toolCall", False),
        (4, "turnSettled", False),
    ]
    assert [e["seq"] for e in seen[1:]] == list(range(seen[0]["seq"] + 1, 3))
    assert {e["epoch"] for e in resumed} == {seen[-1]["epoch"]}
