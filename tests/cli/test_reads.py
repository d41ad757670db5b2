"""`turngate status`, `turn show`, `turn list`, `sessions busy`, `sessions list` and `sessions
projects` against a real server, as text and as --json."""

from __future__ import annotations

import asyncio
import json
from contextlib import AsyncExitStack
from datetime import datetime

import pytest

from tests.cli.conftest import Turngate
from tests.cli.output import fields, seconds, sections
from tests.support.waiting import eventually
from turngate.client import Client, Turn


async def test_status_shows_the_stopping_turn_its_lease_and_stop_and_the_last_settled_turn(
    turngate: Turngate, client: Client
) -> None:
    runner = client.runner("r1")
    async with runner.turn("chat", "t1"):
        pass
    async with runner.turn("chat", "t2") as turn:
        await client.gateway().stop("chat", expected_turn_id="t2", reason="ops")
        await turn.stop_requested.wait()
        text, as_json = await asyncio.gather(
            turngate.run("status", "chat"), turngate.run("status", "chat", "--json")
        )

    assert (text.code, text.err) == (0, "")
    shown = sections(text.out)
    assert shown[""]["phase"] == "STOPPING"
    active, last = shown["active turn"], shown["last settled turn"]
    assert (active["turn"], active["phase"], active["runner"], active["stop reason"]) == (
        "t2",
        "STOPPING",
        "r1",
        "ops",
    )
    assert 0 < seconds(active["lease expires in"]) <= 20
    assert 25 < seconds(active["stop deadline in"]) <= 30
    assert (last["turn"], last["outcome"], last["settled by"]) == ("t1", "COMPLETED", "RUNNER")

    assert as_json.code == 0
    [snapshot] = as_json.objects()
    assert snapshot["phase"] == "SESSION_PHASE_STOPPING"
    assert snapshot["active"]["turnId"] == "t2"
    assert snapshot["active"]["stopReason"] == "ops"
    assert snapshot["active"]["generation"] == str(turn.generation)
    assert (snapshot["lastSettled"]["turnId"], snapshot["lastSettled"]["outcome"]) == (
        "t1",
        "TURN_OUTCOME_COMPLETED",
    )


async def test_status_of_a_session_never_seen_is_idle_and_says_it_was_never_seen(turngate: Turngate) -> None:
    ran = await turngate.run("status", "new-session")
    assert (ran.code, ran.err) == (0, "")
    never_seen = f"never seen: no event of new-session in project {turngate.project}"
    assert sections(ran.out) == {"": {"session": "new-session", "phase": "IDLE", "seq": "0"}, never_seen: {}}


async def test_status_json_shows_every_field_an_idle_session_has_no_active_or_settled_turn_as_null(
    turngate: Turngate,
) -> None:
    ran = await turngate.run("status", "new-session", "--json")
    assert (ran.code, ran.err) == (0, "")
    [snapshot] = ran.objects()
    assert {key: snapshot[key] for key in ("seq", "phase", "active", "lastSettled", "queue")} == {
        "seq": "0",
        "phase": "SESSION_PHASE_IDLE",
        "active": None,
        "lastSettled": None,
        "queue": [],
    }


async def search_until_cancelled(turn: Turn, opened: asyncio.Event) -> None:
    async with turn.tool_call("call-3", "browse"):
        opened.set()
        await asyncio.sleep(3600)


