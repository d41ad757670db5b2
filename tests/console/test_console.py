"""The operator console in a real browser against a real server: busy sessions, a live timeline
that resumes, a turn's detail, Stop, Steer, a queued turn moved to the head, and runner text shown
as text."""

from __future__ import annotations

import asyncio
import re
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
from selenium import webdriver

from tests.console.browser import Page
from tests.console.conftest import GATEWAY, PROJECT, TRACE_URL, WATCHER, ConsoleServer
from tests.console.scenario import enqueue
from tests.support.processes import PROCESS_TIMEOUT_S, free_port
from tests.support.waiting import WAIT_TIMEOUT_S
from turngate.client import AdmissionMode, Client

TOOL_CALLS = '#timeline li[data-kind="toolCall"]'
INTERACTIONS = '#timeline li[data-kind="interaction"]'
STEERED = '#timeline li[data-kind="turnSteered"]'
STEER_ENDED = '#timeline li[data-kind="steerEnded"]'
# Outlives the server's restart (its exit and its start each take at most PROCESS_TIMEOUT_S), so
# the turn is not lost meanwhile; and no longer: when the test fails while no server answers, the
# turn's exit reports FAILED until its lease ends, and the failure must show before the timeout.
RESTART_LEASE_S = 2 * PROCESS_TIMEOUT_S + 10.0


async def send_steer(page: Page, content: str) -> None:
    await page.type_into("#steer-content", content)
    await page.click("#steer-send")


async def consecutive_seqs(page: Page) -> list[int]:
    """The timeline's seqs, each shown once and none missing (the first row is a snapshot)."""
    seqs = [int(seq) for seq in await page.attributes("#timeline li", "data-seq")]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs
    return seqs


async def test_a_busy_session_is_listed_its_tool_call_appears_live_and_stop_shows_stopping_then_settled(
    page: Page, served: ConsoleServer, session_id: str
) -> None:
    async with served.runner_client() as sdk:
        async with sdk.runner("r1").turn(session_id, "t1") as turn:
            await page.sign_in(GATEWAY.token, f"project={PROJECT}")
            row = await page.shown("#busy tbody tr", session_id)
            assert "t1" in row.text
            assert "RUNNING" in row.text
            assert "r1" in row.text
            await page.screenshot("busy-sessions")

            await page.click("#busy a", session_id)
            await page.attribute("#turn-state", "data-phase", "RUNNING")
            async with turn.tool_call("c1", "search_web"):
                await page.shown(TOOL_CALLS, "search_web (c1) OPEN")
            await page.shown(TOOL_CALLS, "search_web (c1) SUCCEEDED")
            await page.screenshot("timeline")

            await page.click("#stop", "Stop turn t1")
            outcome = await page.shown('#stop-outcome[data-outcome="cancelled"]')
            assert "t1 is stopping" in outcome.text
            await page.attribute("#turn-state", "data-phase", "STOPPING")
            assert turn.stop_requested.is_set()
        await page.attribute("#turn-state", "data-phase", "SETTLED")
        assert "CANCELLED by RUNNER" in (await page.shown("#turn-state")).text
        await page.shown('#timeline li[data-kind="turnSettled"]', "t1 CANCELLED by RUNNER")
        ended = await page.shown('#stop-outcome[data-outcome="ended"]', "t1 has ended")
        assert "is stopping" not in ended.text, "no stale '…is stopping' once the turn settled"
        await page.screenshot("stopped")


