"""The TypeScript client's runnable Node example (clients/typescript/examples/watch.ts) against a
real `turngate serve --http-listen`: it prints a session's events as JSON lines, int64 fields as
strings (bigint-safe), and stops after --limit."""

from __future__ import annotations

import asyncio
import json
import os
from asyncio.subprocess import PIPE
from pathlib import Path

import pytest

from tests.support.principals import Named, bearer, client_as, write_tokens
from tests.support.processes import free_port, spawn_server
from tests.support.waiting import eventually
from tests.typescript.npm import INSTALL_TIMEOUT_S, PACKAGE, accepts_connections, needs_npm, npm
from turngate.v1 import turngate_pb2 as pb

PROJECT = "p-ts-example"
RUNNER = Named("example-runner", ("runner", "watcher"), (PROJECT,))
# tsx compiles the example on the fly: reached only when it hangs.
EXAMPLE_TIMEOUT_S = 60.0

pytestmark = needs_npm


@pytest.mark.timeout(INSTALL_TIMEOUT_S + EXAMPLE_TIMEOUT_S + 60)
async def test_the_node_example_prints_a_sessions_events_as_json_lines_with_int64_as_strings(
    tmp_path: Path,
) -> None:
    await npm("run", "generate", timeout_s=INSTALL_TIMEOUT_S)
    grpc_port, http_port = free_port(), free_port()
    tokens = write_tokens(tmp_path / "tokens.toml", (RUNNER,))
    args = ("--http-listen", f"127.0.0.1:{http_port}", "--auth-file", str(tokens))
    async with spawn_server(tmp_path, *args, port=grpc_port):
        await eventually(lambda: accepts_connections(http_port))
        session = pb.SessionRef(project_id=PROJECT, session_id="s-node")
        async with client_as(grpc_port, bearer(RUNNER)) as runner:
            admitted = await runner.admission.AdmitTurn(
                pb.AdmitTurnRequest(session=session, turn_id="t1", runner_id="r1")
            )
        process = await asyncio.create_subprocess_exec(
            "npx", "tsx", "examples/watch.ts",
            "--server", f"http://127.0.0.1:{http_port}",
            "--project", PROJECT,
            "--session", session.session_id,
            "--token", RUNNER.token,
            "--limit", "1",
            cwd=PACKAGE, env=dict(os.environ), stdout=PIPE, stderr=PIPE,
        )  # fmt: skip
        async with asyncio.timeout(EXAMPLE_TIMEOUT_S):
            out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    [line] = out.decode().splitlines()
    event = json.loads(line)
    snapshot = event["snapshot"]
    assert snapshot["active"]["turnId"] == "t1"
    assert snapshot["active"]["generation"] == str(admitted.lease.generation), "int64 as a string"
    assert event["seq"] == "1"
