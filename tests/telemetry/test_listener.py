"""The metrics listener of `turngate serve --metrics-listen`: RPC durations by the OpenTelemetry
RPC conventions, build info, process metrics and no empty scope labels at `/metrics`; `/healthz`
and `/readyz` (and the `turngate_ready` gauge) answering the gRPC health service's liveness and
readiness; 404 elsewhere. And a
refusal or a bad request is logged at debug with its reason, not with what the caller sent."""

from __future__ import annotations

import asyncio
import logging
import re
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from prometheus_client import CollectorRegistry

from tests.support.calls import admit, complete, refused
from tests.support.processes import Spawned, free_port, spawn_server
from tests.support.servers import Client, OwnServer
from tests.support.waiting import eventually
from turngate.client import __version__
from turngate.service.config import Settings
from turngate.service.server import TurngateServer, metrics_served
from turngate.service.telemetry import probes
from turngate.v1 import turngate_pb2 as pb

SESSION = pb.SessionRef(project_id="p-telemetry", session_id="s-listened")


def get(address: str, path: str) -> tuple[int, str]:
    """The status and body of GET http://address/path."""
    try:
        with urllib.request.urlopen(f"http://{address}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def metric_names(exposition: str) -> set[str]:
    """The names of the samples in Prometheus text."""
    return set(re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]", exposition, re.MULTILINE))


@pytest.fixture(scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[str, Spawned]]:
    """A `turngate serve` with a metrics listener (its address), after one turn and one refusal."""
    address = f"127.0.0.1:{free_port()}"
    tmp = tmp_path_factory.mktemp("listened")
    async with spawn_server(tmp, "--metrics-listen", address) as spawned:
        await complete(spawned.client, (await admit(spawned.client, SESSION)).lease)
        await admit(spawned.client, SESSION, "t2")
        await refused(admit(spawned.client, SESSION, "t3"))
        yield address, spawned


async def scraped(address: str) -> str:
    status, text = await asyncio.to_thread(get, address, "/metrics")
    assert status == 200
    return text


async def test_rpc_server_call_duration_is_a_histogram_by_service_method_and_status_code(
    served: tuple[str, Spawned],
) -> None:
    text = await scraped(served[0])
    assert "# TYPE rpc_server_call_duration_seconds histogram" in text
    counts = re.findall(r"^rpc_server_call_duration_seconds_count\{([^}]*)\} (\S+)", text, re.MULTILINE)
    by_labels = {frozenset(re.findall(r'(\w+)="([^"]*)"', labels)): float(value) for labels, value in counts}
    admitted = {
        ("rpc_system", "grpc"),
        ("rpc_service", "turngate.v1.AdmissionService"),
        ("rpc_method", "AdmitTurn"),
    }
    assert by_labels[frozenset({*admitted, ("rpc_grpc_status_code", "0")})] == 2
    assert (
        by_labels[frozenset({*admitted, ("rpc_grpc_status_code", str(grpc.StatusCode.ABORTED.value[0]))})]
        == 1
    )
    assert not [labels for labels in by_labels if ("rpc_service", "grpc.health.v1.Health") in labels]


async def test_build_info_is_1_with_the_version_and_the_store_kind(served: tuple[str, Spawned]) -> None:
    text = await scraped(served[0])
    [line] = [line for line in text.splitlines() if line.startswith("turngate_build_info{")]
    assert f'turngate_version="{__version__}"' in line
    assert 'turngate_store="sqlite+aiosqlite"' in line
    assert line.endswith(" 1.0")


async def test_process_metrics_are_exposed(served: tuple[str, Spawned]) -> None:
    names = metric_names(await scraped(served[0]))
    assert {
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_start_time_seconds",
    } <= names


async def test_no_sample_carries_otel_scope_labels(served: tuple[str, Spawned]) -> None:
    text = await scraped(served[0])
    assert "turngate_admissions_total" in text
    assert "otel_scope_" not in text


async def test_healthz_and_readyz_answer_200_while_serving_and_other_paths_404(
    served: tuple[str, Spawned],
) -> None:
    address = served[0]
    assert await asyncio.to_thread(get, address, "/healthz") == (200, "live\n")
    assert await asyncio.to_thread(get, address, "/readyz") == (200, "ready\n")
    for path in ("/", "/metrics/x", "/favicon.ico", "/health"):
        assert (await asyncio.to_thread(get, address, path))[0] == 404
    assert "turngate_ready 1.0" in (await scraped(address)).splitlines()


async def test_readyz_answers_503_while_draining_and_healthz_still_200(tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"
    env = {"TURNGATE_DRAIN_DELAY": "5"}
    async with spawn_server(tmp_path, "--metrics-listen", address, env=env) as spawned:
        assert (await asyncio.to_thread(get, address, "/readyz"))[0] == 200
        spawned.terminate()

        async def not_ready() -> bool:
            return (await asyncio.to_thread(get, address, "/readyz")) == (503, "not ready\n")

        await eventually(not_ready)
        assert await asyncio.to_thread(get, address, "/healthz") == (200, "live\n")
        assert "turngate_ready 0.0" in (await scraped(address)).splitlines()


async def test_readyz_answers_503_until_a_server_follows_then_what_its_health_says(
    own_server: OwnServer,
) -> None:
    probes.forget()
    address = f"127.0.0.1:{free_port()}"
    try:
        async with metrics_served(Settings(metrics_listen=address), CollectorRegistry()):
            assert await asyncio.to_thread(get, address, "/readyz") == (503, "not ready\n")
            assert (await asyncio.to_thread(get, address, "/healthz"))[0] == 200
            async with own_server():

                async def ready() -> bool:
                    return await asyncio.to_thread(get, address, "/readyz") == (200, "ready\n")

                # Readiness waits for the first store probe.
                await eventually(ready)
            # Stopped: drained, so no longer ready.
            assert await asyncio.to_thread(get, address, "/readyz") == (503, "not ready\n")
    finally:
        probes.forget()


async def test_a_refusal_and_a_bad_request_are_logged_at_debug_by_reason_only(
    traced: tuple[TurngateServer, Client], session: pb.SessionRef, caplog: pytest.LogCaptureFixture
) -> None:
    _, client = traced
    caplog.set_level(logging.DEBUG, logger="turngate.api")
    await admit(client, session, "t1")
    await refused(admit(client, session, "t2"))
    secret = "x" * 300
    assert (await refused(admit(client, session, secret))).code == grpc.StatusCode.INVALID_ARGUMENT
    lines = [record.getMessage() for record in caplog.records if record.name == "turngate.api"]
    assert "refused: SESSION_TURN_IN_USE" in lines
    assert any(line.startswith("bad request: invalid ") and "turn_id" in line for line in lines)
    assert all(record.levelno == logging.DEBUG for record in caplog.records if record.name == "turngate.api")
    assert not [line for line in lines if secret in line]
