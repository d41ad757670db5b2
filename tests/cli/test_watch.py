"""`turngate watch` against a real server: events printed as they happen, one a line, as text or
JSON, until the command is interrupted, which ends it quietly with exit code 0."""

from __future__ import annotations

import json
import signal

from tests.cli.conftest import Turngate
from turngate.client import Client


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
