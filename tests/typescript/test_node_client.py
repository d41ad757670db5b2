"""The TypeScript client's own `npm test` (clients/typescript: type check, unit tests, and its
end-to-end test admit → watch → stop → settled) against a real `turngate serve --http-listen`,
with a bearer token, over each of its transports (fetch and Node's HTTP/1.1 and HTTP/2; Connect
JSON and binary, gRPC-Web).

`.ci/run` installs the npm packages (`npm ci` in clients/typescript) before the suite runs."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
from asyncio.subprocess import PIPE, STDOUT
from pathlib import Path

import pytest

from tests.e2e.processes import free_port, spawn_server
from tests.security.principals import Named, write_tokens
from tests.waiting import eventually

PACKAGE = Path(__file__).resolve().parents[2] / "clients" / "typescript"
PROJECT = "p-ts"
# One principal with every role the test's calls need: runner (admit), gateway (stop), watcher.
NODE_CLIENT = Named("node-client", ("runner", "gateway", "watcher"), (PROJECT,))
TRANSPORTS = (
    "fetch, Connect JSON",
    "fetch, gRPC-Web",
    "node HTTP/1.1, Connect binary",
    "node HTTP/2, Connect binary",
)
# npm test type-checks, then runs every test file: reached only when something hangs.
NPM_TEST_TIMEOUT_S = 240.0

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("npm") is None,
    reason="node and npm are not installed: the TypeScript client's tests need them",
)


async def _accepts_connections(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    writer.close()
    await writer.wait_closed()
    return True


@pytest.mark.timeout(NPM_TEST_TIMEOUT_S + 60)
async def test_npm_test_passes_admit_watch_stop_settled_against_a_real_http_listener(tmp_path: Path) -> None:
    assert (PACKAGE / "node_modules").is_dir(), "run `npm ci` in clients/typescript first (.ci/run does)"
    http_port = free_port()
    tokens = write_tokens(tmp_path / "tokens.toml", (NODE_CLIENT,))
    async with spawn_server(tmp_path, "--http-listen", f"127.0.0.1:{http_port}", "--auth-file", str(tokens)):
        await eventually(lambda: _accepts_connections(http_port))
        env = {
            **os.environ,
            "TURNGATE_HTTP_URL": f"http://127.0.0.1:{http_port}",
            "TURNGATE_TOKEN": NODE_CLIENT.token,
            "TURNGATE_PROJECT": PROJECT,
        }
        npm = await asyncio.create_subprocess_exec(
            "npm", "test", cwd=PACKAGE, env=env, stdout=PIPE, stderr=STDOUT, start_new_session=True
        )
        try:
            async with asyncio.timeout(NPM_TEST_TIMEOUT_S):
                output, _ = await npm.communicate()
        finally:
            if npm.returncode is None:  # timed out: npm and the node processes under it
                os.killpg(npm.pid, signal.SIGKILL)
                await npm.wait()
    report = output.decode()
    assert npm.returncode == 0, report
    # Ran, not skipped: each transport's end-to-end test passed, and the unauthenticated check.
    for transport in TRANSPORTS:
        assert f"✔ admit → watch → stop → settled ({transport})" in report, report
    assert "✔ without the token the service answers UNAUTHENTICATED" in report, report
