"""`turngate queue show|resume|clear`, the queue in `status` and `watch`, and `stop --queue`
against a real server (issue 13): turns are queued by SDK runners waiting in tasks of their own."""

from __future__ import annotations

import asyncio
import signal

import pytest

from tests.cli.conftest import Turngate
from tests.cli.output import fields, seconds, sections
from tests.support.waiters import Waiter
from tests.support.waiting import WAIT_TIMEOUT_S
from turngate.client import (
    AdmissionMode,
    Client,
    QueuedTurnCancelled,
    QueuedTurnCleared,
    QueuedTurnExpired,
    TurnOutcome,
)

SESSION = "chat"


async def queued(client: Client, *turn_ids: str, max_queue_wait: float | None = None) -> list[Waiter]:
    """Runners whose turns wait in the queue of SESSION in this order."""
    waiters = []
    for position, turn_id in enumerate(turn_ids, 1):
        waiter = Waiter(
            client,
            SESSION,
            turn_id,
            runner_id=f"r-{turn_id}",
            mode=AdmissionMode.ENQUEUE,
            max_queue_wait=max_queue_wait,
        )
        await waiter.placed(position)
        waiters.append(waiter)
    return waiters


async def left_with(waiter: Waiter, kind: type[BaseException]) -> None:
    with pytest.raises(kind):
        async with asyncio.timeout(WAIT_TIMEOUT_S):
            await waiter.task


async def paused_by_a_stop(client: Client) -> Waiter:
    """t1 ran and was stopped, which paused the queue: t2 waits in it."""
    running = Waiter(client, SESSION, "t1")
    await running.admitted()
    [waiting] = await queued(client, "t2")
    await client.gateway().stop(SESSION, expected_turn_id="t1")
    assert (await running.ended()).outcome == TurnOutcome.CANCELLED
    return waiting


async def test_q1_queue_show_lists_the_waiting_turns_head_first_with_waited_and_expiry(
    turngate: Turngate, client: Client
) -> None:
    empty = await turngate.run("queue", "show", SESSION)
    assert (empty.code, empty.err) == (0, "")
    assert empty.out.split("\n\n")[1] == f"no turns wait in {SESSION}\n"

    running = Waiter(client, SESSION, "t1")
    await running.admitted()
    waiters = await queued(client, "t2", "t3")
    text, as_json = await asyncio.gather(
        turngate.run("queue", "show", SESSION), turngate.run("queue", "show", SESSION, "--json")
    )

    assert (text.code, text.err) == (0, "")
    header, table = text.out.split("\n\n")
    assert fields(header) == {"session": SESSION, "phase": "RUNNING", "active": "t1", "queued": "2"}
    titles, *rows = [line.split() for line in table.splitlines()]
    assert titles == ["POSITION", "TURN", "RUNNER", "WAITED", "EXPIRES", "IN"]
    assert [row[:3] for row in rows] == [["1", "t2", "r-t2"], ["2", "t3", "r-t3"]]
    assert all(seconds(row[3]) >= 0 for row in rows)
    assert all(590 < seconds(row[4]) <= 600 for row in rows)  # the service's default wait

    assert (as_json.code, as_json.err) == (0, "")
    assert [(turn["turnId"], turn["runnerId"], turn["position"]) for turn in as_json.objects()] == [
        ("t2", "r-t2", 1),
        ("t3", "r-t3", 2),
    ]
    await client.gateway().clear_queue(SESSION)
    for waiter in waiters:
        await left_with(waiter, QueuedTurnCancelled)
    await running.ended()


async def test_q3_status_and_queue_show_say_who_paused_the_queue_and_queue_resume_admits_its_head(
    turngate: Turngate, client: Client
) -> None:
    waiting = await paused_by_a_stop(client)
    status, shown = await asyncio.gather(
        turngate.run("status", SESSION), turngate.run("queue", "show", SESSION)
    )
    assert (status.code, shown.code) == (0, 0)
    view = sections(status.out)
    assert (view[""]["phase"], view[""]["queued"], view[""]["queue paused by"]) == ("IDLE", "1", "t1")
    assert status.out.split("\n\nqueue\n")[1].split()[:9] == [
        "POSITION",
        "TURN",
        "RUNNER",
        "WAITED",
        "EXPIRES",
        "IN",
        "1",
        "t2",
        "r-t2",
    ]
    assert fields(shown.out.split("\n\n")[0])["queue paused by"] == "t1"

    resumed = await turngate.run("queue", "resume", SESSION)
    assert (resumed.code, resumed.lines, resumed.err) == (0, ["resumed  admitted=t2"], "")
    turn = await waiting.admitted()
    assert turn.waited is not None
    again = await turngate.run("queue", "resume", SESSION, "--json")
    assert (again.code, again.objects()) == (0, [{"admittedTurnId": "", "queue": []}])
    await waiting.ended()