async def test_turn_show_lists_tool_calls_and_interactions_and_turn_list_the_turns(
    turngate: Turngate, client: Client
) -> None:
    async with client.runner("r1").turn("chat", "t1") as turn:
        async with turn.tool_call("call-1", "search"):
            pass
        with pytest.raises(ValueError, match="no route"):
            async with turn.tool_call("call-2", "fetch"):
                raise ValueError("no route to host")
        answer = asyncio.create_task(turn.interaction("ask-1", "approval"))

        async def asked() -> bool:
            return bool((await client.get_turn("chat", "t1")).interactions)

        await eventually(asked)
        await client.gateway().resolve_interaction("chat", "ask-1", "approved")
        assert await answer == "approved"
        opened = asyncio.Event()
        tool = asyncio.create_task(search_until_cancelled(turn, opened))
        await opened.wait()
        await client.gateway().stop("chat", expected_turn_id="t1")
        await turn.stop_requested.wait()
        tool.cancel()
    async with client.runner("r1").turn("chat", "t2"):
        pass

    text, as_json, listed = await asyncio.gather(
        turngate.run("turn", "show", "t1", "--session", "chat"),
        turngate.run("turn", "show", "t1", "--session", "chat", "--json"),
        turngate.run("turn", "list", "chat", "--json"),
    )

    assert (text.code, text.err) == (0, "")
    record, calls, interactions = text.out.split("\n\n")
    assert (fields(record)["outcome"], fields(record)["settled by"]) == ("CANCELLED", "RUNNER")
    header, *rows = [line.split() for line in calls.splitlines()]
    assert header[:3] == ["CALL", "NAME", "STATUS"]
    assert [row[:3] for row in rows] == [
        ["call-1", "search", "SUCCEEDED"],
        ["call-2", "fetch", "FAILED"],
        ["call-3", "browse", "INTERRUPTED"],
    ]
    assert "ValueError: no route to host" in calls.splitlines()[2]
    header, row = [line.split() for line in interactions.splitlines()]
    assert (header[:3], row[:3], row[-1]) == (
        ["INTERACTION", "KIND", "STATUS"],
        ["ask-1", "approval", "RESOLVED"],
        "approved",
    )

    [whole] = as_json.objects()
    assert [(call["callId"], call["status"]) for call in whole["toolCalls"]] == [
        ("call-1", "TOOL_CALL_STATUS_SUCCEEDED"),
        ("call-2", "TOOL_CALL_STATUS_FAILED"),
        ("call-3", "TOOL_CALL_STATUS_INTERRUPTED"),
    ]
    assert whole["interactions"][0]["resolution"] == "approved"

    assert listed.code == 0
    assert [(item["turnId"], item["outcome"]) for item in listed.objects()] == [
        ("t2", "TURN_OUTCOME_COMPLETED"),
        ("t1", "TURN_OUTCOME_CANCELLED"),
    ]


async def test_turn_show_of_a_turn_never_admitted_exits_5_with_one_line(turngate: Turngate) -> None:
    ran = await turngate.run("turn", "show", "nope", "--session", "chat")
    assert (ran.code, ran.out) == (5, "")
    assert ran.err == "turngate: turn nope was never admitted in this session\n"


async def test_sessions_busy_lists_the_active_sessions_earliest_lease_first(
    turngate: Turngate, client: Client
) -> None:
    async with AsyncExitStack() as turns:
        await turns.enter_async_context(client.runner("r1").turn("late", "t1", lease_ttl=60))
        await turns.enter_async_context(client.runner("r2").turn("soon", "t2", lease_ttl=30))
        async with client.runner("r3").turn("done", "t3"):
            pass
        text, as_json = await asyncio.gather(
            turngate.run("sessions", "busy"), turngate.run("sessions", "busy", "--json")
        )

    assert (text.code, text.err) == (0, "")
    header, *rows = [line.split() for line in text.lines]
    assert header[:4] == ["SESSION", "TURN", "PHASE", "RUNNER"]
    assert [row[:4] for row in rows] == [["soon", "t2", "RUNNING", "r2"], ["late", "t1", "RUNNING", "r1"]]
    assert 20 < seconds(rows[0][-1]) <= 30 < seconds(rows[1][-1]) <= 60  # LEASE EXPIRES IN
    assert as_json.code == 0
    assert [(s["session"]["sessionId"], s["active"]["turnId"]) for s in as_json.objects()] == [
        ("soon", "t2"),
        ("late", "t1"),
    ]


async def test_sessions_busy_in_a_project_without_active_turns_says_so(turngate: Turngate) -> None:
    text, as_json = await asyncio.gather(
        turngate.run("sessions", "busy"), turngate.run("sessions", "busy", "--json")
    )
    assert (text.code, text.lines) == (0, [f"no session of project {turngate.project} has an active turn"])
    assert (as_json.code, as_json.out) == (0, "")