async def test_the_turn_detail_shows_tool_calls_with_their_end_states_interactions_and_links_the_trace(
    page: Page, served: ConsoleServer, session_id: str
) -> None:
    async with served.runner_client() as sdk, served.gateway_client() as gateway:
        async with sdk.runner("r1").turn(session_id, "t1") as turn:
            await page.sign_in(GATEWAY.token, f"project={PROJECT}&session={session_id}")
            await page.attribute("#turn-state", "data-phase", "RUNNING")
            async with turn.tool_call("c1", "read_file"):
                pass
            try:
                async with turn.tool_call("c2", "run_tests"):
                    raise RuntimeError("3 tests failed")
            except RuntimeError:
                pass
            asking = asyncio.create_task(turn.interaction("ask-1", "approval"))
            await page.shown(INTERACTIONS, "approval (ask-1) PENDING")
            await gateway.gateway().resolve_interaction(session_id, "ask-1", "go ahead")
            assert await asking == "go ahead"
            await page.shown(INTERACTIONS, "approval (ask-1) RESOLVED")
        await page.shown('#timeline li[data-kind="turnSettled"]', "COMPLETED")

    await page.click('#timeline li[data-kind="turnSettled"] a', "t1")
    await page.shown("#turn-detail tbody tr", "run_tests")
    rows = await page.texts("#turn-detail tbody tr")
    assert [row.split()[:3] for row in rows] == [
        ["c1", "read_file", "SUCCEEDED"],
        ["c2", "run_tests", "FAILED"],
        ["ask-1", "approval", "RESOLVED"],
    ]
    assert "3 tests failed" in rows[1]
    assert rows[2].endswith("go ahead")
    trace = await page.shown("#turn-detail a.trace")
    assert re.fullmatch("[0-9a-f]{32}", trace.text)
    assert trace.get_attribute("href") == TRACE_URL.replace("{trace_id}", trace.text)
    await page.screenshot("turn-detail")


async def test_a_turn_this_console_never_saw_links_its_trace_from_its_record(
    page: Page, served: ConsoleServer, session_id: str
) -> None:
    async with served.runner_client() as sdk, sdk.runner("r1").turn(session_id, "t1"):
        pass
    await page.sign_in(GATEWAY.token, f"project={PROJECT}&session={session_id}&turn=t1")
    trace = await page.shown("#turn-detail a.trace")
    assert re.fullmatch("[0-9a-f]{32}", trace.text)
    assert trace.get_attribute("href") == TRACE_URL.replace("{trace_id}", trace.text)


@pytest.mark.parametrize("ending", ["killed", "drained"])
async def test_a_reload_and_a_server_restart_resume_the_timeline_without_missing_or_repeating_events(
    page: Page, console_server: ConsoleServer, session_id: str, ending: str
) -> None:
    fragment = f"project={PROJECT}&session={session_id}"
    async with console_server.runner_client() as sdk, AsyncExitStack() as running_turn:
        async with console_server.start() as first:
            turn = await running_turn.enter_async_context(
                sdk.runner("r1").turn(session_id, "t1", lease_ttl=RESTART_LEASE_S)
            )
            await page.sign_in(GATEWAY.token, fragment)
            await page.watching()
            async with turn.tool_call("c1", "first"):
                pass
            await page.shown(TOOL_CALLS, "(c1) SUCCEEDED")

            await page.leave()
            async with turn.tool_call("c2", "while_away"):  # recorded while no page watches
                pass
            await page.open(fragment)
            await page.shown(TOOL_CALLS, "(c2) SUCCEEDED")
            before = await consecutive_seqs(page)
            if ending == "killed":
                await first.kill()  # as when the machine dies: the watch is cut, nothing is said
            else:
                first.terminate()  # the drain ends the watch with UNAVAILABLE
                await first.exit_code()
        await page.attribute("#watch-status", "data-live", "no")

        async with console_server.start():
            async with turn.tool_call("c3", "after_restart"):
                pass
            await page.shown(TOOL_CALLS, "(c3) SUCCEEDED")
            await running_turn.aclose()
            await page.shown('#timeline li[data-kind="turnSettled"]', "COMPLETED")
            after = await consecutive_seqs(page)
    assert after[: len(before)] == before
    calls = await page.texts(TOOL_CALLS)
    for call in ("(c1) SUCCEEDED", "(c2) SUCCEEDED", "(c3) SUCCEEDED"):
        assert sum(call in row for row in calls) == 1, (call, calls)


