"""Races around the turn queue (issue 13), with forced interleavings: the store's before_write hook
holds chosen writes until the other side has committed, or until every contender has decided on
the same state, so each ordering really happens. Whatever the order, no queued turn is lost or
admitted twice, at most one turn is active, and the queue keeps its order.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine
from typing import Any

import pytest

from tests.support.calls import (
    Gate,
    admission_refused,
    admissions,
    complete,
    enqueue,
    events_after,
    forced,
    gate_for,
    gated,
    head_of,
    heartbeat,
    interrupt,
    kinds,
    picked_up,
    resume_queue,
    snapshot,
    stop,
    with_queue,
)
from tests.support.servers import Client
from tests.support.watching import collect, collect_until, dequeues, turn_of, watch
from turngate.service.core import Admit, Cancel, ClearQueue, Complete, Expire, ResumeQueue
from turngate.service.server import TurngateServer
from turngate.v1 import turngate_pb2 as pb

# Whose write is held until the other's has committed; "both": both decide on one state and race.
ORDERS = {
    "complete_decided_first": ("complete",),
    "other_decided_first": ("other",),
    "both": ("complete", "other"),
}
# Sessions that race a Stop and a CompleteTurn unforced, all at once.
UNFORCED_SESSIONS = 10
# A queued turn's wait that the watchdog lets run out (the shortest the contract allows).
SHORT_WAIT_S = 1.0


def about(log: list[pb.SessionEvent], turn_id: str) -> list[str]:
    """The kinds of the events of `turn_id`, in log order."""
    return kinds([e for e in log if turn_of(e) == turn_id])


def admitted_ids(log: list[pb.SessionEvent]) -> list[str]:
    return [a.turn.turn_id for a in admissions(log)]


async def queue_behind_t1(client: Client, session: pb.SessionRef, *turn_ids: str) -> tuple[pb.TurnLease, int]:
    """`with_queue`, and the log's head once it is set up."""
    lease = await with_queue(client, session, *turn_ids)
    return lease, await head_of(client, session)


# --- a Stop naming the queued head vs the CompleteTurn that would promote it -----------------


async def _stopped_head_had_one_fate(
    client: Client, session: pb.SessionRef, head: int, stopped: pb.CancelTurnResponse
) -> str:
    """t2, the head, was either cancelled while it waited or promoted and then stopped: never both,
    never neither. t1 settled COMPLETED once, and the queue went on as the fate of t2 says."""
    log = await events_after(client, session, head)
    assert [e.turn_settled.turn.outcome for e in log if e.HasField("turn_settled")] == [
        pb.TURN_OUTCOME_COMPLETED
    ]
    fate = about(log, "t2")
    current = await snapshot(client, session)
    if fate == ["turn_dequeued"]:
        assert (stopped.cancelled.queued, stopped.cancelled.stopping_turn_id) == (True, "")
        assert admitted_ids(log) == ["t3"]  # the completion promoted the next
        assert (current.active.turn_id, list(current.queue)) == ("t3", [])
        await admission_refused(
            client, session, "t2", "r-t2", "TURN_CANCELLED", mode=pb.ADMISSION_MODE_ENQUEUE
        )
        return "cancelled_while_queued"
    assert fate == ["turn_admitted", "stop_requested"], kinds(log)
    assert (stopped.cancelled.queued, stopped.cancelled.stopping_turn_id) == (False, "t2")
    assert (current.phase, current.active.turn_id) == (pb.SESSION_PHASE_STOPPING, "t2")
    assert [q.turn_id for q in current.queue] == ["t3"]
    lease = (await picked_up(client, session, "t2")).lease  # and is told to stop
    assert (await heartbeat(client, lease)).directive == pb.DIRECTIVE_STOP
    return "promoted_then_stopped"


@pytest.mark.parametrize("order", list(ORDERS))
async def test_q2_q6_stop_naming_the_queued_head_racing_the_completion_that_promotes_it_gives_it_one_fate(
    server: TurngateServer, client: Client, session: pb.SessionRef, order: str
) -> None:
    lease, head = await queue_behind_t1(client, session, "t2", "t3")
    calls = {"complete": complete(client, lease), "other": stop(client, session, "t2")}

    with gated(server, gate_for(session, ORDERS[order], {"complete": Complete, "other": Cancel})) as gate:
        results = await forced(gate, calls, ORDERS[order])

    fate = await _stopped_head_had_one_fate(client, session, head, results["other"])
    forced_fate = {
        "complete_decided_first": "cancelled_while_queued",
        "other_decided_first": "promoted_then_stopped",
    }
    assert fate == forced_fate.get(order, fate)