async def test_sessions_list_shows_the_projects_sessions_busy_or_idle_the_most_recently_active_first(
    turngate: Turngate, client: Client
) -> None:
    async with client.runner("r1").turn("old", "t1"):
        pass
    with pytest.raises(RuntimeError):
        async with client.runner("r1").turn("failed", "t1"):
            raise RuntimeError("boom")
    async with AsyncExitStack() as turns:
        await turns.enter_async_context(client.runner("r2").turn("busy", "t2"))
        text, as_json, limited = await asyncio.gather(
            turngate.run("sessions", "list"),
            turngate.run("sessions", "list", "--json"),
            turngate.run("sessions", "list", "--limit", "2"),
        )

    assert (text.code, text.err) == (0, "")
    header, *rows = [line.split() for line in text.lines]
    assert header == ["SESSION", "LAST", "ACTIVE", "PHASE", "ACTIVE", "LAST", "SETTLED", "OUTCOME"]
    assert [(row[0], row[2], row[3]) for row in rows] == [
        ("busy", "RUNNING", "t2"),
        ("failed", "IDLE", "-"),
        ("old", "IDLE", "-"),
    ]
    assert [row[-2:] for row in rows] == [["-", "-"], ["t1", "FAILED"], ["t1", "COMPLETED"]]
    assert as_json.code == 0
    listed = as_json.objects()
    assert [s["snapshot"]["session"]["sessionId"] for s in listed] == ["busy", "failed", "old"]
    assert [s["snapshot"]["phase"] for s in listed] == [
        "SESSION_PHASE_RUNNING",
        "SESSION_PHASE_IDLE",
        "SESSION_PHASE_IDLE",
    ]
    assert listed[0]["snapshot"]["lastSettled"] is None
    times = [datetime.fromisoformat(s["lastActivityAt"]) for s in listed]
    assert times == sorted(times, reverse=True)
    assert [row[1] for row in rows] == [f"{at.isoformat(timespec='milliseconds')[:-6]}Z" for at in times]
    assert [line.split()[0] for line in limited.lines] == ["SESSION", "busy", "failed"]


async def test_sessions_list_of_a_project_without_sessions_says_so(turngate: Turngate) -> None:
    text, as_json = await asyncio.gather(
        turngate.run("sessions", "list"), turngate.run("sessions", "list", "--json")
    )
    assert (text.code, text.lines) == (0, [f"no session of project {turngate.project} was recorded"])
    assert (as_json.code, as_json.out) == (0, "")


async def test_sessions_projects_lists_the_projects_that_have_sessions_in_id_order(
    turngate: Turngate, client: Client
) -> None:
    async with client.runner("r1").turn("s1", "t1"):
        pass
    text, as_json = await asyncio.gather(
        turngate.run("sessions", "projects", "--limit", "500"),
        turngate.run("sessions", "projects", "--limit", "500", "--json"),
    )

    assert (text.code, text.err) == (0, "")
    header, *rows = [line.split() for line in text.lines]
    assert header == ["PROJECT", "LAST", "ACTIVE"]
    projects = [row[0] for row in rows]
    assert turngate.project in projects
    assert projects == sorted(projects)
    assert as_json.code == 0
    assert [p["projectId"] for p in as_json.objects()] == projects


async def test_texts_from_runners_and_gateways_reach_the_terminal_escaped(
    turngate: Turngate, client: Client
) -> None:
    hostile = "\x1b[2J\x1b]0;pwned\x07 \u202eevil \x9b31m"
    async with client.runner("r1").turn("chat-escapes", "t1") as turn:
        await client.gateway().stop("chat-escapes", expected_turn_id="t1", reason=hostile)
        await turn.stop_requested.wait()
        text, as_json = await asyncio.gather(
            turngate.run("status", "chat-escapes"), turngate.run("status", "chat-escapes", "--json")
        )
    for ran in (text, as_json):
        assert ran.code == 0
        assert not any(c in ran.out for c in "\x1b\x07\u202e\x9b"), "a control character reached the terminal"
    assert (
        sections(text.out)["active turn"]["stop reason"]
        == r"\u001b[2J\u001b]0;pwned\u0007 \u202eevil \u009b31m"
    )
    assert json.loads(as_json.out)["active"]["stopReason"] == hostile, "--json escapes, as JSON does"
