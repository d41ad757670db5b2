"""Races with forced interleavings: the store's before_write hook holds chosen writes until the
other side has committed (or until every contender has decided), so each ordering really happens.
Whatever the order, each turn gets exactly one terminal outcome and exactly one turn_settled event.
"""

from __future__ import annotations

import asyncio

import grpc
import pytest

from tests.support.calls import (
    Gate,
    admit,
    assert_reason,
    complete,
    events_after,
    gated,
    get_turn,
    heartbeat,
    record_interaction,
    refusal_of,
    refused,
    resolve,
    settlements,
    sleep_past,
    snapshot,
    stop,
)
from tests.support.servers import Client
from turngate.service.core import Admit, Cancel, Complete, Expire, Heartbeat, ResolveInteraction
from turngate.service.server import TurngateServer
from turngate.service.watchdog import Watchdog
from turngate.v1 import turngate_pb2 as pb

CONTENDERS = 200
# Admissions held until all of them have decided on the idle session; fewer than the SQL pool's
# 15 connections, as each holds one while it waits.
HELD_TOGETHER = 10


async def _one_settlement(
    client: Client,
    session: pb.SessionRef,
    outcome: pb.TurnOutcome.ValueType,
    settled_by: pb.SettledBy.ValueType,
) -> None:
    """The session's one turn settled once, as `outcome` by `settled_by`: in its log, GetTurn and
    GetSession alike."""
    (settled,) = settlements(await events_after(client, session, 1))
    assert (settled.turn.outcome, settled.turn.settled_by) == (outcome, settled_by)
    turn = await get_turn(client, session, settled.turn.turn_id)
    assert (turn.outcome, turn.settled_by) == (outcome, settled_by)
    current = await snapshot(client, session)
    assert current.phase == pb.SESSION_PHASE_IDLE
    assert current.last_settled == settled.turn


@pytest.mark.parametrize("history", ["never_used", "after_a_settled_turn"])
async def test_i1_200_concurrent_admissions_on_idle_session_admit_exactly_one_others_session_turn_in_use(
    server: TurngateServer, client: Client, session: pb.SessionRef, history: str
) -> None:
    if history == "after_a_settled_turn":
        await complete(client, (await admit(client, session, "t-earlier")).lease)
    head = (await snapshot(client, session)).seq

    with gated(server, Gate(session, {Admit: HELD_TOGETHER})) as gate:
        calls = [asyncio.create_task(admit(client, session, f"t-{i}", f"r-{i}")) for i in range(CONTENDERS)]
        await gate.wait_full()  # that many decided "admit" on the same idle session
        gate.open()
        results = await asyncio.gather(*calls, return_exceptions=True)

    admitted = [r for r in results if isinstance(r, pb.AdmitTurnResponse)]
    assert len(admitted) == 1
    winner = admitted[0].lease.turn_id
    assert not admitted[0].replayed
    losers = [r for r in results if not isinstance(r, pb.AdmitTurnResponse)]
    assert len(losers) == CONTENDERS - 1
    for loser in losers:
        assert isinstance(loser, grpc.aio.AioRpcError), loser
        refusal = refusal_of(loser)
        assert_reason(refusal, "SESSION_TURN_IN_USE", admission=True)
        assert refusal.admission is not None
        assert refusal.admission.active_turn_id == winner
    current = await snapshot(client, session)
    assert (current.phase, current.active.turn_id) == (pb.SESSION_PHASE_RUNNING, winner)
    assert current.seq == head + 1  # one event: the winner's turn_admitted


async def test_i3_concurrent_replays_of_one_admission_give_one_turn_and_the_same_lease(
    server: TurngateServer, client: Client, session: pb.SessionRef
) -> None:
    with gated(server, Gate(session, {Admit: 5})) as gate:
        calls = [asyncio.create_task(admit(client, session, "t1", "r1")) for _ in range(20)]
        await gate.wait_full()
        gate.open()
        results = await asyncio.gather(*calls)

    assert [r.replayed for r in results].count(False) == 1
    assert len({r.SerializeToString(deterministic=True) for r in results if r.replayed}) == 1
    assert len({(r.lease.generation, r.lease_expires_at.ToMicroseconds()) for r in results}) == 1
    assert (await snapshot(client, session)).seq == 1


async def test_i5_heartbeat_decided_before_stop_commits_retries_and_answers_stop(
    server: TurngateServer, client: Client, session: pb.SessionRef
) -> None:
    lease = (await admit(client, session)).lease
    with gated(server, Gate(session, {Heartbeat: 1})) as gate:
        beat = asyncio.create_task(heartbeat(client, lease))
        await gate.wait_full()  # the heartbeat decided CONTINUE on the running turn
        stopped = await stop(client, session, "t1")
        gate.open()
        answer = await beat

    assert stopped.cancelled.stopping_turn_id == "t1"
    # Its compare-and-set lost to the Stop: decided again, it is told to stop.
    assert answer.directive == pb.DIRECTIVE_STOP
    assert answer.stop_deadline == stopped.cancelled.stop_deadline
    await complete(client, lease, pb.TURN_OUTCOME_CANCELLED)
    await _one_settlement(client, session, pb.TURN_OUTCOME_CANCELLED, pb.SETTLED_BY_RUNNER)


