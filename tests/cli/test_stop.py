"""`turngate stop` against a real server: what the Stop did, by exit code and output (0 when
something was cancelled, 3 for a mismatch, 4 when idle), and `--wait`, which forces a turn its
runner does not end."""

from __future__ import annotations

import asyncio
import signal

import pytest

from tests.cli.conftest import Turngate
from tests.support.seams import reply_lost
from turngate.client import Client, SessionPhase
from turngate.service.core import Command, Decision, SessionKey
from turngate.service.ports.store import StoreUnavailable
from turngate.service.server import TurngateServer


async def test_stop_cancels_the_expected_turn_then_answers_mismatch_then_idle(
    turngate: Turngate, client: Client
) -> None:
    async with client.runner("r1").turn("chat", "t1") as turn:
        stopped = await turngate.run(
            "stop", "chat", "--expect", "t1", "--reason", "ops", "--request-id", "req-1", "--json"
        )
        await turn.stop_requested.wait()
    assert (stopped.code, stopped.err) == (0, "")
    [answer] = stopped.objects()
    assert answer["cancelled"]["stoppingTurnId"] == "t1"
    assert answer["cancelled"]["cancelledTurnIds"] == ["t1"]
    assert turn.stop_reason == "ops"

    async with client.runner("r1").turn("chat", "t2") as later:
        late, retried = await asyncio.gather(
            turngate.run("stop", "chat", "--expect", "t1"),
            turngate.run("stop", "chat", "--expect", "t1", "--request-id", "req-1"),
        )
        assert not later.stop_requested.is_set()
        forced = await turngate.run("stop", "chat", "--force")
        await later.abandoned.wait()
    assert (late.code, late.err) == (3, "")
    assert late.lines == ["mismatch  expected=t1 expected_outcome=CANCELLED current=t2 current_phase=RUNNING"]
    assert (retried.code, retried.lines[0].split()[:3]) == (0, ["cancelled", "turns=t1", "stopping=t1"])
    assert (forced.code, forced.lines) == (0, ["cancelled  turns=t2 settled=yes"])

    idle = await turngate.run("stop", "chat", "--json")
    assert (idle.code, idle.err) == (4, "")
    [nothing] = idle.objects()
    assert nothing["idle"] == {
        "expectedTurnId": "",
        "expectedOutcome": "TURN_OUTCOME_UNSPECIFIED",
        "lastTurnId": "t2",
        "lastOutcome": "TURN_OUTCOME_CANCELLED",
    }


async def test_a_stop_of_a_session_never_seen_says_so_with_the_project_it_looked_in(
    turngate: Turngate,
) -> None:
    unknown = await turngate.run("stop", "no-such-chat")
    assert (unknown.code, unknown.err) == (4, "")
    project = unknown.lines[-1].rsplit(" ", 1)[-1]
    assert unknown.lines == ["idle", f"never seen: no event of no-such-chat in project {project}"]


async def test_a_stop_of_a_session_that_ran_turns_says_nothing_of_never_seen(
    turngate: Turngate, client: Client
) -> None:
    async with client.runner("r1").turn("ran", "t1"):
        pass
    idle = await turngate.run("stop", "ran")
    assert (idle.code, idle.lines) == (4, ["idle  last=t1 last_outcome=COMPLETED"])


async def test_stop_wait_forces_a_turn_its_runner_does_not_end_and_prints_its_settlement(
    turngate: Turngate, client: Client
) -> None:
    async with client.runner("r1").turn("chat", "t1") as turn:  # it never looks at stop_requested
        ran = await turngate.run("stop", "chat", "--wait", "0.2", "--json")
        await turn.abandoned.wait()
    assert ran.code == 0
    answer, settled = ran.objects()
    assert answer["cancelled"]["stoppingTurnId"] == "t1"
    assert (settled["turnId"], settled["outcome"], settled["settledBy"]) == (
        "t1",
        "TURN_OUTCOME_CANCELLED",
        "SETTLED_BY_GATEWAY",
    )
    assert ran.err == "turngate: turn t1 did not settle within 0.2s of its Stop: forcing\n"


