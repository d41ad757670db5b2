"""examples/tour.py, the scripted tour, runs as printed against a real server."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from turngate.service.server import TurngateServer

TOUR = Path(__file__).resolve().parents[2] / "examples" / "tour.py"


async def test_readme_tour_shows_busy_refusal_guarded_stop_interrupted_call_and_a_paused_queue(
    server: TurngateServer, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = importlib.util.spec_from_file_location("tour", TOUR)
    assert spec is not None
    assert spec.loader is not None
    tour = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tour)

    await tour.tour(f"127.0.0.1:{server.port}")

    printed = capsys.readouterr().out
    for line in (
        "ABORTED SESSION_TURN_IN_USE active=turn-1",
        "cancelled: stopping=turn-1",
        "stop_requested reason='user'",
        "outcome=TURN_OUTCOME_CANCELLED by=SETTLED_BY_RUNNER",
        "mismatch: current=turn-2",
        "call-1 TOOL_CALL_STATUS_INTERRUPTED",
        "[watch] seq=5 turn_settled",
        "turn-4 waits at position 1",
        "turn-5 waits at position 2",
        "queue_paused_by=turn-3 queue=['turn-4', 'turn-5']",
        "resumed: admitted=turn-4",
        "turn-4 runs, admitted from the queue",
        "turn-5 runs, admitted from the queue",
    ):
        assert line in printed
