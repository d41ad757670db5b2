"""CancelTurn through real gRPC calls: guarded Stop (I4), Stop as a request (I5), force, unguarded
Stop, request_id replay, stop-grace expiry, one terminal outcome (I6) and TURN_CANCELLED.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.support.calls import (
    admission_refused,
    admit,
    advance_store_clock,
    complete,
    events_after,
    get_turn,
    heartbeat,
    kinds,
    record_call,
    record_interaction,
    settlements,
    snapshot,
    state_of,
    stop,
    wait_for_phase,
)
from tests.support.servers import Client
from tests.support.waiting import WAIT_TIMEOUT_S
from turngate.v1 import turngate_pb2 as pb

TOMBSTONE_TTL_S = 600  # the `server` fixture's default: how long tombstones and request ids are kept


async def test_i4_stop_before_start_tombstones_the_turn_refused_turn_cancelled_active_untouched(
    client: Client, session: pb.SessionRef
) -> None:
    lease = (await admit(client, session, "t1", "r1")).lease
    active_before = (await snapshot(client, session)).active
    turn_before = await get_turn(client, session, "t1")

    answer = await stop(client, session, "t-next", reason="user changed their mind")

    assert answer.cancelled == pb.CancelTurnResponse.Cancelled(
        cancelled_turn_ids=["t-next"], before_start=True, active_turn_id="t1"
    )
    (event,) = await events_after(client, session, 1)
    assert event.stop_requested == pb.StopRequested(
        turn_id="t-next", reason="user changed their mind", before_start=True
    )
    after = await snapshot(client, session)
    assert (after.phase, after.active) == (pb.SESSION_PHASE_RUNNING, active_before)
    assert await get_turn(client, session, "t1") == turn_before
    assert (await heartbeat(client, lease)).directive == pb.DIRECTIVE_CONTINUE
    # Refused while another turn holds the session, and also once it is idle.
    refusal = await admission_refused(client, session, "t-next", "r2", "TURN_CANCELLED")
    assert not refusal.HasField("retry_after")
    await complete(client, lease)
    await admission_refused(client, session, "t-next", "r2", "TURN_CANCELLED")
    assert (await snapshot(client, session)).phase == pb.SESSION_PHASE_IDLE


async def test_i4_repeated_stop_before_start_gives_the_same_answer_and_no_new_event(
    client: Client, session: pb.SessionRef
) -> None:
    first = await stop(client, session, "t-next")
    head = (await snapshot(client, session)).seq

    assert await stop(client, session, "t-next") == first
    assert (await snapshot(client, session)).seq == head == 1


async def test_i4_a_tombstone_is_forgotten_after_tombstone_ttl_then_the_turn_may_start(
    embedded_client: Client, session: pb.SessionRef, monkeypatch: pytest.MonkeyPatch
) -> None:
    await stop(embedded_client, session, "t-next")
    await admission_refused(embedded_client, session, "t-next", "r1", "TURN_CANCELLED")

    advance_store_clock(monkeypatch, TOMBSTONE_TTL_S + 1)

    admitted = await admit(embedded_client, session, "t-next", "r1")
    assert not admitted.replayed
    await complete(embedded_client, admitted.lease)


async def test_i4_stop_of_an_ended_turn_while_another_runs_is_mismatch_and_changes_nothing(
    client: Client, session: pb.SessionRef
) -> None:
    await complete(client, (await admit(client, session, "t1")).lease)
    await admit(client, session, "t2")
    before = await state_of(client, session, "t1", "t2")

    answer = await stop(client, session, "t1", force=True)

    assert answer.mismatch == pb.CancelTurnResponse.Mismatch(
        expected_turn_id="t1",
        current_turn_id="t2",
        current_phase=pb.TURN_PHASE_RUNNING,
        expected_outcome=pb.TURN_OUTCOME_COMPLETED,
    )
    assert await state_of(client, session, "t1", "t2") == before


async def test_i4_stop_of_an_ended_turn_while_idle_is_idle_with_its_outcome(
    client: Client, session: pb.SessionRef
) -> None:
    await complete(client, (await admit(client, session, "t1")).lease, pb.TURN_OUTCOME_FAILED)
    before = await state_of(client, session, "t1")

    answer = await stop(client, session, "t1")

    assert answer.idle == pb.CancelTurnResponse.Idle(
        expected_turn_id="t1",
        expected_outcome=pb.TURN_OUTCOME_FAILED,
        last_turn_id="t1",
        last_outcome=pb.TURN_OUTCOME_FAILED,
    )
    assert await state_of(client, session, "t1") == before


async def test_i5_stop_moves_the_turn_to_stopping_cancels_pending_and_tells_runner_and_watchers(
    client: Client, session: pb.SessionRef
) -> None:
    lease = (await admit(client, session, "t1")).lease
    await record_interaction(client, lease, "i1")
    head = (await snapshot(client, session)).seq
    watch = client.sessions.WatchSession(pb.WatchSessionRequest(session=session, after_seq=head))
    try:
        answer = (await stop(client, session, "t1", reason="too slow")).cancelled
        pushed: list[pb.SessionEvent] = []
        async with asyncio.timeout(WAIT_TIMEOUT_S):
            async for response in watch:
                pushed.append(response.event)
                if len(pushed) == 2:
                    break
    finally:
        watch.cancel()

    assert (list(answer.cancelled_turn_ids), answer.stopping_turn_id) == (["t1"], "t1")
    assert (answer.settled, answer.before_start, list(answer.cancelled_interaction_ids)) == (
        False,
        False,
        ["i1"],
    )
    assert kinds(pushed) == ["stop_requested", "interaction"]
    assert pushed[0].stop_requested == pb.StopRequested(
        turn_id="t1", generation=lease.generation, reason="too slow", deadline=answer.stop_deadline
    )
    assert pushed[1].interaction.interaction.status == pb.INTERACTION_STATUS_CANCELLED
    beat = await heartbeat(client, lease)
    assert (beat.directive, beat.stop_reason, beat.stop_deadline) == (
        pb.DIRECTIVE_STOP,
        "too slow",
        answer.stop_deadline,
    )
    current = await snapshot(client, session)
    assert (current.phase, current.active.phase, current.active.stop_requested) == (
        pb.SESSION_PHASE_STOPPING,
        pb.TURN_PHASE_STOPPING,
        True,
    )


async def test_i5_repeated_stop_of_a_stopping_turn_gives_the_same_answer_and_no_new_event(
    client: Client, session: pb.SessionRef
) -> None:
    lease = (await admit(client, session, "t1")).lease
    await record_interaction(client, lease, "i1")
    first = await stop(client, session, "t1")
    before = await state_of(client, session, "t1")

    assert await stop(client, session, "t1") == first
    assert await stop(client, session, "", reason="other reason") == first
    assert await state_of(client, session, "t1") == before


async def test_i5_force_settles_the_turn_cancelled_by_gateway_at_once(
    client: Client, session: pb.SessionRef
) -> None:
    lease = (await admit(client, session, "t1")).lease
    await record_call(client, lease, "c1")
    await record_interaction(client, lease, "i1")
    head = (await snapshot(client, session)).seq

    answer = (await stop(client, session, "t1", force=True)).cancelled

    assert (answer.settled, answer.stopping_turn_id, list(answer.cancelled_interaction_ids)) == (
        True,
        "",
        ["i1"],
    )
    assert not answer.HasField("stop_deadline")
    events = await events_after(client, session, head)
    assert kinds(events) == ["stop_requested", "interaction", "tool_call", "turn_settled"]
    assert events[0].stop_requested.force
    (settled,) = settlements(events)
    assert (settled.turn.outcome, settled.turn.settled_by, settled.turn.stop_requested) == (
        pb.TURN_OUTCOME_CANCELLED,
        pb.SETTLED_BY_GATEWAY,
        True,
    )
    assert list(settled.interrupted_tool_call_ids) == ["c1"]
    beat = await heartbeat(client, lease)
    assert (beat.directive, beat.settled_outcome) == (pb.DIRECTIVE_ABANDON, pb.TURN_OUTCOME_CANCELLED)
    assert (await snapshot(client, session)).phase == pb.SESSION_PHASE_IDLE


async def test_i5_force_after_a_plain_stop_escalates_with_a_second_stop_requested_then_settles(
    client: Client, session: pb.SessionRef
) -> None:
    await admit(client, session, "t1")
    plain = (await stop(client, session, "t1")).cancelled

    forced = (await stop(client, session, "t1", force=True)).cancelled

    assert (plain.settled, forced.settled) == (False, True)
    events = await events_after(client, session, 1)
    assert kinds(events) == ["stop_requested", "stop_requested", "turn_settled"]
    assert [e.stop_requested.force for e in events[:2]] == [False, True]
    assert events[2].turn_settled.turn.settled_by == pb.SETTLED_BY_GATEWAY


async def test_unguarded_stop_stops_whatever_turn_is_active(client: Client, session: pb.SessionRef) -> None:
    await admit(client, session, "t1")

    answer = (await stop(client, session)).cancelled

    assert (list(answer.cancelled_turn_ids), answer.stopping_turn_id) == (["t1"], "t1")
    assert (await snapshot(client, session)).phase == pb.SESSION_PHASE_STOPPING


async def test_unguarded_stop_of_an_idle_session_is_idle_naming_the_last_turn_and_changes_nothing(
    client: Client, session: pb.SessionRef
) -> None:
    assert (await stop(client, session)).idle == pb.CancelTurnResponse.Idle()
    assert (await snapshot(client, session)).seq == 0
    await complete(client, (await admit(client, session, "t1")).lease)
    before = await state_of(client, session, "t1")

    answer = await stop(client, session, force=True)

    assert answer.idle == pb.CancelTurnResponse.Idle(
        last_turn_id="t1", last_outcome=pb.TURN_OUTCOME_COMPLETED
    )
    assert await state_of(client, session, "t1") == before


async def test_stop_request_id_replay_returns_the_first_answer_and_changes_nothing(
    client: Client, session: pb.SessionRef
) -> None:
    await admit(client, session, "t1")
    first = await stop(client, session, "t1", request_id="req-1")
    await stop(client, session, "t1", force=True)
    await admit(client, session, "t2")
    before = await state_of(client, session, "t1", "t2")

    # A retry whose other fields differ: still the first answer, and t2 is not touched.
    retried = await stop(client, session, "", force=True, request_id="req-1")

    assert retried == first
    assert first.cancelled.stopping_turn_id == "t1"
    assert await state_of(client, session, "t1", "t2") == before


async def test_stop_request_id_is_forgotten_after_tombstone_ttl_then_decided_afresh(
    embedded_client: Client, session: pb.SessionRef, monkeypatch: pytest.MonkeyPatch
) -> None:
    lease = (await admit(embedded_client, session, "t1")).lease
    first = await stop(embedded_client, session, "t1", request_id="req-1")
    await complete(embedded_client, lease, pb.TURN_OUTCOME_CANCELLED)

    advance_store_clock(monkeypatch, TOMBSTONE_TTL_S + 1)

    assert first.WhichOneof("outcome") == "cancelled"
    later = await stop(embedded_client, session, request_id="req-1")
    assert later.idle == pb.CancelTurnResponse.Idle(last_turn_id="t1", last_outcome=pb.TURN_OUTCOME_CANCELLED)


async def test_stop_grace_expiry_settles_the_turn_cancelled_by_watchdog(
    fast_client: Client, session: pb.SessionRef
) -> None:
    lease = (await admit(fast_client, session, lease_ttl=30.0)).lease
    await record_call(fast_client, lease, "c1")
    await stop(fast_client, session, "t1")

    settled_session = await wait_for_phase(fast_client, session, pb.SESSION_PHASE_IDLE)

    last = settled_session.last_settled
    assert (last.turn_id, last.outcome, last.settled_by, last.stop_requested) == (
        "t1",
        pb.TURN_OUTCOME_CANCELLED,
        pb.SETTLED_BY_WATCHDOG,
        True,
    )
    (settled,) = settlements(await events_after(fast_client, session, 1))
    assert list(settled.interrupted_tool_call_ids) == ["c1"]
    late = await complete(fast_client, lease)
    assert (late.recorded, late.turn) == (False, last)
    beat = await heartbeat(fast_client, lease)
    assert (beat.directive, beat.settled_outcome) == (pb.DIRECTIVE_ABANDON, pb.TURN_OUTCOME_CANCELLED)


async def test_i6_a_second_report_gets_the_recorded_outcome_not_an_error_nor_a_second_event(
    client: Client, session: pb.SessionRef
) -> None:
    lease = (await admit(client, session, "t1")).lease
    first = await complete(client, lease, pb.TURN_OUTCOME_COMPLETED)
    head = (await snapshot(client, session)).seq

    second = await complete(client, lease, pb.TURN_OUTCOME_FAILED, "too late")

    assert (first.recorded, second.recorded) == (True, False)
    assert second.turn == first.turn
    assert (first.turn.outcome, first.turn.settled_by) == (pb.TURN_OUTCOME_COMPLETED, pb.SETTLED_BY_RUNNER)
    assert (await snapshot(client, session)).seq == head
    assert len(settlements(await events_after(client, session, 1))) == 1


async def test_i6_a_stopping_turn_may_settle_with_any_outcome_and_keeps_stop_requested(
    client: Client, session: pb.SessionRef
) -> None:
    lease = (await admit(client, session, "t1")).lease
    await stop(client, session, "t1", reason="enough")

    done = await complete(client, lease, pb.TURN_OUTCOME_COMPLETED)

    assert done.recorded
    assert (done.turn.outcome, done.turn.stop_requested, done.turn.stop_reason) == (
        pb.TURN_OUTCOME_COMPLETED,
        True,
        "enough",
    )
    assert (await get_turn(client, session, "t1")).outcome == pb.TURN_OUTCOME_COMPLETED