async def test_stop_wait_returns_as_soon_as_the_runner_settles(turngate: Turngate, client: Client) -> None:
    async def honour_stop() -> None:
        async with client.runner("r1").turn("chat", "t1") as turn:
            admitted.set()
            await turn.stop_requested.wait()

    admitted = asyncio.Event()
    runner = asyncio.create_task(honour_stop())
    await admitted.wait()
    ran = await turngate.run("stop", "chat", "--expect", "t1", "--wait", "30")
    await runner
    assert (ran.code, ran.err) == (0, "")
    answer, settled = ran.lines
    assert answer.startswith("cancelled  turns=t1 stopping=t1 stop_deadline_in=")
    assert settled.startswith("settled  turn=t1 outcome=CANCELLED settled_by=RUNNER settled_at=")


async def test_stop_wait_interrupted_exits_130_and_leaves_the_turn_stopping(
    turngate: Turngate, client: Client
) -> None:
    async with client.runner("r1").turn("chat", "t1") as turn:
        stopping = await turngate.start("stop", "chat", "--wait", "60")
        await turn.stop_requested.wait()
        ended = await stopping.interrupt(signal.SIGINT)
        assert (await client.get_session("chat")).phase == SessionPhase.STOPPING
    assert (ended.code, ended.out, ended.err) == (130, "", "")


async def test_i4_stop_of_a_turn_not_yet_started_while_another_runs_says_nothing_running_was_stopped(
    turngate: Turngate, client: Client
) -> None:
    async with client.runner("r1").turn("chat", "t1") as turn:
        early, as_json = await asyncio.gather(
            turngate.run("stop", "chat", "--expect", "t0"),
            turngate.run("stop", "chat", "--expect", "t0", "--json"),
        )
        assert not turn.stop_requested.is_set()
    assert (early.code, early.err) == (8, "")
    told = "nothing running was stopped; t0 will be refused if it starts; t1 is still running"
    assert early.lines == [told]
    assert as_json.code == 8
    [answer] = as_json.objects()
    cancelled = answer["cancelled"]
    assert (cancelled["cancelledTurnIds"], cancelled["beforeStart"], cancelled["activeTurnId"]) == (
        ["t0"],
        True,
        "t1",
    )
    assert cancelled["stoppingTurnId"] == ""


async def test_a_stop_whose_outcome_is_unknown_says_it_may_have_taken_effect_and_how_to_learn_what_it_did(
    turngate: Turngate, client: Client, cli_server: TurngateServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = SessionKey(turngate.project, "chat")
    store, apply = cli_server.store, cli_server.store.apply
    lost = asyncio.Event()

    async def unreachable_once_lost(written: SessionKey, command: Command) -> Decision:
        if written == key and lost.is_set():
            raise StoreUnavailable("the store is unreachable")
        return await apply(written, command)

    # The Stop's write is made and its reply lost; from then on the store is unreachable for the
    # session until the command has given up, so every retry fails too (whatever the machine's
    # speed, none can learn what the first attempt did) and its outcome stays unknown to it.
    monkeypatch.setattr(store, "apply", unreachable_once_lost)
    async with client.runner("r1").turn("chat", "t1") as turn:
        with reply_lost(store, key, then=lost.set):
            unknown = await turngate.run(
                "stop", "chat", "--expect", "t1", "--request-id", "req-9", "--timeout", "1"
            )
        lost.clear()
        await turn.stop_requested.wait()
        learned = await turngate.run("stop", "chat", "--expect", "t1", "--request-id", "req-9")

    assert (unknown.code, unknown.out) == (9, "")
    assert unknown.err == (
        f"turngate: {turngate.target} could not confirm it (UNAVAILABLE): it may have taken effect; "
        "run the same command again with --request-id req-9 to learn what it did\n"
    )
    assert (learned.code, learned.lines[0].split()[:3]) == (0, ["cancelled", "turns=t1", "stopping=t1"])