async def test_q2_q6_unforced_stops_of_the_queued_head_racing_completions_give_each_head_one_fate(
    client: Client,
) -> None:
    sessions = [
        pb.SessionRef(project_id="p-e2e", session_id=f"s-{uuid.uuid4().hex[:16]}")
        for _ in range(UNFORCED_SESSIONS)
    ]
    prepared = [await queue_behind_t1(client, session, "t2", "t3") for session in sessions]

    results = await asyncio.gather(
        *(
            asyncio.gather(complete(client, lease), stop(client, session, "t2"))
            for session, (lease, _) in zip(sessions, prepared, strict=True)
        )
    )

    for session, (_, head), (_, stopped) in zip(sessions, prepared, results, strict=True):
        await _stopped_head_had_one_fate(client, session, head, stopped)


# --- CompleteTurn vs an ENQUEUE --------------------------------------------------------------


@pytest.mark.parametrize("order", list(ORDERS))
async def test_q1_q2_enqueue_racing_the_completion_of_the_active_turn_is_admitted_once_never_lost(
    server: TurngateServer, client: Client, session: pb.SessionRef, order: str
) -> None:
    lease, head = await queue_behind_t1(client, session)
    calls = {"complete": complete(client, lease), "other": enqueue(client, session, "t2")}

    with gated(server, gate_for(session, ORDERS[order], {"complete": Complete, "other": Admit})) as gate:
        answer: pb.AdmitTurnResponse = (await forced(gate, calls, ORDERS[order]))["other"]

    log = await events_after(client, session, head)
    assert about(log, "t1") == ["turn_settled"]
    [admitted] = [e.turn_admitted for e in log if e.HasField("turn_admitted")]  # once, never lost
    assert admitted.turn.turn_id == "t2"
    if answer.HasField("queued"):  # queued behind t1, then promoted by its completion
        assert about(log, "t2") == ["turn_queued", "turn_admitted"]
        assert admitted.from_queue
        answer = await picked_up(client, session, "t2")
    else:  # t1 had settled: admitted at once, as REJECT would
        assert about(log, "t2") == ["turn_admitted"]
        assert not admitted.from_queue
    assert answer.lease.generation == admitted.turn.generation
    current = await snapshot(client, session)
    assert (current.phase, current.active.turn_id, list(current.queue)) == (
        pb.SESSION_PHASE_RUNNING,
        "t2",
        [],
    )
    forced_queuing = {"complete_decided_first": True, "other_decided_first": False}
    assert admitted.from_queue == forced_queuing.get(order, admitted.from_queue)


# --- two INTERRUPTs at once ------------------------------------------------------------------


@pytest.mark.parametrize("guard", ["", "t1"], ids=["unguarded", "guarded"])
async def test_q7_two_interrupts_decided_together_both_wait_at_the_head_and_stop_the_active_turn_once(
    server: TurngateServer, client: Client, session: pb.SessionRef, guard: str
) -> None:
    lease, head = await queue_behind_t1(client, session, "t2")
    calls = {turn_id: interrupt(client, session, turn_id, guard) for turn_id in ("tx", "ty")}

    with gated(server, Gate(session, {Admit: 2})) as gate:
        answers = await forced(gate, calls, held=calls)  # both decided to stop t1 and wait first

    # Both wait: a guard naming t1 holds for the second too, as t1 stays active while it stops.
    assert all(answer.HasField("queued") for answer in answers.values())
    log = await events_after(client, session, head)
    assert kinds(log).count("stop_requested") == 1  # the active turn is stopped once
    queued = [e.turn_queued for e in log if e.HasField("turn_queued")]
    assert sorted(q.turn.turn_id for q in queued) == ["tx", "ty"]
    assert [q.position for q in queued] == [1, 1]
    latest_first = [*reversed([q.turn.turn_id for q in queued]), "t2"]
    assert [q.turn_id for q in (await snapshot(client, session)).queue] == latest_first

    await complete(client, lease, pb.TURN_OUTCOME_CANCELLED)
    for turn_id in latest_first:
        await complete(client, (await picked_up(client, session, turn_id)).lease)

    log = await events_after(client, session, head)
    assert admitted_ids(log) == latest_first
    assert "queue_paused" not in kinds(log)


# --- the watchdog expiring the head vs ResumeQueue -------------------------------------------


