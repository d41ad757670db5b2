"""`turngate watch` against a real server: events printed as they happen, one a line, as text or
JSON, until the command is interrupted, which ends it quietly with exit code 0; a service that
cannot be reached fails it at once, one that restarts while it watches does not."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from tests.cli.conftest import Turngate
from tests.support.processes import free_port, spawn_server
from turngate.client import Client
from turngate.v1 import turngate_pb2 as pb


async def test_watch_json_prints_each_event_as_it_happens_until_terminated(
    turngate: Turngate, client: Client
) -> None:
    watching = await turngate.start("watch", "chat", "--json")
    snapshot = json.loads(await watching.line())
    assert (snapshot["seq"], snapshot["snapshot"]["phase"]) == ("0", "SESSION_PHASE_IDLE")

    async with client.runner("r1").turn("chat", "t1") as turn:
        admitted = json.loads(await watching.line())
        assert (admitted["seq"], admitted["turnAdmitted"]["turn"]["turnId"]) == ("1", "t1")
        async with turn.tool_call("call-1", "search"):
            opened = json.loads(await watching.line())
            assert (opened["seq"], opened["toolCall"]["toolCall"]["status"]) == ("2", "TOOL_CALL_STATUS_OPEN")
    closed, settled = json.loads(await watching.line()), json.loads(await watching.line())
    assert closed["toolCall"]["toolCall"]["status"] == "TOOL_CALL_STATUS_SUCCEEDED"
    assert settled["turnSettled"]["turn"]["outcome"] == "TURN_OUTCOME_COMPLETED"

    ended = await watching.interrupt(signal.SIGTERM)
    assert (ended.code, ended.out, ended.err) == (0, "", "")


async def test_watch_resumes_after_a_seq_and_keeps_one_turn_then_ctrl_c_exits_0(
    turngate: Turngate, client: Client
) -> None:
    for turn_id in ("t1", "t2"):
        async with client.runner("r1").turn("chat", turn_id) as turn, turn.tool_call("call-1", "search"):
            pass

    watching = await turngate.start("watch", "chat", "--after", "1", "--turn", "t2")
    lines = [await watching.line() for _ in range(4)]
    ended = await watching.interrupt(signal.SIGINT)

    assert [(line.split()[0], line.split()[2]) for line in lines] == [
        ("5", "turn_admitted"),
        ("6", "tool_call"),
        ("7", "tool_call"),
        ("8", "turn_settled"),
    ]
    assert lines[1].endswith("tool_call       turn=t2 call=call-1 name=search status=OPEN")
    assert lines[3].endswith("turn_settled    turn=t2 outcome=COMPLETED settled_by=RUNNER")
    assert (ended.code, ended.out, ended.err) == (0, "", "")


async def test_watch_fails_at_once_when_nothing_listens_even_with_a_long_retry_budget(
    turngate: Turngate,
) -> None:
    """The first read is not retried: with --timeout 60 (a minute of retries for any other read)
    the command still ends well within PROCESS_TIMEOUT_S, with exit code 1 and one line."""
    down = f"127.0.0.1:{free_port()}"
    ran = await turngate.run("watch", "chat", "--target", down, "--timeout", "60")
    assert (ran.code, ran.out, len(ran.err.splitlines())) == (1, "", 1)
    assert ran.err.startswith(f"turngate: {down} unavailable (UNAVAILABLE): ")


async def test_watch_once_connected_rides_out_a_restart_of_the_service(tmp_path: Path) -> None:
    """Events written while the service restarts are printed once it is back, none lost or repeated."""
    port = free_port()
    session = pb.SessionRef(project_id="p-restart", session_id="chat")
    command = Turngate(f"127.0.0.1:{port}", session.project_id)
    try:
        async with spawn_server(tmp_path, port=port) as first:
            watching = await command.start("watch", session.session_id)
            lines = [await watching.line()]
            admitted = await first.client.admission.AdmitTurn(
                pb.AdmitTurnRequest(session=session, turn_id="t1", runner_id="r1")
            )
            lines.append(await watching.line())
            first.terminate()
            assert await first.exit_code() == 0
        async with spawn_server(tmp_path, port=port) as second:
            await second.client.admission.CompleteTurn(
                pb.CompleteTurnRequest(lease=admitted.lease, outcome=pb.TURN_OUTCOME_COMPLETED)
            )
            lines.append(await watching.line())
            ended = await watching.interrupt(signal.SIGTERM)
    finally:
        await command.kill_leftovers()
    assert [(line.split()[0], line.split()[2]) for line in lines] == [
        ("0", "snapshot"),
        ("1", "turn_admitted"),
        ("2", "turn_settled"),
    ]
    assert (ended.code, ended.out) == (0, "")
