"""AdmitTurn, leases and fencing through real gRPC calls: I1, I2, I3, I8, I10 and the admission
refusals (SESSION_TURN_IN_USE, SESSION_STOPPING, TURN_OWNED_BY_OTHER_RUNNER, TURN_ALREADY_SETTLED,
TURN_NOT_ACTIVE), each with its gRPC code, ErrorInfo, AdmissionRefusal and RetryInfo.
"""

from __future__ import annotations

import time

import pytest

from tests.support.calls import (
    Gate,
    admission_refused,
    admit,
    advance_store_clock,
    assert_reason,
    complete,
    events_after,
    gated,
    get_turn,
    heartbeat,
    kinds,
    record_call,
    record_interaction,
    refused,
    settlements,
    sleep_past,
    snapshot,
    state_of,
    stop,
    wait_for_phase,
)
from tests.support.servers import Client
from turngate.service.core import Expire
from turngate.service.server import TurngateServer
from turngate.v1 import turngate_pb2 as pb

LEASE_S = 20  # the `server` fixture's default lease


async def test_i1_admission_while_a_turn_runs_is_refused_session_turn_in_use_and_changes_nothing(
    client: Client, session: pb.SessionRef
) -> None:
    first = await admit(client, session, "t1", "r1")
    before = await state_of(client, session, "t1")

    refusal = await refused(admit(client, session, "t2", "r2"))

    assert_reason(refusal, "SESSION_TURN_IN_USE", admission=True)
    assert refusal.admission is not None
    assert refusal.retry is not None
    assert refusal.info is not None
    assert refusal.admission.active_turn_id == "t1"
    assert refusal.admission.active_phase == pb.TURN_PHASE_RUNNING
    assert refusal.admission.active_lease_expires_at == first.lease_expires_at
    # Retry when the session changes without help at the latest: at the lease's end.
    assert 0 < refusal.admission.retry_after.ToMicroseconds() <= LEASE_S * 1_000_000
    assert refusal.retry.retry_delay == refusal.admission.retry_after
    assert refusal.info.metadata["activeTurnId"] == "t1"
    assert await state_of(client, session, "t1") == before


async def test_i1_session_stopping_refuses_admission_until_the_stopped_turn_settles(
    client: Client, session: pb.SessionRef
) -> None:
    lease = (await admit(client, session, "t1", "r1")).lease
    await stop(client, session, "t1")

    refusal = await admission_refused(client, session, "t2", "r2", "SESSION_STOPPING")

    assert (refusal.active_turn_id, refusal.active_phase) == ("t1", pb.TURN_PHASE_STOPPING)
    # The lease (20 s) ends before the stop grace (30 s): the earlier deadline.
    assert 0 < refusal.retry_after.ToMicroseconds() <= LEASE_S * 1_000_000
    await complete(client, lease, pb.TURN_OUTCOME_CANCELLED)
    admitted = await admit(client, session, "t2", "r2")
    assert admitted.lease.generation > lease.generation


async def test_i2_each_admission_gets_a_strictly_greater_generation(
    client: Client, session: pb.SessionRef
) -> None:
    generations: list[int] = []
    for turn_id in ("t1", "t2", "t3"):
        lease = (await admit(client, session, turn_id)).lease
        generations.append(lease.generation)
        await complete(client, lease)

    assert generations == sorted(set(generations))
    listed = (await client.sessions.ListTurns(pb.ListTurnsRequest(session=session))).turns
    assert [(t.turn_id, t.generation) for t in listed] == [
        ("t3", generations[2]),
        ("t2", generations[1]),
        ("t1", generations[0]),
    ]