async def test_i5_stop_decided_before_heartbeat_commits_retries_and_still_stops_the_turn(
    server: TurngateServer, client: Client, session: pb.SessionRef
) -> None:
    lease = (await admit(client, session)).lease
    with gated(server, Gate(session, {Cancel: 1})) as gate:
        stopping = asyncio.create_task(stop(client, session, "t1"))
        await gate.wait_full()
        answer = await heartbeat(client, lease)
        gate.open()
        stopped = await stopping

    assert answer.directive == pb.DIRECTIVE_CONTINUE
    assert stopped.cancelled.stopping_turn_id == "t1"
    assert (await heartbeat(client, lease)).directive == pb.DIRECTIVE_STOP
    await complete(client, lease, pb.TURN_OUTCOME_CANCELLED)
    await _one_settlement(client, session, pb.TURN_OUTCOME_CANCELLED, pb.SETTLED_BY_RUNNER)


async def test_i6_complete_decided_before_forced_stop_commits_gets_the_recorded_cancellation(
    server: TurngateServer, client: Client, session: pb.SessionRef
) -> None:
    lease = (await admit(client, session)).lease
    with gated(server, Gate(session, {Complete: 1})) as gate:
        completing = asyncio.create_task(complete(client, lease))
        await gate.wait_full()  # the runner decided COMPLETED
        stopped = await stop(client, session, "t1", force=True)
        gate.open()
        completed = await completing

    assert stopped.cancelled.settled
    assert not completed.recorded
    assert (completed.turn.outcome, completed.turn.settled_by) == (
        pb.TURN_OUTCOME_CANCELLED,
        pb.SETTLED_BY_GATEWAY,
    )
    await _one_settlement(client, session, pb.TURN_OUTCOME_CANCELLED, pb.SETTLED_BY_GATEWAY)


async def test_i6_forced_stop_decided_before_complete_commits_finds_the_turn_completed(
    server: TurngateServer, client: Client, session: pb.SessionRef
) -> None:
    lease = (await admit(client, session)).lease
    with gated(server, Gate(session, {Cancel: 1})) as gate:
        stopping = asyncio.create_task(stop(client, session, "t1", force=True))
        await gate.wait_full()  # the gateway decided to settle it CANCELLED
        completed = await complete(client, lease)
        gate.open()
        stopped = await stopping

    assert completed.recorded
    assert stopped.WhichOneof("outcome") == "idle"
    assert stopped.idle.expected_outcome == pb.TURN_OUTCOME_COMPLETED
    await _one_settlement(client, session, pb.TURN_OUTCOME_COMPLETED, pb.SETTLED_BY_RUNNER)


async def test_i6_two_watchdog_sweeps_racing_a_late_complete_settle_the_turn_lost_exactly_once(
    fast_server: TurngateServer, fast_client: Client, session: pb.SessionRef
) -> None:
    admitted = await admit(fast_client, session, lease_ttl=1.0)
    # Held too: the server's own watchdog, should it get there first.
    with gated(fast_server, Gate(session, {Expire: 2, Complete: 1})) as gate:
        await sleep_past(admitted.lease_expires_at)
        watchdog = Watchdog(fast_server.store)  # two sweeps at once, as two replicas would
        sweeps = [asyncio.create_task(watchdog.sweep()) for _ in range(2)]
        late = asyncio.create_task(complete(fast_client, admitted.lease))
        await gate.wait_full()  # each contender decided to settle the expired turn LOST
        gate.open()
        swept = await asyncio.gather(*sweeps)
        completed = await late

    assert sum(swept) <= 1  # the server's watchdog may have been the one
    assert not completed.recorded
    assert (completed.turn.outcome, completed.turn.settled_by) == (
        pb.TURN_OUTCOME_LOST,
        pb.SETTLED_BY_WATCHDOG,
    )
    await _one_settlement(fast_client, session, pb.TURN_OUTCOME_LOST, pb.SETTLED_BY_WATCHDOG)


async def test_i12_two_resolutions_decided_together_first_wins_other_interaction_not_pending(
    server: TurngateServer, client: Client, session: pb.SessionRef
) -> None:
    lease = (await admit(client, session)).lease
    await record_interaction(client, lease, "i1")
    with gated(server, Gate(session, {ResolveInteraction: 2})) as gate:
        answers = [asyncio.create_task(resolve(client, session, "i1", text)) for text in ("yes", "no")]
        await gate.wait_full()  # both decided to resolve the pending interaction
        gate.open()
        results = await asyncio.gather(*answers, return_exceptions=True)

    (won,) = [r for r in results if isinstance(r, pb.ResolveInteractionResponse)]
    (lost,) = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
    assert_reason(refusal_of(lost), "INTERACTION_NOT_PENDING")
    assert won.interaction.status == pb.INTERACTION_STATUS_RESOLVED
    (recorded,) = (await get_turn(client, session, "t1")).interactions
    assert (recorded.status, recorded.resolution) == (
        pb.INTERACTION_STATUS_RESOLVED,
        won.interaction.resolution,
    )
    assert_reason(await refused(resolve(client, session, "i1", "again")), "INTERACTION_NOT_PENDING")
