"""Tool calls and interactions through real gRPC calls: nothing left open (I7), late approval
refused (I12, INTERACTION_NOT_PENDING), idempotent records, LIMIT_EXCEEDED and history reads.
"""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest

from tests.support.calls import (
    admit,
    assert_reason,
    complete,
    events_after,
    freeze_store_clock,
    get_turn,
    heartbeat,
    record_call,
    record_interaction,
    refused,
    resolve,
    settlements,
    snapshot,
    state_of,
    stop,
)
from tests.support.servers import Client
from turngate.v1 import turngate_pb2 as pb

MAX_PENDING_INTERACTIONS = 256


@pytest.mark.parametrize("settled_by", ["runner_after_stop", "forced_stop"])
async def test_i7_parallel_tool_calls_finished_before_stop_keep_their_status_only_open_ones_interrupted(
    client: Client, session: pb.SessionRef, settled_by: str
) -> None:
    lease = (await admit(client, session, "t1")).lease
    await asyncio.gather(*(record_call(client, lease, c) for c in ("c1", "c2", "c3", "c4")))
    await asyncio.gather(
        record_call(client, lease, "c1", pb.TOOL_CALL_STATUS_SUCCEEDED),
        record_call(client, lease, "c2", pb.TOOL_CALL_STATUS_FAILED, "timeout"),
        record_call(client, lease, "c5", pb.TOOL_CALL_STATUS_SUCCEEDED),  # recorded only when done
    )
    head = (await snapshot(client, session)).seq

    if settled_by == "forced_stop":
        await stop(client, session, "t1", force=True)
    else:
        await stop(client, session, "t1")
        await complete(client, lease, pb.TURN_OUTCOME_CANCELLED)

    events = await events_after(client, session, head)
    (settled,) = settlements(events)
    assert sorted(settled.interrupted_tool_call_ids) == ["c3", "c4"]
    interrupted = [e.tool_call.tool_call for e in events if e.HasField("tool_call")]
    assert sorted((c.call_id, c.status) for c in interrupted) == [
        ("c3", pb.TOOL_CALL_STATUS_INTERRUPTED),
        ("c4", pb.TOOL_CALL_STATUS_INTERRUPTED),
    ]
    calls = {c.call_id: c for c in (await get_turn(client, session, "t1")).tool_calls}
    assert {c: (call.status, call.error) for c, call in calls.items()} == {
        "c1": (pb.TOOL_CALL_STATUS_SUCCEEDED, ""),
        "c2": (pb.TOOL_CALL_STATUS_FAILED, "timeout"),
        "c3": (pb.TOOL_CALL_STATUS_INTERRUPTED, ""),
        "c4": (pb.TOOL_CALL_STATUS_INTERRUPTED, ""),
        "c5": (pb.TOOL_CALL_STATUS_SUCCEEDED, ""),
    }
    assert all(call.HasField("closed_at") for call in calls.values())


async def test_i7_a_refused_record_never_interrupts_a_tool_call(
    client: Client, session: pb.SessionRef
) -> None:
    lease = (await admit(client, session, "t1")).lease
    await record_call(client, lease, "c1")
    stale = pb.TurnLease(session=session, turn_id="t1", generation=lease.generation + 1)
    before = await state_of(client, session, "t1")

    assert_reason(
        await refused(record_call(client, stale, "c1", pb.TOOL_CALL_STATUS_FAILED, "runner crashed")),
        "TURN_NOT_ACTIVE",
    )

    assert await state_of(client, session, "t1") == before
    (call,) = (await get_turn(client, session, "t1")).tool_calls
    assert call.status == pb.TOOL_CALL_STATUS_OPEN