async def test_q6_queue_clear_cancels_the_waiting_turns_and_the_active_turn_runs_on(
    turngate: Turngate, client: Client
) -> None:
    running = Waiter(client, SESSION, "t1")
    first = await running.admitted()
    waiters = await queued(client, "t2", "t3")

    cleared = await turngate.run("queue", "clear", SESSION, "--reason", "start over")
    assert (cleared.code, cleared.lines, cleared.err) == (
        0,
        ["cancelled  turns=t3 queued=yes cleared=t2"],
        "",
    )
    for waiter in waiters:
        await left_with(waiter, QueuedTurnCancelled)
    assert not first.stop_requested.is_set()
    snapshot = await client.get_session(SESSION)
    assert (snapshot.queue, snapshot.phase.name) == ((), "RUNNING")

    nothing, as_json = await asyncio.gather(
        turngate.run("queue", "clear", SESSION), turngate.run("queue", "clear", SESSION, "--json")
    )
    assert (nothing.code, nothing.lines) == (0, [f"no turns wait in {SESSION}"])
    assert (as_json.code, as_json.out) == (0, "")
    assert (await running.ended()).outcome == TurnOutcome.COMPLETED


async def test_q3_stop_queue_clear_stops_the_turn_and_clears_the_queue_in_one_stop(
    turngate: Turngate, client: Client
) -> None:
    running = Waiter(client, SESSION, "t1")
    await running.admitted()
    [waiter] = await queued(client, "t2")
    ran = await turngate.run("stop", SESSION, "--expect", "t1", "--queue", "clear", "--json")
    assert (ran.code, ran.err) == (0, "")
    [answer] = ran.objects()
    assert (answer["cancelled"]["stoppingTurnId"], answer["cancelled"]["clearedTurnIds"]) == ("t1", ["t2"])
    await left_with(waiter, QueuedTurnCleared)
    assert (await running.ended()).outcome == TurnOutcome.CANCELLED


async def test_q3_stop_queue_continue_lets_the_next_turn_run_and_a_stop_of_a_queued_turn_removes_it(
    turngate: Turngate, client: Client
) -> None:
    running = Waiter(client, SESSION, "t1")
    await running.admitted()
    next_up, removed = await queued(client, "t2", "t3")
    dropped = await turngate.run("stop", SESSION, "--expect", "t3")
    assert (dropped.code, dropped.lines) == (
        8,
        ["nothing running was stopped; t3 left the queue and will not run; t1 is still running"],
    )
    await left_with(removed, QueuedTurnCancelled)

    stopped = await turngate.run("stop", SESSION, "--expect", "t1", "--queue", "continue")
    assert stopped.code == 0
    await running.ended()
    await next_up.admitted()  # not paused: no resume needed
    await next_up.ended()


async def test_watch_prints_the_queue_events_one_a_line(turngate: Turngate, client: Client) -> None:
    watching = await turngate.start("watch", SESSION)
    assert (await watching.line()).split()[2] == "snapshot"
    waiting = await paused_by_a_stop(client)
    await turngate.run("queue", "resume", SESSION)
    await waiting.admitted()
    [expiring] = await queued(client, "t3", max_queue_wait=1.0)
    await left_with(expiring, QueuedTurnExpired)  # the watchdog's expiry
    await waiting.ended()

    lines = [await watching.line() for _ in range(10)]
    ended = await watching.interrupt(signal.SIGINT)
    assert (ended.code, ended.err) == (0, "")
    shown = [(line.split()[2], line.split("  ")[-1].strip()) for line in lines]
    assert [kind for kind, _ in shown] == [
        "turn_admitted",
        "turn_queued",
        "stop_requested",
        "turn_settled",
        "queue_paused",
        "queue_resumed",
        "turn_admitted",
        "turn_queued",
        "turn_dequeued",
        "turn_settled",
    ]
    assert shown[1][1].startswith("turn=t2 runner=r-t2 position=1 expires_at=")
    assert shown[4][1] == "by=t1 outcome=CANCELLED"
    assert shown[5][1] == "paused_by=t1"
    assert shown[6][1].startswith("turn=t2 runner=r-t2 generation=")
    assert " from_queue=yes waited=" in shown[6][1]
    assert shown[8][1].startswith("turn=t3 runner=r-t3 outcome=EXPIRED waited=")


async def test_q3_sessions_busy_lists_a_session_whose_paused_queue_alone_waits(
    turngate: Turngate, client: Client
) -> None:
    waiting = await paused_by_a_stop(client)
    busy = await turngate.run("sessions", "busy")
    assert (busy.code, busy.err) == (0, "")
    header, row = busy.lines
    assert (header.split(), row.split()) == (
        ["SESSION", "QUEUED", "QUEUE", "PAUSED", "BY"],
        [SESSION, "1", "t1"],
    )
    await client.gateway().clear_queue(SESSION)
    await left_with(waiting, QueuedTurnCancelled)
