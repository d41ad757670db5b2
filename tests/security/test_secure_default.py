"""Secure by default: without a tokens file turngate listens on loopback only; beyond loopback it
refuses to start unless told --insecure, and then warns at every start."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic import ValidationError

from tests.support.calls import admit
from tests.support.principals import write_tokens
from tests.support.processes import free_port, run_cli, spawn_server
from turngate.service.config import Settings
from turngate.v1 import turngate_pb2 as pb


@pytest.mark.parametrize("listen", ["127.0.0.1:0", "127.0.0.2:50051", "[::1]:0", "localhost:0"])
def test_loopback_needs_no_tokens_file(listen: str) -> None:
    assert Settings(listen=listen).listens_beyond_loopback is False


@pytest.mark.parametrize(
    "listen", ["0.0.0.0:50051", "*:50051", "[::]:50051", "10.1.2.3:50051", "example.com:1"]
)
def test_beyond_loopback_without_a_tokens_file_is_refused(listen: str) -> None:
    with pytest.raises(ValidationError, match="without --auth-file"):
        Settings(listen=listen)


def test_beyond_loopback_with_a_tokens_file_or_insecure_is_accepted(tmp_path: Path) -> None:
    assert Settings(listen="0.0.0.0:50051", auth_file=write_tokens(tmp_path / "t.toml")).auth_file is not None
    assert Settings(listen="0.0.0.0:50051", insecure=True).insecure


def test_serve_beyond_loopback_without_tokens_exits_with_usage_and_the_reason(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "serve", "--listen", f"0.0.0.0:{free_port()}")
    assert result.returncode == 2
    assert "without --auth-file would let anyone who can connect run and stop turns" in result.stderr
    assert "--insecure" in result.stderr


async def test_insecure_serves_beyond_loopback_and_warns_at_every_start(tmp_path: Path) -> None:
    port = free_port()
    for start in range(2):
        async with spawn_server(tmp_path, "--listen", f"0.0.0.0:{port}", "--insecure", port=port) as served:
            session = pb.SessionRef(project_id="p-insecure", session_id=f"s{start}")
            await admit(served.client, session, f"t{start}")
            served.terminate()
            assert await served.exit_code() == 0
        log = await asyncio.to_thread((tmp_path / f"serve-{port}.log").read_text)
        assert "INSECURE: listening on 0.0.0.0" in log, f"start {start} did not warn"