@pytest.mark.parametrize("held", ["resume", "expiry"])
async def test_q3_q4_resume_queue_racing_the_expiry_of_the_head_never_admits_an_expired_turn(
    server: TurngateServer, client: Client, session: pb.SessionRef, held: str
) -> None:
    lease = (await enqueue(client, session, "t1")).lease
    watcher = watch(client, session)  # open before t2's wait starts: it sees t2 leave
    try:
        [opening] = await collect(watcher, 1)
        await enqueue(client, session, "t2", max_queue_wait=SHORT_WAIT_S)
        await enqueue(client, session, "t3")
        await complete(client, lease, pb.TURN_OUTCOME_FAILED)  # pauses the queue
        calls: dict[str, Coroutine[Any, Any, object]] = {"resume": resume_queue(client, session)}
        if held == "resume":
            # ResumeQueue decided to admit t2; the server's watchdog expires t2 before it is written.
            gate = Gate(session, {ResumeQueue: 1})
            calls["expiry"] = collect_until(watcher, dequeues("t2"))
        else:
            # The server's watchdog decided to expire t2; ResumeQueue, past t2's expiry too, commits first.
            gate = Gate(session, {Expire: 1})
        with gated(server, gate):
            resumed: pb.ResumeQueueResponse = (await forced(gate, calls, held=[held]))["resume"]
    finally:
        watcher.cancel()

    assert (resumed.admitted_turn_id, list(resumed.queue)) == ("t3", [])
    log = await events_after(client, session, opening.seq)
    assert about(log, "t2") == ["turn_queued", "turn_dequeued"]  # expired once, never admitted
    assert [e.turn_dequeued.outcome for e in log if e.HasField("turn_dequeued")] == [pb.TURN_OUTCOME_EXPIRED]
    assert admitted_ids(log) == ["t3"]
    assert (kinds(log).count("queue_paused"), kinds(log).count("queue_resumed")) == (1, 1)
    current = await snapshot(client, session)
    assert (current.active.turn_id, current.queue_paused, list(current.queue)) == ("t3", False, [])


# --- many ENQUEUEs at once -------------------------------------------------------------------


async def test_q1_concurrent_enqueues_get_distinct_places_and_are_admitted_in_their_order(
    server: TurngateServer, client: Client, session: pb.SessionRef
) -> None:
    count = server.settings.max_queue_depth  # as many as may wait
    lease, head = await queue_behind_t1(client, session)
    calls = {f"t-{i}": enqueue(client, session, f"t-{i}") for i in range(count)}

    with gated(server, Gate(session, {Admit: count})) as gate:
        answers = await forced(gate, calls, held=calls)  # each decided on the same, empty queue

    queued = [answer.queued for answer in answers.values()]
    assert sorted(q.position for q in queued) == list(range(1, count + 1))
    by_position = [q.turn_id for q in sorted(queued, key=lambda q: q.position)]
    assert [q.turn_id for q in (await snapshot(client, session)).queue] == by_position

    await complete(client, lease)
    for turn_id in by_position:
        await complete(client, (await picked_up(client, session, turn_id)).lease)

    log = await events_after(client, session, head)
    assert [e.turn_queued.turn.turn_id for e in log if e.HasField("turn_queued")] == by_position
    assert admitted_ids(log) == by_position


# --- ClearQueue vs the CompleteTurn that would promote the head -------------------------------


async def clear_queue(client: Client, session: pb.SessionRef) -> pb.ClearQueueResponse:
    return await client.control.ClearQueue(pb.ClearQueueRequest(session=session, reason="start over"))


@pytest.mark.parametrize("order", list(ORDERS))
async def test_q3_q6_clear_queue_racing_the_completion_that_promotes_the_head_never_stops_a_running_turn(
    server: TurngateServer, client: Client, session: pb.SessionRef, order: str
) -> None:
    """The SDK's clear was a read and a Stop of the last queued turn: a promotion in between made
    it a Stop of a running turn. ClearQueue decides in one write: whichever commits first, every
    turn that was waiting then is cancelled, and no turn the completion admitted is stopped."""
    lease, head = await queue_behind_t1(client, session, "t2", "t3")
    calls = {"complete": complete(client, lease), "other": clear_queue(client, session)}

    with gated(server, gate_for(session, ORDERS[order], {"complete": Complete, "other": ClearQueue})) as gate:
        results = await forced(gate, calls, ORDERS[order])

    log = await events_after(client, session, head)
    assert "stop_requested" not in kinds(log), "ClearQueue stops nothing"
    cleared: pb.ClearQueueResponse = results["other"]
    current = await snapshot(client, session)
    if admitted_ids(log) == ["t2"]:  # the completion promoted t2 before the clear
        assert list(cleared.cleared_turn_ids) == ["t3"]
        assert (current.phase, current.active.turn_id) == (pb.SESSION_PHASE_RUNNING, "t2")
    else:
        assert admitted_ids(log) == []
        assert list(cleared.cleared_turn_ids) == ["t2", "t3"]
        assert current.phase == pb.SESSION_PHASE_IDLE
    assert list(current.queue) == []
    forced_promotion = {"complete_decided_first": [], "other_decided_first": ["t2"]}
    assert admitted_ids(log) == forced_promotion.get(order, admitted_ids(log))
