"""What a process exports comes from the OTEL_* variables and --metrics-listen alone: nothing
without them; traces and metrics by OTLP over gRPC with an endpoint; Prometheus text on request."""

from __future__ import annotations

import asyncio
import os
import socket
import urllib.request
from pathlib import Path

import pytest

from tests.support.calls import admit, complete
from tests.support.collector import collecting
from tests.support.processes import free_port, run_cli, spawn_server
from tests.support.waiting import eventually
from turngate.client import __version__
from turngate.service.config import Settings
from turngate.service.telemetry.setup import exporting
from turngate.v1 import turngate_pb2 as pb

SESSION = pb.SessionRef(project_id="p-telemetry", session_id="s-exported")


@pytest.fixture(autouse=True)
def _no_otel_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in os.environ:
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)


def test_without_otel_variables_nothing_is_exported() -> None:
    chosen = exporting(Settings())
    assert (chosen.tracer_provider, chosen.meter_provider, chosen.prometheus) == (None, None, None)


def test_an_otlp_endpoint_exports_traces_and_metrics_unless_the_sdk_or_a_signal_is_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
    chosen = exporting(Settings())
    assert chosen.tracer_provider is not None
    assert chosen.meter_provider is not None
    chosen.shutdown()

    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    chosen = exporting(Settings())
    assert chosen.tracer_provider is None
    assert chosen.meter_provider is not None
    chosen.shutdown()

    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    chosen = exporting(Settings(metrics_listen="127.0.0.1:0"))
    assert (chosen.tracer_provider, chosen.meter_provider, chosen.prometheus) == (None, None, None)


async def test_serve_exports_by_otlp_over_grpc_as_service_turngate_at_its_version(tmp_path: Path) -> None:
    async with collecting() as collector:
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.port}",
            "OTEL_BSP_SCHEDULE_DELAY": "50",
            "OTEL_METRIC_EXPORT_INTERVAL": "200",
        }
        async with spawn_server(tmp_path, env=env) as served:
            await complete(served.client, (await admit(served.client, SESSION)).lease)
            exported = {
                "turngate.v1.AdmissionService/AdmitTurn",
                "turngate.store.apply",
                "turngate.decide",
                "turngate.admissions",
                "turngate.settlements",
                "rpc.server.call.duration",
                "turngate.build.info",
            }
            await eventually(lambda: exported <= collector.names("turngate"))
        assert collector.versions("turngate") == {__version__}


async def test_serve_with_metrics_listen_serves_prometheus_text(tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"
    async with spawn_server(tmp_path, "--metrics-listen", address) as served:
        await admit(served.client, SESSION)

        async def one_turn_active() -> bool:
            return "turngate_turns_active 1.0" in _samples(await asyncio.to_thread(_scrape, address))

        await eventually(one_turn_active)
        samples = _samples(await asyncio.to_thread(_scrape, address))
    assert 'turngate_admissions_total{turngate_result="admitted"} 1.0' in samples


def _scrape(address: str) -> str:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        return str(response.read().decode())


def _samples(text: str) -> set[str]:
    """The lines of Prometheus text (no sample carries scope labels)."""
    return set(text.splitlines())


def test_a_bad_metrics_address_refuses_to_start_and_a_taken_one_exits_1(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "serve", "--metrics-listen", "9464")
    assert result.returncode == 2
    assert "--metrics-listen or TURNGATE_METRICS_LISTEN='9464'" in result.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        result = run_cli(
            tmp_path, "serve", "--listen", f"127.0.0.1:{free_port()}", "--metrics-listen", address
        )
    assert result.returncode == 1
    assert f"turngate: cannot serve metrics on {address}" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_empty_turngate_metrics_listen_turns_the_metrics_listener_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TURNGATE_METRICS_LISTEN", "")
    assert Settings().metrics_listen is None
