"""The TypeScript client's own `npm test` (clients/typescript: type check, unit tests, and its
end-to-end tests admit → watch → stop → settled, steer and queue move, and a project's sessions
listed) against a real `turngate serve --http-listen`, with a bearer token, over each of its
transports (fetch and Node's HTTP/1.1 and HTTP/2; Connect JSON and binary, gRPC-Web), and with a
session token the gateway minted.

`.ci/run` installs the npm packages (`npm ci` in clients/typescript) before the suite runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.principals import Named, write_tokens
from tests.support.processes import free_port, run_cli, spawn_server
from tests.support.waiting import eventually
from tests.typescript.npm import INSTALL_TIMEOUT_S, accepts_connections, needs_npm, npm

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

pytestmark = needs_npm


@pytest.mark.timeout(INSTALL_TIMEOUT_S + NPM_TEST_TIMEOUT_S + 60)
async def test_npm_test_passes_admit_watch_stop_settled_against_a_real_http_listener(tmp_path: Path) -> None:
    http_port = free_port()
    tokens = write_tokens(tmp_path / "tokens.toml", (NODE_CLIENT,))
    keys = tmp_path / "session-keys.toml"
    keys.write_text(run_cli(tmp_path, "token", "key").stdout)
    args = (
        "--http-listen",
        f"127.0.0.1:{http_port}",
        "--auth-file",
        str(tokens),
        "--session-token-keys",
        str(keys),
    )
    async with spawn_server(tmp_path, *args):
        await eventually(lambda: accepts_connections(http_port))
        env = {
            "TURNGATE_TEST_HTTP_URL": f"http://127.0.0.1:{http_port}",
            "TURNGATE_TEST_TOKEN": NODE_CLIENT.token,
            "TURNGATE_TEST_PROJECT": PROJECT,
        }
        report = await npm("test", env=env, timeout_s=NPM_TEST_TIMEOUT_S)
    # Ran, not skipped: each transport's end-to-end test passed, and the unauthenticated check.
    for transport in TRANSPORTS:
        assert f"✔ admit → watch → stop → settled ({transport})" in report, report
    assert "✔ without the token the service answers UNAUTHENTICATED" in report, report
    assert "✔ steer → turn_steered → acknowledged → steer_ended; a queued turn moved to the head" in report, (
        report
    )
    assert (
        "✔ a session token minted by a gateway watches and stops its one session, and no other" in report
    ), report
    assert (
        "✔ lists the project's sessions, the most recently active first, a page at a time, and the project"
        in report
    ), report