async def test_what_a_runner_wrote_is_shown_as_text_never_run_as_markup(
    page: Page, served: ConsoleServer, session_id: str
) -> None:
    name = '<img src=x onerror="window.__xss=1">'
    error = "<script>window.__xss=2</script><b>bold?</b>"
    async with served.runner_client() as sdk, sdk.runner("r1").turn(session_id, "t1") as turn:
        await page.sign_in(GATEWAY.token, f"project={PROJECT}&session={session_id}")
        await page.watching()
        try:
            async with turn.tool_call("c1", name):
                raise RuntimeError(error)
        except RuntimeError:
            pass
        row = await page.shown(TOOL_CALLS, "FAILED")
        assert name in row.text
        assert error in row.text
    await page.click(TOOL_CALLS + " a", "t1")
    detail = await page.shown("#turn-detail tbody tr", "FAILED")
    assert name in detail.text
    assert error in detail.text
    assert await page.script("return document.querySelectorAll('main img, main script, main b').length") == 0
    assert await page.script("return window.__xss === undefined") is True
    await page.screenshot("runner-text")


async def test_stop_needs_a_gateway_token_and_says_why_it_was_refused(
    page: Page, served: ConsoleServer, session_id: str
) -> None:
    async with served.runner_client() as sdk, sdk.runner("r1").turn(session_id, "t1") as turn:
        await page.sign_in(WATCHER.token, f"project={PROJECT}&session={session_id}")
        await page.attribute("#turn-state", "data-phase", "RUNNING")
        await page.click("#stop", "Stop turn t1")
        refused = await page.shown('#stop-outcome[data-outcome="error"]')
        assert "permission_denied" in refused.text

        await page.click("#forget-token")
        await page.click("#stop", "Stop turn t1")
        await page.shown('#stop-outcome[data-outcome="needs-token"]', "gateway token")
        assert await page.script("return document.activeElement.id") == "token"
        assert not turn.stop_requested.is_set()

        await page.type_into("#token", GATEWAY.token)
        await page.click("#token-form button[type=submit]")
        await page.click("#stop", "Stop turn t1")
        await page.shown('#stop-outcome[data-outcome="cancelled"]', "t1 is stopping")


async def test_a_stop_of_a_turn_that_has_ended_meanwhile_changes_nothing_and_says_mismatch_or_idle(
    page: Page, served: ConsoleServer, session_id: str
) -> None:
    fragment = f"project={PROJECT}&session={session_id}"
    async with served.runner_client() as sdk, AsyncExitStack() as first_turn:
        await first_turn.enter_async_context(sdk.runner("r1").turn(session_id, "t1"))
        await page.sign_in(GATEWAY.token, fragment)
        await page.attribute("#turn-state", "data-phase", "RUNNING")
        # The page keeps showing t1 running, as a page whose watch is cut does, while t1 ends.
        async with page.watch_blocked():
            await page.reload()
            await page.attribute("#watch-status", "data-live", "no")
            await first_turn.aclose()
            async with sdk.runner("r1").turn(session_id, "t2") as second:
                await page.click("#stop", "Stop turn t1")
                mismatch = await page.shown('#stop-outcome[data-outcome="mismatch"]')
                assert "t1 already ended (COMPLETED) and t2 is RUNNING; nothing changed" in mismatch.text
                assert not second.stop_requested.is_set()
            await page.click("#stop", "Stop turn t1")
            idle = await page.shown('#stop-outcome[data-outcome="idle"]')
            assert "nothing is running; nothing changed (last turn t2: COMPLETED)" in idle.text
        await page.shown('#timeline li[data-kind="turnSettled"]', "t2 COMPLETED")