async def test_i2_stale_lease_writes_are_abandon_or_turn_not_active_and_change_nothing(
    client: Client, session: pb.SessionRef
) -> None:
    old = (await admit(client, session, "t1")).lease
    await complete(client, old)
    current = (await admit(client, session, "t2")).lease
    await record_call(client, current, "c1")
    # Each pair names a real turn, with another turn's generation.
    forged = (
        pb.TurnLease(session=session, turn_id="t2", generation=old.generation),
        pb.TurnLease(session=session, turn_id="t1", generation=current.generation),
    )
    before = await state_of(client, session, "t1", "t2")

    stale = await heartbeat(client, old)
    assert (stale.directive, stale.settled_outcome) == (pb.DIRECTIVE_ABANDON, pb.TURN_OUTCOME_COMPLETED)
    assert not stale.HasField("lease_expires_at")
    for lease in forged:
        fenced = await heartbeat(client, lease)
        assert (fenced.directive, fenced.settled_outcome) == (
            pb.DIRECTIVE_ABANDON,
            pb.TURN_OUTCOME_UNSPECIFIED,
        )
        assert_reason(await refused(complete(client, lease, pb.TURN_OUTCOME_FAILED)), "TURN_NOT_ACTIVE")
    for lease in (old, *forged):
        assert_reason(
            await refused(record_call(client, lease, "c1", pb.TOOL_CALL_STATUS_SUCCEEDED)), "TURN_NOT_ACTIVE"
        )
        assert_reason(await refused(record_interaction(client, lease, "i1")), "TURN_NOT_ACTIVE")
    late = await complete(client, old, pb.TURN_OUTCOME_FAILED)
    assert (late.recorded, late.turn.outcome) == (False, pb.TURN_OUTCOME_COMPLETED)

    assert await state_of(client, session, "t1", "t2") == before


async def test_i3_admission_replay_returns_the_same_lease_replayed_while_running_and_stopping(
    client: Client, session: pb.SessionRef
) -> None:
    first = await admit(client, session, "t1", "r1")
    head = (await snapshot(client, session)).seq

    again = await admit(client, session, "t1", "r1")
    assert (first.replayed, again.replayed) == (False, True)
    assert (again.lease, again.lease_expires_at, again.heartbeat_interval) == (
        first.lease,
        first.lease_expires_at,
        first.heartbeat_interval,
    )
    await stop(client, session, "t1")
    while_stopping = await admit(client, session, "t1", "r1")
    assert (while_stopping.replayed, while_stopping.lease) == (True, first.lease)

    assert kinds(await events_after(client, session, head)) == ["stop_requested"]
    assert (await heartbeat(client, first.lease)).directive == pb.DIRECTIVE_STOP


async def test_admission_of_an_active_turn_by_another_runner_is_refused_turn_owned_by_other_runner(
    client: Client, session: pb.SessionRef
) -> None:
    await admit(client, session, "t1", "r1")
    before = await state_of(client, session, "t1")

    refusal = await admission_refused(client, session, "t1", "r2", "TURN_OWNED_BY_OTHER_RUNNER")

    assert (refusal.active_turn_id, refusal.active_phase) == ("t1", pb.TURN_PHASE_RUNNING)
    assert not refusal.HasField("retry_after")
    assert await state_of(client, session, "t1") == before


async def test_admission_of_a_settled_turn_is_refused_turn_already_settled_with_its_outcome(
    client: Client, session: pb.SessionRef
) -> None:
    lease = (await admit(client, session, "t1", "r1")).lease
    await complete(client, lease, pb.TURN_OUTCOME_FAILED, "model error")
    before = await state_of(client, session, "t1")

    refusal = await refused(admit(client, session, "t1", "r1"))

    assert_reason(refusal, "TURN_ALREADY_SETTLED", admission=True)
    assert refusal.admission is not None
    assert refusal.info is not None
    assert refusal.admission.settled_outcome == pb.TURN_OUTCOME_FAILED
    assert refusal.info.metadata["settledOutcome"] == "FAILED"
    assert await state_of(client, session, "t1") == before


async def test_i8_lease_expiry_settles_the_turn_lost_by_watchdog_closing_everything_open(
    fast_client: Client, session: pb.SessionRef
) -> None:
    lease = (await admit(fast_client, session, lease_ttl=1.0)).lease
    await record_call(fast_client, lease, "c1")
    await record_interaction(fast_client, lease, "i1")

    settled_session = await wait_for_phase(fast_client, session, pb.SESSION_PHASE_IDLE)

    assert (settled_session.last_settled.outcome, settled_session.last_settled.settled_by) == (
        pb.TURN_OUTCOME_LOST,
        pb.SETTLED_BY_WATCHDOG,
    )
    (settled,) = settlements(await events_after(fast_client, session, 1))
    assert (list(settled.interrupted_tool_call_ids), list(settled.cancelled_interaction_ids)) == (
        ["c1"],
        ["i1"],
    )
    turn = await get_turn(fast_client, session, "t1")
    assert [c.status for c in turn.tool_calls] == [pb.TOOL_CALL_STATUS_INTERRUPTED]
    assert [i.status for i in turn.interactions] == [pb.INTERACTION_STATUS_CANCELLED]


