"""`turngate health`: prints the server's gRPC health status and exits 0 only on SERVING; with
no target given it asks the server this host runs at TURNGATE_LISTEN (a container's HEALTHCHECK)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.cli.conftest import Ran, Turngate
from tests.support.processes import PROCESS_TIMEOUT_S, TURNGATE, cli_env, free_port
from tests.support.servers import running, settings_for
from tests.support.waiting import eventually
from turngate.service.ports.store import StoreUnavailable
from turngate.service.server import TurngateServer


async def health(*args: str, **env: str) -> Ran:
    """`turngate health *args` with only the TURNGATE_* variables in `env`."""
    process = await asyncio.create_subprocess_exec(
        TURNGATE,
        "health",
        *args,
        env=cli_env(**env),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(PROCESS_TIMEOUT_S):
        out, err = await process.communicate()
    assert process.returncode is not None
    return Ran(process.returncode, out.decode(), err.decode())


async def test_health_prints_serving_and_exits_0(turngate: Turngate) -> None:
    ran = await turngate.run("health")
    assert (ran.code, ran.out, ran.err) == (0, "SERVING\n", "")


@pytest.mark.parametrize("service", ["liveness", "turngate.v1.AdmissionService"])
async def test_health_of_one_service(turngate: Turngate, service: str) -> None:
    ran = await turngate.run("health", "--service", service)
    assert (ran.code, ran.out) == (0, "SERVING\n")


async def test_health_of_an_unknown_service_is_service_unknown_and_exits_1(turngate: Turngate) -> None:
    ran = await turngate.run("health", "--service", "nope")
    assert (ran.code, ran.out) == (1, "SERVICE_UNKNOWN\n")


async def test_health_without_a_target_asks_the_server_at_turngate_listen(cli_server: TurngateServer) -> None:
    ran = await health(TURNGATE_LISTEN=f"0.0.0.0:{cli_server.port}")
    assert (ran.code, ran.out) == (0, "SERVING\n")


async def test_health_exits_1_with_one_line_when_nothing_answers() -> None:
    target = f"127.0.0.1:{free_port()}"
    ran = await health("--target", target, "--timeout", "1")
    assert (ran.code, ran.out) == (1, "")
    assert ran.err.startswith(f"turngate: {target} unavailable (")
    assert len(ran.err.splitlines()) == 1


async def test_health_is_not_serving_and_exits_1_while_the_store_does_not_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def down() -> None:
        raise StoreUnavailable("the test took the store away")

    async for server, _ in running(settings_for(str(tmp_path))):
        target = f"127.0.0.1:{server.port}"
        monkeypatch.setattr(server.store, "ping", down)

        async def not_serving(target: str = target) -> bool:
            ran = await health("--target", target)
            return (ran.code, ran.out) == (1, "NOT_SERVING\n")

        await eventually(not_serving, timeout_s=PROCESS_TIMEOUT_S)
        liveness = await health("--target", target, "--service", "liveness")
        assert (liveness.code, liveness.out) == (0, "SERVING\n")