async def test_the_queue_shows_in_the_busy_list_and_the_timeline(
    page: Page, served: ConsoleServer, session_id: str
) -> None:
    async with served.runner_client() as sdk:
        async with AsyncExitStack() as first_turn:
            await first_turn.enter_async_context(sdk.runner("r1").turn(session_id, "t1"))
            waiting = asyncio.create_task(
                first_turn.enter_async_context(
                    sdk.runner("r2").turn(session_id, "t2", mode=AdmissionMode.ENQUEUE)
                )
            )
            await page.sign_in(GATEWAY.token, f"project={PROJECT}")
            await page.shown("#busy tbody tr", session_id)
            await page.shown("#busy tbody td:nth-child(7)", "1")  # the Queued column

            await page.click("#busy a", session_id)
            await page.shown('#timeline li[data-kind="snapshot"]', "queued 1")
            await page.shown("#turn-state", "1 queued")
            await first_turn.aclose()  # t1 completes and t2, waiting, is admitted: it completes too
            await waiting
        await page.shown('#timeline li[data-kind="turnAdmitted"]', "t2 · runner r2")
        admitted = await page.texts('#timeline li[data-kind="turnAdmitted"]')
        assert any("from the queue after" in text for text in admitted), admitted
        await page.shown('#timeline li[data-kind="turnSettled"]', "t2 COMPLETED")


async def test_a_cursor_the_service_cannot_resume_starts_again_from_a_snapshot_saying_resync(
    page: Page, served: ConsoleServer, session_id: str
) -> None:
    async with served.runner_client() as sdk, sdk.runner("r1").turn(session_id, "t1"):
        await page.sign_in(GATEWAY.token, f"project={PROJECT}&session={session_id}")
        await page.attribute("#turn-state", "data-phase", "RUNNING")
        # A cursor beyond the session's head, as a tab kept from before the store lost the session.
        await page.script(
            f"""const key = "turngate.console.history:{PROJECT}/{session_id}";
            const kept = JSON.parse(sessionStorage.getItem(key));
            kept.cursor.seq = 1000;
            sessionStorage.setItem(key, JSON.stringify(kept));"""
        )
        await page.reload()
        await page.shown('#timeline li[data-kind="snapshot"]', "resync")
        await page.attribute("#turn-state", "data-phase", "RUNNING")


async def test_s1_a_steer_sent_from_the_console_reaches_the_running_turn_and_its_end_shows_on_the_timeline(
    page: Page, served: ConsoleServer, session_id: str
) -> None:
    async with served.runner_client() as sdk, AsyncExitStack() as running:
        await running.enter_async_context(sdk.runner("r1").turn(session_id, "t1"))
        await page.sign_in(GATEWAY.token, f"project={PROJECT}&session={session_id}")
        await page.attribute("#turn-state", "data-phase", "RUNNING")
        await page.shown("#steer-form label", "Steer turn t1")
        await send_steer(page, "also update the <b>changelog</b>")
        outcome = await page.shown('#steer-outcome[data-outcome="steered"]')
        steer_id = re.fullmatch(r"steered: (\S+) reached t1 as event #\d+; .*", outcome.text)
        assert steer_id, outcome.text
        steered = await page.shown(STEERED, steer_id[1])
        assert "t1 · steer" in steered.text
        assert "also update the <b>changelog</b>" in steered.text  # as text, never markup
        assert " · expires " in steered.text
        assert await page.script("return document.querySelectorAll('main b').length") == 0
        await page.screenshot("steered")

        await running.aclose()  # t1 completes without taking the steer: it ends UNCONSUMED (S2)
        ended = await page.shown(STEER_ENDED, "UNCONSUMED")
        assert f"steer {steer_id[1]} UNCONSUMED · turn t1" in ended.text
        await page.shown("#steer-form label", "Steer (no turn is running)")
        assert await page.script("return document.getElementById('steer-send').disabled") is True
    kinds = await page.attributes("#timeline li", "data-kind")
    assert kinds.index("turnSteered") < kinds.index("steerEnded") < kinds.index("turnSettled"), kinds
    assert page.script_errors() == []


