"""`turngate steer` and `turngate queue move` against a real server (design §9): what became of a
steer, by output and exit code as `stop`'s (0 steered, 3 another turn holds the session, 4 none
does, 8 queued as a turn of its own), the steer and its end in `watch`, and a guarded move."""

from __future__ import annotations

import asyncio
import signal

from tests.cli.conftest import Turngate
from tests.support.waiters import Waiter
from tests.support.waiting import WAIT_TIMEOUT_S
from turngate.client import AdmissionMode, Client

SESSION = "chat"


async def test_s1_steer_prints_steered_with_its_seq_then_mismatch_for_a_turn_no_longer_running(
    turngate: Turngate, client: Client
) -> None:
    async with client.runner("r1").turn(SESSION, "t1") as turn:
        steered = await turngate.run("steer", SESSION, "--expect", "t1", "use staging", "--steer-id", "s1")
        async with asyncio.timeout(WAIT_TIMEOUT_S):
            received = await anext(turn.steers)
        await turn.acknowledge(received.steer_id)
    assert (steered.code, steered.err) == (0, "")
    [line] = steered.lines
    assert line.startswith("steered  turn=t1 steer=s1 seq=")
    assert received.content == "use staging"

    idle = await turngate.run("steer", SESSION, "--expect", "t1", "too late", "--json")
    assert (idle.code, idle.err) == (4, "")
    [answer] = idle.objects()
    assert answer["mismatch"]["reason"] == "ERROR_REASON_TURN_NOT_ACTIVE"
    assert answer["mismatch"]["expectedPhase"] == "TURN_PHASE_SETTLED"

    async with client.runner("r1").turn(SESSION, "t2"):
        other = await turngate.run("steer", SESSION, "--expect", "t1", "too late")
    assert (other.code, other.err) == (3, "")
    assert other.lines == [
        "mismatch  expected=t1 reason=ACTIVE_TURN_MISMATCH expected_phase=SETTLED "
        "expected_outcome=COMPLETED current=t2 current_phase=RUNNING"
    ]


async def test_s7_steer_enqueue_prints_the_turn_it_became_and_exits_8(
    turngate: Turngate, client: Client
) -> None:
    async with client.runner("r1").turn(SESSION, "t1"):
        pass
    async with client.runner("r2").turn(SESSION, "t2"):
        queued = await turngate.run(
            "steer", SESSION, "--expect", "t1", "then summarise", "--steer-id", "s1", "--enqueue"
        )
        await client.gateway().stop(SESSION, expected_turn_id="s1")  # it will not run
    assert (queued.code, queued.err) == (8, "")
    assert queued.lines == ["queued  turn=s1 runner=r1 position=1 queue_depth=1"]


async def test_s5_watch_prints_the_steer_and_its_end(turngate: Turngate, client: Client) -> None:
    watching = await turngate.start("watch", SESSION)
    await watching.line()  # the snapshot
    async with client.runner("r1").turn(SESSION, "t1") as turn:
        await client.gateway().steer(SESSION, "t1", "hurry up", steer_id="s1")
        async with asyncio.timeout(WAIT_TIMEOUT_S):
            await turn.acknowledge((await anext(turn.steers)).steer_id, consumed=False)
    admitted, steered, ended = [(await watching.line()).split(maxsplit=3)[2:] for _ in range(3)]
    await watching.interrupt(signal.SIGINT)
    assert admitted[0] == "turn_admitted"
    assert steered[0] == "turn_steered"
    assert steered[1].startswith('turn=t1 steer=s1 type=text/plain content="hurry up" expires_at=')
    assert ended == ["steer_ended", "turn=t1 steer=s1 status=DECLINED"]


async def test_q8_queue_move_puts_a_waiting_turn_at_the_head_guarded_by_the_version(
    turngate: Turngate, client: Client
) -> None:
    running = Waiter(client, SESSION, "t1")
    await running.admitted()
    waiters = []
    for position, turn_id in enumerate(("t2", "t3"), 1):
        waiter = Waiter(client, SESSION, turn_id, runner_id=f"r-{turn_id}", mode=AdmissionMode.ENQUEUE)
        await waiter.placed(position)
        waiters.append(waiter)
    version = (await client.get_session(SESSION)).queue_version

    moved = await turngate.run("queue", "move", SESSION, "t3", "--expect-version", str(version))
    assert (moved.code, moved.err) == (0, "")
    assert moved.lines == [f"moved  queue=t3,t2 queue_version={version + 1}"]

    stale = await turngate.run("queue", "move", SESSION, "t2", "--expect-version", str(version))
    assert (stale.code, stale.out) == (3, "")
    assert f"not {version}" in stale.err
    missing = await turngate.run("queue", "move", SESSION, "t1")
    assert missing.code == 5

    after = await turngate.run("queue", "move", SESSION, "t3", "--after", "t2", "--json")
    assert after.code == 0
    [queue] = after.objects()
    assert [turn["turnId"] for turn in queue["queue"]] == ["t2", "t3"]

    await client.gateway().clear_queue(SESSION)
    for waiter in waiters:
        async with asyncio.timeout(WAIT_TIMEOUT_S):
            await asyncio.gather(waiter.task, return_exceptions=True)
    await running.ended()


async def test_s6_steer_requeue_makes_text_the_turn_did_not_take_a_turn_of_its_own(
    turngate: Turngate, client: Client
) -> None:
    async with client.runner("r1").turn(SESSION, "t1"):
        steered = await turngate.run(
            "steer", SESSION, "--expect", "t1", "later", "--steer-id", "s1", "--requeue"
        )
    assert steered.code == 0
    active = (await client.get_session(SESSION)).active  # promoted as t1 ended, for t1's runner
    assert active is not None
    assert (active.turn_id, active.runner_id) == ("s1", "r1")
    await client.gateway().stop(SESSION, expected_turn_id="s1", force=True)