async def test_i8_late_heartbeat_after_lease_expiry_is_told_abandon_with_lost_and_settles_once(
    fast_server: TurngateServer, fast_client: Client, session: pb.SessionRef
) -> None:
    admitted = await admit(fast_client, session, lease_ttl=1.0)
    # The watchdog's settlement is held back: the late heartbeat itself meets the expired lease.
    with gated(fast_server, Gate(session, {Expire: 1})):
        await sleep_past(admitted.lease_expires_at)
        late = await heartbeat(fast_client, admitted.lease)

    assert (late.directive, late.settled_outcome) == (pb.DIRECTIVE_ABANDON, pb.TURN_OUTCOME_LOST)
    assert not late.HasField("lease_expires_at")
    again = await heartbeat(fast_client, admitted.lease)
    assert (again.directive, again.settled_outcome) == (pb.DIRECTIVE_ABANDON, pb.TURN_OUTCOME_LOST)
    (settled,) = settlements(await events_after(fast_client, session, 1))
    assert (settled.turn.outcome, settled.turn.settled_by) == (pb.TURN_OUTCOME_LOST, pb.SETTLED_BY_WATCHDOG)
    assert (await snapshot(fast_client, session)).phase == pb.SESSION_PHASE_IDLE


async def test_i8_admission_after_lease_expiry_is_admitted_without_waiting_for_the_watchdog(
    fast_server: TurngateServer, fast_client: Client, session: pb.SessionRef
) -> None:
    first = await admit(fast_client, session, "t1", lease_ttl=1.0)
    with gated(fast_server, Gate(session, {Expire: 1})):
        await sleep_past(first.lease_expires_at)
        second = await admit(fast_client, session, "t2", "r2", lease_ttl=30.0)

    assert not second.replayed
    events = await events_after(fast_client, session, 1)
    assert kinds(events) == ["turn_settled", "turn_admitted"]
    assert (events[0].turn_settled.turn.turn_id, events[0].turn_settled.turn.outcome) == (
        "t1",
        pb.TURN_OUTCOME_LOST,
    )
    await complete(fast_client, second.lease)


async def test_i10_the_store_clock_alone_decides_lease_expiry_and_generations_never_go_back(
    embedded_server: TurngateServer,
    embedded_client: Client,
    session: pb.SessionRef,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    admitted = await admit(embedded_client, session, "t1")
    record = await get_turn(embedded_client, session, "t1")
    ttl_us = LEASE_S * 1_000_000
    assert admitted.lease_expires_at.ToMicroseconds() == record.admitted_at.ToMicroseconds() + ttl_us
    assert admitted.heartbeat_interval.ToMicroseconds() == ttl_us // 3

    # No wall time passes for the runner and the watchdog is held, yet the lease has ended.
    advance_store_clock(monkeypatch, LEASE_S + 5)
    with gated(embedded_server, Gate(session, {Expire: 1})):
        late = await heartbeat(embedded_client, admitted.lease)
    assert (late.directive, late.settled_outcome) == (pb.DIRECTIVE_ABANDON, pb.TURN_OUTCOME_LOST)
    settled = await get_turn(embedded_client, session, "t1")
    assert settled.settled_at.ToMicroseconds() >= admitted.lease_expires_at.ToMicroseconds()
    assert time.time() < admitted.lease_expires_at.ToSeconds()  # the wall clock is not there yet

    ahead = await admit(embedded_client, session, "t2")
    await complete(embedded_client, ahead.lease)

    # The store clock goes back 25 s: generations still only grow (I2).
    monkeypatch.undo()
    behind = await admit(embedded_client, session, "t3")
    assert behind.lease.generation > ahead.lease.generation
    await complete(embedded_client, behind.lease)