async def test_s1_a_steer_of_a_turn_that_ended_meanwhile_changes_nothing_and_says_mismatch_with_its_reason(
    page: Page, served: ConsoleServer, session_id: str
) -> None:
    async with served.runner_client() as sdk, AsyncExitStack() as first_turn:
        await first_turn.enter_async_context(sdk.runner("r1").turn(session_id, "t1"))
        await page.sign_in(WATCHER.token, f"project={PROJECT}&session={session_id}")
        await page.attribute("#turn-state", "data-phase", "RUNNING")
        await send_steer(page, "look again")
        refused = await page.shown('#steer-outcome[data-outcome="error"]')
        assert "permission_denied" in refused.text

        await page.type_into("#token", GATEWAY.token)
        await page.click("#token-form button[type=submit]")
        # The page keeps showing t1 running, as a page whose watch is cut does, while t1 ends.
        async with page.watch_blocked():
            await page.reload()
            await page.attribute("#watch-status", "data-live", "no")
            await first_turn.aclose()
            async with sdk.runner("r1").turn(session_id, "t2"):
                await send_steer(page, "look again")
                mismatch = await page.shown('#steer-outcome[data-outcome="mismatch"]')
                assert mismatch.text == (
                    "mismatch (ACTIVE_TURN_MISMATCH): t1 is not running (it ended COMPLETED) "
                    "and t2 is RUNNING; nothing changed"
                )
                assert (await sdk.get_session(session_id)).active is not None
        await page.shown('#timeline li[data-kind="turnSettled"]', "t2 COMPLETED")
    assert await page.texts(STEERED) == []


async def queued_ids(sdk: Client, session_id: str) -> list[str]:
    return [turn.turn_id for turn in (await sdk.get_session(session_id)).queue]


async def test_q8_a_queued_turn_moved_to_the_head_from_the_console_and_a_queue_changed_meanwhile_read_again(
    page: Page, served: ConsoleServer, session_id: str
) -> None:
    async with served.runner_client() as sdk, sdk.runner("r1").turn(session_id, "t1"):
        for turn_id in ("t2", "t3"):
            await enqueue(served, session_id, turn_id)
        await page.sign_in(GATEWAY.token, f"project={PROJECT}&session={session_id}")
        await queue_shown(page, ["t2", "t3"])
        assert "At the head" in (await page.shown("#queue li", "t2")).text

        await enqueue(served, session_id, "t4")  # the queue changes after the page read its version
        await queue_shown(page, ["t2", "t3", "t4"])
        await page.click("#queue button", "Move t3 to head")
        changed = await page.shown('#queue-outcome[data-outcome="queue-changed"]')
        assert changed.text.startswith("the queue changed, reloaded")
        assert await queued_ids(sdk, session_id) == ["t2", "t3", "t4"]

        await page.click("#queue button", "Move t3 to head")
        await page.shown('#queue-outcome[data-outcome="moved"]', "moved t3 to the head")
        await queue_shown(page, ["t3", "t2", "t4"])
        reordered = await page.shown('#timeline li[data-kind="queueReordered"]', "t3 moved")
        assert "queue now t3, t2, t4" in reordered.text
        assert await queued_ids(sdk, session_id) == ["t3", "t2", "t4"]
        await page.screenshot("queue-moved")
        assert page.script_errors() == []


async def test_a_paused_queue_is_handled_from_the_console_one_turn_cancelled_resumed_then_cleared(
    page: Page, served: ConsoleServer, session_id: str
) -> None:
    async def t1_fails_with_three_waiting() -> None:
        async with sdk.runner("r1").turn(session_id, "t1"):
            for turn_id in ("t2", "t3", "t4"):
                await enqueue(served, session_id, turn_id)
            raise RuntimeError("t1 fails: its end pauses the queue (Q3)")

    async with served.runner_client() as sdk:
        with pytest.raises(RuntimeError):
            await t1_fails_with_three_waiting()
        await page.sign_in(GATEWAY.token, f"project={PROJECT}")
        row = await page.shown("#busy tbody tr", session_id)
        for shown in ("waiting: t2", "QUEUE PAUSED", "3", "t1"):
            assert shown in row.text, "a session busy by its queue alone has no blank cells"
        await page.screenshot("busy-queue-only")

        await page.click("#busy a", session_id)
        await page.shown("#queue-paused", "Paused")
        await queue_shown(page, ["t2", "t3", "t4"])
        await page.click("#queue button", "Cancel t3")
        await page.shown('#queue-outcome[data-outcome="cancelled"]', "t3 left the queue and will not run")
        await queue_shown(page, ["t2", "t4"])
        await page.screenshot("queue-paused")

        await page.click("#resume-queue", "Resume queue")
        await page.shown('#queue-outcome[data-outcome="resumed"]', "t2 was admitted")
        await queue_shown(page, ["t4"])
        await page.click("#clear-queue", "Clear queue")
        await page.shown('#queue-outcome[data-outcome="cleared"]', "t4 will not run")
        await page.shown("#queue li", "No turn is waiting")
        assert await queued_ids(sdk, session_id) == []
        assert page.script_errors() == []