async def test_tool_call_records_are_idempotent_and_the_first_close_wins(
    client: Client, session: pb.SessionRef
) -> None:
    lease = (await admit(client, session, "t1")).lease
    opened = await record_call(client, lease, "c1")
    closed = await record_call(client, lease, "c1", pb.TOOL_CALL_STATUS_SUCCEEDED)
    head = (await snapshot(client, session)).seq

    repeats = [
        await record_call(client, lease, "c1", pb.TOOL_CALL_STATUS_FAILED, "flaky"),
        await record_call(client, lease, "c1", pb.TOOL_CALL_STATUS_SUCCEEDED),
        await record_call(client, lease, "c1"),
    ]

    assert (opened.recorded, closed.recorded) == (True, True)
    assert closed.tool_call.status == pb.TOOL_CALL_STATUS_SUCCEEDED
    assert [(r.recorded, r.tool_call.status) for r in repeats] == [(False, pb.TOOL_CALL_STATUS_SUCCEEDED)] * 3
    assert (await snapshot(client, session)).seq == head


async def test_interaction_records_are_idempotent(client: Client, session: pb.SessionRef) -> None:
    lease = (await admit(client, session, "t1")).lease
    first = await record_interaction(client, lease, "i1")
    head = (await snapshot(client, session)).seq

    again = await record_interaction(client, lease, "i1")

    assert (first.recorded, again.recorded) == (True, False)
    assert again.interaction == first.interaction
    assert first.interaction.status == pb.INTERACTION_STATUS_PENDING
    assert (await snapshot(client, session)).seq == head


async def test_i12_interaction_cancelled_by_stop_then_resolution_refused_interaction_not_pending(
    client: Client, session: pb.SessionRef
) -> None:
    lease = (await admit(client, session, "t1")).lease
    await record_interaction(client, lease, "i1")
    answer = await stop(client, session, "t1")
    assert list(answer.cancelled.cancelled_interaction_ids) == ["i1"]
    before = await state_of(client, session, "t1")

    assert_reason(await refused(resolve(client, session, "i1")), "INTERACTION_NOT_PENDING")

    assert await state_of(client, session, "t1") == before
    # No new approval card after a Stop: recorded already cancelled, so it cannot be answered.
    late = await record_interaction(client, lease, "i2")
    assert (late.recorded, late.interaction.status) == (True, pb.INTERACTION_STATUS_CANCELLED)
    assert_reason(await refused(resolve(client, session, "i2")), "INTERACTION_NOT_PENDING")
    asked = (await get_turn(client, session, "t1")).interactions
    assert [(i.interaction_id, i.status) for i in asked] == [
        ("i1", pb.INTERACTION_STATUS_CANCELLED),
        ("i2", pb.INTERACTION_STATUS_CANCELLED),
    ]


async def test_i12_first_resolution_wins_a_second_is_refused_interaction_not_pending(
    client: Client, session: pb.SessionRef
) -> None:
    lease = (await admit(client, session, "t1")).lease
    await record_interaction(client, lease, "i1")

    first = await resolve(client, session, "i1", "approve")
    assert_reason(await refused(resolve(client, session, "i1", "deny")), "INTERACTION_NOT_PENDING")

    assert (first.turn_id, first.interaction.status, first.interaction.resolution) == (
        "t1",
        pb.INTERACTION_STATUS_RESOLVED,
        "approve",
    )
    (asked,) = (await get_turn(client, session, "t1")).interactions
    assert (asked.status, asked.resolution) == (pb.INTERACTION_STATUS_RESOLVED, "approve")
    await complete(client, lease)
    (settled,) = settlements(await events_after(client, session, 1))
    assert list(settled.cancelled_interaction_ids) == []


async def test_i12_resolving_an_unknown_or_an_earlier_turns_interaction_is_interaction_not_pending(
    client: Client, session: pb.SessionRef
) -> None:
    earlier = (await admit(client, session, "t1")).lease
    await record_interaction(client, earlier, "i1")
    await complete(client, earlier)
    await admit(client, session, "t2")
    before = await state_of(client, session, "t1", "t2")

    for interaction_id in ("i1", "never-asked"):
        assert_reason(await refused(resolve(client, session, interaction_id)), "INTERACTION_NOT_PENDING")

    assert await state_of(client, session, "t1", "t2") == before


