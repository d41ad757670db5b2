"""A real server's background loops never die silently: one that fails unexpectedly is restarted
and logged by name, turns readiness NOT_SERVING once it has been failing longer than
TURNGATE_LOOP_FAILURE_GRACE, until it runs again; and the server still stops cleanly, cancelling
loops whether they run or wait to restart."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.calls import admit, snapshot
from tests.support.loops import AT_ONCE, BreakableSweeps, server_restarting
from tests.support.processes import SERVICES, SERVING, health_of, wait_for_health
from tests.support.servers import settings_for
from tests.support.waiting import eventually
from turngate.service.server import TurngateServer
from turngate.service.supervise import Backoff
from turngate.v1 import turngate_pb2 as pb

NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
# Waits after a failure longer than any test runs.
NEVER = Backoff(first=3600.0, cap=3600.0, stable_after=3600.0)
# The loops a SQLite server runs until it stops (its schema's ends once it is migrated).
LOOPS = {"watchdog", "retirement", "health"}


async def test_a_loop_failing_longer_than_the_grace_makes_readiness_not_serving_naming_it_until_it_runs_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, session: pb.SessionRef
) -> None:
    sweeps = BreakableSweeps(monkeypatch)
    async with server_restarting(str(tmp_path), AT_ONCE, loop_failure_grace=0.0) as (server, client):
        health = health_pb2_grpc.HealthStub(client.channel)
        await wait_for_health(health, SERVING)

        with caplog.at_level(logging.INFO, logger="turngate.loops"):
            sweeps.broken = True
            # A deadline wakes the watchdog: its sweep fails, again after each restart.
            await admit(client, session, "t1", lease_ttl=1.0)
            for service in ("", *SERVICES):
                await wait_for_health(health, NOT_SERVING, service)
            assert await health_of(health, "liveness") == SERVING
            named = [r.getMessage() for r in caplog.records if "'watchdog'" in r.getMessage()]
            assert any("has been failing for" in message for message in named), named
            await eventually(lambda: server.supervisor.restarts()["watchdog"] >= 1)
            await snapshot(client, session)  # calls are still served meanwhile

            sweeps.broken = False
            for service in ("", *SERVICES):
                await wait_for_health(health, SERVING, service)
            assert any("'watchdog' runs again after" in r.getMessage() for r in caplog.records)


async def test_stopping_the_server_cancels_loops_running_and_waiting_to_restart_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    sweeps = BreakableSweeps(monkeypatch)
    sweeps.broken = True
    server = TurngateServer(settings_for(str(tmp_path)))
    server.supervisor.backoff = NEVER
    others = asyncio.all_tasks()  # other servers of the test session run loops of the same names
    await server.start()
    try:
        await eventually(lambda: sweeps.failed > 0)  # it sweeps at once, fails, and waits to restart
        loops = {task for task in asyncio.all_tasks() - others if task.get_name() in LOOPS}
        assert {task.get_name() for task in loops} == LOOPS
    finally:
        caplog.clear()
        await server.stop()

    assert all(task.done() for task in loops)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