async def queue_shown(page: Page, turn_ids: list[str]) -> None:
    """The console's queue lists `turn_ids`, head first."""
    shown = "return [...document.querySelectorAll('#queue li[data-turn]')].map((li) => li.dataset.turn)"
    await page.until(lambda d: d.execute_script(shown) == turn_ids)


async def test_stop_and_steer_send_without_a_token_where_the_server_asks_for_none(
    chromium: webdriver.Chrome, tmp_path: Path, session_id: str
) -> None:
    """Authentication off: the console sends its writes as they are, and says a token is needed
    only when a server refuses one (test_stop_needs_a_gateway_token_and_says_why_it_was_refused)."""
    server = ConsoleServer(tmp_path, free_port(), free_port(), tokens=None)
    page = Page(chromium, server.base, tmp_path)
    async with server.start(), server.runner_client() as sdk, sdk.runner("r1").turn(session_id, "t1") as turn:
        await page.open(f"project={PROJECT}&session={session_id}")
        await page.attribute("#turn-state", "data-phase", "RUNNING")
        await send_steer(page, "and the changelog")
        await page.shown('#steer-outcome[data-outcome="steered"]')
        await page.click("#stop", "Stop turn t1")
        await page.shown('#stop-outcome[data-outcome="cancelled"]', "t1 is stopping")
        await asyncio.wait_for(turn.stop_requested.wait(), WAIT_TIMEOUT_S)
    assert page.script_errors() == []


async def test_a_session_never_seen_says_so_with_the_project_it_looked_in_until_its_first_event(
    page: Page, served: ConsoleServer, session_id: str
) -> None:
    await page.sign_in(GATEWAY.token, f"project={PROJECT}&session={session_id}")
    unknown = await page.shown("#turn-state", "Never seen")
    assert f"no event of {session_id} in project {PROJECT}" in unknown.text
    async with served.runner_client() as sdk, sdk.runner("r1").turn(session_id, "t1"):
        await page.attribute("#turn-state", "data-phase", "RUNNING")
        assert "Never seen" not in (await page.shown("#turn-state")).text
    assert page.script_errors() == []


async def test_a_session_opened_after_its_turns_shows_them_oldest_first_with_their_calls_and_pages_earlier(
    page: Page, served: ConsoleServer, session_id: str
) -> None:
    async with served.runner_client() as sdk:
        for n in range(12):  # more than a page (10)
            async with sdk.runner("r1").turn(session_id, f"t{n}") as turn, turn.tool_call("c1", "search_web"):
                pass
        await page.sign_in(GATEWAY.token, f"project={PROJECT}&session={session_id}")
        await page.shown("#earlier li[data-turn]", "t11")
        shown = "return [...document.querySelectorAll('#earlier > li')].map((li) => li.dataset.turn)"
        await page.until(lambda d: d.execute_script(shown) == [f"t{n}" for n in range(2, 12)])
        latest = await page.shown('#earlier li[data-turn="t11"]')
        assert "COMPLETED by RUNNER" in latest.text
        assert "search_web (c1) SUCCEEDED" in latest.text
        await page.click("#load-earlier", "Load earlier turns")
        await page.until(lambda d: d.execute_script(shown) == [f"t{n}" for n in range(12)])
        assert await page.script("return document.getElementById('load-earlier').hidden") is True
        await page.screenshot("earlier-turns")
    assert page.script_errors() == []