async def test_pending_interactions_over_the_limit_are_refused_limit_exceeded_and_change_nothing(
    client: Client, session: pb.SessionRef
) -> None:
    lease = (await admit(client, session, "t1")).lease
    for n in range(MAX_PENDING_INTERACTIONS):
        await record_interaction(client, lease, f"i{n}")
    before = await state_of(client, session, "t1")

    refusal = await refused(record_interaction(client, lease, "one-too-many"))

    assert_reason(refusal, "LIMIT_EXCEEDED")
    assert refusal.info is not None
    assert refusal.info.metadata["limit"] == "pending_interactions"
    assert await state_of(client, session, "t1") == before
    await resolve(client, session, "i0")
    assert (await record_interaction(client, lease, "one-too-many")).recorded


async def test_get_turn_of_a_turn_never_admitted_is_not_found(client: Client, session: pb.SessionRef) -> None:
    await stop(client, session, "t-never")  # tombstoned: known to the session, never admitted

    for turn_id in ("t-never", "t-unknown"):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await get_turn(client, session, turn_id)
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND


async def test_get_turn_of_the_active_turn_shows_its_live_lease_and_records(
    client: Client, session: pb.SessionRef
) -> None:
    admitted = await admit(client, session, "t1", "r1")
    await record_call(client, admitted.lease, "c1")
    await record_interaction(client, admitted.lease, "i1")

    turn = await get_turn(client, session, "t1")

    assert (turn.turn_id, turn.runner_id, turn.generation, turn.phase) == (
        "t1",
        "r1",
        admitted.lease.generation,
        pb.TURN_PHASE_RUNNING,
    )
    assert turn.lease_expires_at == admitted.lease_expires_at
    assert [(c.call_id, c.status) for c in turn.tool_calls] == [("c1", pb.TOOL_CALL_STATUS_OPEN)]
    assert [(i.interaction_id, i.status) for i in turn.interactions] == [
        ("i1", pb.INTERACTION_STATUS_PENDING)
    ]


async def test_get_turn_of_the_active_turn_shows_the_lease_its_last_heartbeat_gave(
    embedded_client: Client, session: pb.SessionRef, monkeypatch: pytest.MonkeyPatch
) -> None:
    second = 1_000_000_000
    whole = time.time_ns() // second * second
    freeze_store_clock(monkeypatch, whole + second // 2)  # admitted half-way through a second
    lease = (await admit(embedded_client, session, "t1")).lease
    freeze_store_clock(monkeypatch, whole + second)  # extended to a whole second

    beat = await heartbeat(embedded_client, lease)

    assert beat.lease_expires_at.nanos == 0
    assert (await get_turn(embedded_client, session, "t1")).lease_expires_at == beat.lease_expires_at
    assert (await snapshot(embedded_client, session)).active.lease_expires_at == beat.lease_expires_at


async def test_list_turns_pages_newest_first_without_records(client: Client, session: pb.SessionRef) -> None:
    for turn_id in ("t1", "t2", "t3"):
        lease = (await admit(client, session, turn_id)).lease
        await record_call(client, lease, "c1")
        await complete(client, lease)

    pages: list[list[str]] = []
    token = ""
    while True:
        request = pb.ListTurnsRequest(session=session, page_size=2, page_token=token)
        page = await client.sessions.ListTurns(request)
        pages.append([t.turn_id for t in page.turns])
        assert not any(t.tool_calls for t in page.turns)
        if not (token := page.next_page_token):
            break

    assert pages == [["t3", "t2"], ["t1"]]


async def test_a_turns_record_carries_the_trace_id_of_the_request_that_admitted_it(
    client: Client, session: pb.SessionRef
) -> None:
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    traced = pb.AdmitTurnRequest(session=session, turn_id="t1", runner_id="r1")
    lease = (
        await client.admission.AdmitTurn(
            traced, metadata=(("traceparent", f"00-{trace_id}-00f067aa0ba902b7-01"),)
        )
    ).lease
    assert (await snapshot(client, session)).active.trace_id == trace_id
    await complete(client, lease)
    assert (await get_turn(client, session, "t1")).trace_id == trace_id
    listed = await client.sessions.ListTurns(pb.ListTurnsRequest(session=session))
    assert [turn.trace_id for turn in listed.turns] == [trace_id]

    untraced = (await admit(client, session, "t2")).lease
    assert (await snapshot(client, session)).active.trace_id == ""
    await complete(client, untraced)
