"""Steering a running turn and editing the queue over gRPC, on every store (docs/design.md §9, rules
S1-S7 and Q8): SteerTurn guarded by the turn it names, the runner's AcknowledgeSteer, each steer's
one end as watchers see it, retries, the bound, requeue and the ENQUEUE fallback, MoveQueuedTurn
guarded by the queue's version; bad input, a caller in the wrong role, and the races a steer or an
edit can lose, forced with the store's before_write hook.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message

from tests.support.calls import (
    Gate,
    Refused,
    admit,
    assert_reason,
    complete,
    enqueue,
    events_after,
    forced,
    gate_for,
    gated,
    get_turn,
    head_of,
    kinds,
    refusal_of,
    refused,
    runner_of,
    seconds,
    settlements,
    sleep_past,
    snapshot,
    state_of,
    stop,
    with_queue,
)
from tests.support.principals import GATEWAY_A, PROJECT_A, RUNNER_A, bearer, client_as
from tests.support.servers import Client
from tests.support.watching import collect, collect_until, watch
from turngate.service.core import Cancel, Complete, MoveQueuedTurn, SteerTurn
from turngate.service.server import TurngateServer
from turngate.v1 import turngate_pb2 as pb

CONTENT = "also check the tests"
# Whose write is held until the other's has committed; "both": both decide on one state and race.
ORDERS = {
    "steer_decided_first": ("steer",),
    "other_decided_first": ("other",),
    "both": ("steer", "other"),
}
# Sessions raced unforced all at once, and callers racing on one session.
UNFORCED_SESSIONS = 10
CONCURRENT_CALLERS = 8


# --- calls -----------------------------------------------------------------------------------


async def steer(
    client: Client,
    session: pb.SessionRef,
    expected_turn_id: str = "t1",
    steer_id: str = "s1",
    content: str = CONTENT,
    *,
    content_type: str = "",
    request_id: str = "",
    fallback: pb.SteerFallback.ValueType = pb.STEER_FALLBACK_UNSPECIFIED,
    requeue: bool = False,
) -> pb.SteerTurnResponse:
    request = pb.SteerTurnRequest(
        session=session,
        expected_turn_id=expected_turn_id,
        steer_id=steer_id,
        content=content,
        content_type=content_type,
        request_id=request_id,
        fallback=fallback,
        requeue_unconsumed=requeue,
    )
    return await client.control.SteerTurn(request)


async def acknowledge(
    client: Client,
    lease: pb.TurnLease,
    steer_id: str = "s1",
    status: pb.SteerStatus.ValueType = pb.STEER_STATUS_CONSUMED,
) -> pb.AcknowledgeSteerResponse:
    request = pb.AcknowledgeSteerRequest(lease=lease, steer_id=steer_id, status=status)
    return await client.admission.AcknowledgeSteer(request)


async def move(
    client: Client,
    session: pb.SessionRef,
    turn_id: str,
    after_turn_id: str = "",
    *,
    expected_version: int | None = None,
    request_id: str = "",
) -> pb.MoveQueuedTurnResponse:
    request = pb.MoveQueuedTurnRequest(
        session=session,
        turn_id=turn_id,
        after_turn_id=after_turn_id,
        expected_queue_version=expected_version,
        request_id=request_id,
    )
    return await client.control.MoveQueuedTurn(request)


async def answer_or_refusal(call: Coroutine[Any, Any, Any]) -> Any:
    """The call's reply, or its refusal: racing callers are judged together afterwards."""
    try:
        return await call
    except grpc.aio.AioRpcError as error:
        return refusal_of(error)


def steer_ends(log: list[pb.SessionEvent]) -> list[tuple[str, int, bool]]:
    """Each steer_ended of the log: the steer, its end, whether it was requeued."""
    return [
        (e.steer_ended.steer_id, e.steer_ended.status, e.steer_ended.requeued)
        for e in log
        if e.HasField("steer_ended")
    ]


def steered_ids(log: list[pb.SessionEvent]) -> list[str]:
    return [e.turn_steered.steer.steer_id for e in log if e.HasField("turn_steered")]


def queue_ids(queue: Any) -> list[str]:
    return [turn.turn_id for turn in queue]


async def running(client: Client, session: pb.SessionRef, turn_id: str = "t1") -> pb.TurnLease:
    return (await admit(client, session, turn_id, runner_of(turn_id))).lease


# --- S1 guarded, S5 pushed -------------------------------------------------------------------


async def test_s1_s5_a_steer_reaches_the_running_turn_it_names_and_every_watcher_sees_it(
    client: Client, session: pb.SessionRef
) -> None:
    lease = await running(client, session)
    head = await head_of(client, session)
    watcher = watch(client, session, after_seq=head)
    runner_watch = watch(client, session, after_seq=head, turn_id="t1")  # the runner's own watch
    try:
        reply = await steer(client, session, content='{"focus": "tests"}', content_type="application/json")
        [seen] = await collect(watcher, 1)
        [runner_seen] = await collect(runner_watch, 1)
    finally:
        watcher.cancel()
        runner_watch.cancel()

    assert reply.WhichOneof("outcome") == "steered"
    assert (reply.steered.turn_id, reply.steered.steer_id, reply.steered.seq) == ("t1", "s1", head + 1)
    assert not reply.steered.replayed
    assert seen == runner_seen
    assert seen.seq == head + 1
    pushed = seen.turn_steered
    assert (pushed.turn_id, pushed.generation) == ("t1", lease.generation)
    assert (pushed.steer.steer_id, pushed.steer.content, pushed.steer.content_type) == (
        "s1",
        '{"focus": "tests"}',
        "application/json",
    )
    assert pushed.expires_at.ToNanoseconds() > seen.time.ToNanoseconds()
    assert list((await snapshot(client, session)).active.pending_steer_ids) == ["s1"]
    [record] = (await get_turn(client, session, "t1")).steers  # GetTurn: its steers, with their status
    assert (record.steer_id, record.status, record.content) == (
        "s1",
        pb.STEER_STATUS_PENDING,
        '{"focus": "tests"}',
    )


async def test_s1_a_steer_with_no_content_type_is_text_plain(client: Client, session: pb.SessionRef) -> None:
    await running(client, session)
    head = await head_of(client, session)
    await steer(client, session)
    [event] = await events_after(client, session, head)
    assert event.turn_steered.steer.content_type == "text/plain"


async def test_s1_a_steer_naming_another_turn_than_the_running_one_is_a_mismatch_and_changes_nothing(
    client: Client, session: pb.SessionRef
) -> None:
    await running(client, session)
    before = await state_of(client, session, "t1")

    reply = await steer(client, session, expected_turn_id="t0")

    assert reply.WhichOneof("outcome") == "mismatch"
    mismatch = reply.mismatch
    assert (mismatch.expected_turn_id, mismatch.reason) == ("t0", pb.ERROR_REASON_ACTIVE_TURN_MISMATCH)
    assert (mismatch.current_turn_id, mismatch.current_phase) == ("t1", pb.TURN_PHASE_RUNNING)
    assert (mismatch.expected_phase, mismatch.expected_outcome) == (
        pb.TURN_PHASE_UNSPECIFIED,
        pb.TURN_OUTCOME_UNSPECIFIED,
    )
    assert await state_of(client, session, "t1") == before


@pytest.mark.parametrize("where", ["stopping", "settled", "never_seen"])
async def test_s1_a_steer_of_a_stopping_settled_or_unknown_turn_is_turn_not_active_and_changes_nothing(
    client: Client, session: pb.SessionRef, where: str
) -> None:
    expected: tuple[str, int, int, int] = ("", pb.TURN_PHASE_UNSPECIFIED, pb.TURN_PHASE_UNSPECIFIED, 0)
    if where != "never_seen":
        lease = await running(client, session)
        if where == "stopping":
            await stop(client, session, "t1")
            expected = ("t1", pb.TURN_PHASE_STOPPING, pb.TURN_PHASE_STOPPING, pb.TURN_OUTCOME_UNSPECIFIED)
        else:
            await complete(client, lease)
            expected = ("", pb.TURN_PHASE_UNSPECIFIED, pb.TURN_PHASE_SETTLED, pb.TURN_OUTCOME_COMPLETED)
    before = await snapshot(client, session)

    reply = await steer(client, session)

    mismatch = reply.mismatch
    assert (mismatch.expected_turn_id, mismatch.reason) == ("t1", pb.ERROR_REASON_TURN_NOT_ACTIVE)
    assert (
        mismatch.current_turn_id,
        mismatch.current_phase,
        mismatch.expected_phase,
        mismatch.expected_outcome,
    ) == expected
    assert await snapshot(client, session) == before


# --- S2 one end per steer --------------------------------------------------------------------


async def test_s2_the_runners_acknowledgement_ends_a_steer_once_and_a_repeat_answers_that_end(
    client: Client, session: pb.SessionRef
) -> None:
    lease = await running(client, session)
    await steer(client, session, steer_id="s1")
    await steer(client, session, steer_id="s2")
    head = await head_of(client, session)
    watcher = watch(client, session, after_seq=head)
    try:
        consumed = await acknowledge(client, lease, "s1", pb.STEER_STATUS_CONSUMED)
        declined = await acknowledge(client, lease, "s2", pb.STEER_STATUS_DECLINED)
        seen = await collect(watcher, 2)
    finally:
        watcher.cancel()
    again = await acknowledge(client, lease, "s1", pb.STEER_STATUS_DECLINED)

    assert (consumed.steer_id, consumed.status, consumed.recorded) == ("s1", pb.STEER_STATUS_CONSUMED, True)
    assert (declined.steer_id, declined.status, declined.recorded) == ("s2", pb.STEER_STATUS_DECLINED, True)
    assert (again.steer_id, again.status, again.recorded) == ("s1", pb.STEER_STATUS_CONSUMED, False)
    assert steer_ends(seen) == [
        ("s1", pb.STEER_STATUS_CONSUMED, False),
        ("s2", pb.STEER_STATUS_DECLINED, False),
    ]
    assert all(e.steer_ended.generation == lease.generation for e in seen)
    assert await head_of(client, session) == head + 2, "the repeat wrote nothing"
    assert list((await snapshot(client, session)).active.pending_steer_ids) == []


async def test_s2_an_acknowledgement_naming_no_steer_of_the_turn_is_steer_not_found(
    client: Client, session: pb.SessionRef
) -> None:
    lease = await running(client, session)
    await steer(client, session)
    before = await state_of(client, session, "t1")

    refusal = await refused(acknowledge(client, lease, "s-none"))

    assert_reason(refusal, "STEER_NOT_FOUND")
    assert await state_of(client, session, "t1") == before


async def test_s2_an_acknowledgement_from_a_lease_that_ended_is_turn_not_active(
    client: Client, session: pb.SessionRef
) -> None:
    lease = await running(client, session)
    await steer(client, session)
    await complete(client, lease)

    assert_reason(await refused(acknowledge(client, lease)), "TURN_NOT_ACTIVE")


async def test_s2_a_turns_settlement_ends_its_pending_steers_unconsumed_in_the_same_write(
    client: Client, session: pb.SessionRef
) -> None:
    lease = await running(client, session)
    await steer(client, session, steer_id="s1")
    await steer(client, session, steer_id="s2")
    await acknowledge(client, lease, "s1")
    head = await head_of(client, session)

    await complete(client, lease)

    log = await events_after(client, session, head)
    assert steer_ends(log) == [("s2", pb.STEER_STATUS_UNCONSUMED, False)]
    [settled] = settlements(log)
    assert list(settled.unconsumed_steer_ids) == ["s2"]


async def test_s2_a_steer_left_unanswered_past_the_steer_wait_ends_expired(
    own_server: Callable[..., Any], session: pb.SessionRef
) -> None:
    async with own_server(steer_wait=1.0) as (_, client):
        lease = await running(client, session)
        head = await head_of(client, session)
        watcher = watch(client, session, after_seq=head)
        try:
            await steer(client, session)
            seen = await collect_until(watcher, lambda event: event.HasField("steer_ended"))
        finally:
            watcher.cancel()
        late = await acknowledge(client, lease)

    assert kinds(seen) == ["turn_steered", "steer_ended"]
    assert steer_ends(seen) == [("s1", pb.STEER_STATUS_EXPIRED, False)]
    assert (late.status, late.recorded) == (pb.STEER_STATUS_EXPIRED, False)


# --- S3 idempotent ---------------------------------------------------------------------------


async def test_s3_a_retry_with_the_request_id_or_the_steer_id_answers_the_first_steer_and_adds_nothing(
    client: Client, session: pb.SessionRef
) -> None:
    await running(client, session)
    first = await steer(client, session, request_id="req-1")
    head = await head_of(client, session)

    by_request = await steer(client, session, request_id="req-1")
    by_steer_id = await steer(client, session)

    for retry in (by_request, by_steer_id):
        assert (retry.steered.turn_id, retry.steered.steer_id, retry.steered.seq) == (
            "t1",
            "s1",
            first.steered.seq,
        )
        assert retry.steered.replayed
    assert await head_of(client, session) == head
    assert list((await snapshot(client, session)).active.pending_steer_ids) == ["s1"]


async def test_s3_a_mismatch_is_not_remembered_a_retry_answers_as_things_are_then(
    client: Client, session: pb.SessionRef
) -> None:
    missed = await steer(client, session, request_id="req-1")
    await running(client, session)

    retried = await steer(client, session, request_id="req-1")

    assert missed.WhichOneof("outcome") == "mismatch"
    assert retried.WhichOneof("outcome") == "steered"
    assert not retried.steered.replayed


# --- S4 bounded ------------------------------------------------------------------------------


async def test_s4_a_turn_takes_at_most_max_steers_per_turn(client: Client, session: pb.SessionRef) -> None:
    await running(client, session)
    for n in range(16):  # TURNGATE_MAX_STEERS_PER_TURN's default
        await steer(client, session, steer_id=f"s{n}")
    head = await head_of(client, session)

    refusal = await refused(steer(client, session, steer_id="s-one-too-many"))

    assert_reason(refusal, "LIMIT_EXCEEDED")
    assert refusal.info is not None
    assert refusal.info.metadata["limit"] == "steers_per_turn"
    assert await head_of(client, session) == head


async def test_s4_content_up_to_max_steer_bytes_of_utf8_is_taken_whole(
    client: Client, session: pb.SessionRef
) -> None:
    await running(client, session)
    head = await head_of(client, session)
    content = "é" * 2048  # 4096 bytes: TURNGATE_MAX_STEER_BYTES's default

    await steer(client, session, content=content)

    [event] = await events_after(client, session, head)
    assert event.turn_steered.steer.content == content


# --- bad input -------------------------------------------------------------------------------


def _steer_request(ref: pb.SessionRef, **fields: Any) -> pb.SteerTurnRequest:
    values: dict[str, Any] = {
        "session": ref,
        "expected_turn_id": "t1",
        "steer_id": "s-bad",
        "content": CONTENT,
    }
    return pb.SteerTurnRequest(**{**values, **fields})


def _acknowledgement(held: pb.TurnLease, **fields: Any) -> pb.AcknowledgeSteerRequest:
    values: dict[str, Any] = {"lease": held, "steer_id": "s1", "status": pb.STEER_STATUS_CONSUMED}
    return pb.AcknowledgeSteerRequest(**{**values, **fields})


def _move_request(ref: pb.SessionRef, **fields: Any) -> pb.MoveQueuedTurnRequest:
    return pb.MoveQueuedTurnRequest(**{"session": ref, "turn_id": "t2", **fields})


BadRequest = Callable[[pb.SessionRef, pb.TurnLease], Message]
BAD_REQUESTS: dict[str, tuple[BadRequest, str]] = {
    "steer-no-session": (lambda s, _: _steer_request(s, session=None), "session"),
    "steer-no-expected-turn": (lambda s, _: _steer_request(s, expected_turn_id=""), "expected_turn_id"),
    "steer-bad-steer-id": (lambda s, _: _steer_request(s, steer_id="has space"), "steer_id"),
    "steer-no-steer-id": (lambda s, _: _steer_request(s, steer_id=""), "steer_id"),
    "steer-content-too-long": (lambda s, _: _steer_request(s, content="x" * 4097), "content"),
    "steer-content-too-long-in-utf8": (lambda s, _: _steer_request(s, content="é" * 2049), "content"),
    "steer-content-nul": (lambda s, _: _steer_request(s, content="a\x00b"), "content"),
    "steer-content-type-too-long": (lambda s, _: _steer_request(s, content_type="t" * 129), "content_type"),
    "steer-bad-request-id": (lambda s, _: _steer_request(s, request_id="has space"), "request_id"),
    "steer-unknown-fallback": (lambda s, _: _steer_request(s, fallback=9), "fallback"),
    "acknowledge-no-lease": (lambda _, lease: _acknowledgement(lease, lease=None), "lease"),
    "acknowledge-no-generation": (
        lambda _, lease: _acknowledgement(pb.TurnLease(session=lease.session, turn_id="t1")),
        "lease.generation",
    ),
    "acknowledge-no-steer-id": (lambda _, lease: _acknowledgement(lease, steer_id=""), "steer_id"),
    "acknowledge-pending": (
        lambda _, lease: _acknowledgement(lease, status=pb.STEER_STATUS_PENDING),
        "status",
    ),
    "acknowledge-unconsumed": (
        lambda _, lease: _acknowledgement(lease, status=pb.STEER_STATUS_UNCONSUMED),
        "status",
    ),
    "acknowledge-no-status": (
        lambda _, lease: _acknowledgement(lease, status=pb.STEER_STATUS_UNSPECIFIED),
        "status",
    ),
    "move-no-session": (lambda s, _: _move_request(s, session=None), "session"),
    "move-no-turn": (lambda s, _: _move_request(s, turn_id=""), "turn_id"),
    "move-after-itself": (lambda s, _: _move_request(s, after_turn_id="t2"), "after_turn_id"),
    "move-bad-after": (lambda s, _: _move_request(s, after_turn_id="has space"), "after_turn_id"),
    "move-negative-version": (
        lambda s, _: _move_request(s, expected_queue_version=-1),
        "expected_queue_version",
    ),
    "move-bad-request-id": (lambda s, _: _move_request(s, request_id="has space"), "request_id"),
}


@pytest.mark.parametrize("case", list(BAD_REQUESTS))
async def test_bad_input_is_invalid_argument_naming_the_field_and_changes_nothing(
    client: Client, session: pb.SessionRef, case: str
) -> None:
    lease = await with_queue(client, session, "t2", "t3")
    await steer(client, session)
    before = await state_of(client, session, "t1")
    build, field = BAD_REQUESTS[case]
    request = build(session, lease)
    rpc: Callable[[Message], Awaitable[object]] = {  # type: ignore[assignment]  # one stub per request type
        pb.SteerTurnRequest: client.control.SteerTurn,
        pb.AcknowledgeSteerRequest: client.admission.AcknowledgeSteer,
        pb.MoveQueuedTurnRequest: client.control.MoveQueuedTurn,
    }[type(request)]

    refusal = await refused(rpc(request))

    assert refusal.code == grpc.StatusCode.INVALID_ARGUMENT
    assert field in refusal.fields
    assert await state_of(client, session, "t1") == before


# --- who may call them -----------------------------------------------------------------------


async def test_a_runner_may_not_steer_or_move_the_queue_and_a_gateway_may_not_acknowledge(
    guarded: TurngateServer,
) -> None:
    session = pb.SessionRef(project_id=PROJECT_A, session_id=f"s-{uuid.uuid4().hex[:12]}")
    async with (
        client_as(guarded.port, bearer(RUNNER_A)) as runner,
        client_as(guarded.port, bearer(GATEWAY_A)) as gateway,
    ):
        lease = (await enqueue(runner, session, "t1", runner_id="r1")).lease
        await enqueue(runner, session, "t2", runner_id="r1")
        await steer(gateway, session)
        before = await state_of(gateway, session, "t1")

        denied = [
            await refused(steer(runner, session, steer_id="s-runner")),
            await refused(move(runner, session, "t2")),
            await refused(acknowledge(gateway, lease)),
        ]

        assert [refusal.code for refusal in denied] == [grpc.StatusCode.PERMISSION_DENIED] * 3
        assert await state_of(gateway, session, "t1") == before
        assert (await acknowledge(runner, lease)).recorded


# --- S6 requeued if unconsumed ---------------------------------------------------------------


async def test_s6_an_unconsumed_steer_sent_with_requeue_joins_the_queue_and_is_promoted_with_its_content(
    client: Client, session: pb.SessionRef
) -> None:
    lease = await running(client, session)
    await steer(client, session, steer_id="s1", requeue=True)
    await steer(client, session, steer_id="s2")  # not asked to requeue
    head = await head_of(client, session)

    await complete(client, lease)

    log = await events_after(client, session, head)
    assert sorted(steer_ends(log)) == [
        ("s1", pb.STEER_STATUS_UNCONSUMED, True),
        ("s2", pb.STEER_STATUS_UNCONSUMED, False),
    ]
    [queued] = [e.turn_queued for e in log if e.HasField("turn_queued")]
    assert (queued.turn.turn_id, queued.turn.runner_id, queued.position) == ("s1", runner_of("t1"), 1)
    assert (queued.turn.steer.steer_id, queued.turn.steer.content) == ("s1", CONTENT)
    [admitted] = [e.turn_admitted for e in log if e.HasField("turn_admitted")]
    assert (admitted.turn.turn_id, admitted.from_queue) == ("s1", True)
    assert (admitted.steer.steer_id, admitted.steer.content, admitted.steer.content_type) == (
        "s1",
        CONTENT,
        "text/plain",
    )
    picked = await enqueue(client, session, "s1", runner_id=runner_of("t1"))
    assert (picked.lease.turn_id, picked.replayed) == ("s1", True)
    assert (picked.steer.steer_id, picked.steer.content) == ("s1", CONTENT), "its runner gets the input"
    assert (await snapshot(client, session)).active.turn_id == "s1"


# --- S7 the ENQUEUE fallback -----------------------------------------------------------------


async def test_s7_the_enqueue_fallback_makes_a_steer_of_a_settled_turn_a_turn_admitted_at_once(
    client: Client, session: pb.SessionRef
) -> None:
    await complete(client, await running(client, session))
    head = await head_of(client, session)
    watcher = watch(client, session, after_seq=head, turn_id="s1")  # its runner's watch
    try:
        reply = await steer(client, session, fallback=pb.STEER_FALLBACK_ENQUEUE)
        seen = await collect_until(watcher, lambda event: event.HasField("turn_admitted"))
    finally:
        watcher.cancel()

    assert reply.WhichOneof("outcome") == "queued"
    queued = reply.queued
    assert (queued.admitted, queued.position, queued.queue_depth, queued.replayed) == (True, 0, 0, False)
    assert (queued.turn.turn_id, queued.turn.runner_id, queued.turn.steer.content) == (
        "s1",
        runner_of("t1"),
        CONTENT,
    )
    admitted = seen[-1].turn_admitted
    assert (admitted.turn.turn_id, admitted.steer.content) == ("s1", CONTENT)
    picked = await enqueue(client, session, "s1", runner_id=runner_of("t1"))
    assert (picked.lease.turn_id, picked.replayed) == ("s1", True)
    again = await steer(client, session, fallback=pb.STEER_FALLBACK_ENQUEUE)
    assert again.queued.replayed, "S3: the retry answers the first call"


async def test_s7_the_enqueue_fallback_for_a_turn_not_running_queues_the_steer_at_the_tail(
    client: Client, session: pb.SessionRef
) -> None:
    await with_queue(client, session, "t2")

    reply = await steer(client, session, expected_turn_id="t2", fallback=pb.STEER_FALLBACK_ENQUEUE)

    queued = reply.queued
    assert (queued.admitted, queued.position, queued.queue_depth) == (False, 2, 2)
    assert (queued.turn.turn_id, queued.turn.runner_id) == ("s1", runner_of("t2"))
    assert queue_ids((await snapshot(client, session)).queue) == ["t2", "s1"]


async def test_s7_the_enqueue_fallback_for_a_turn_the_session_never_saw_is_a_mismatch(
    client: Client, session: pb.SessionRef
) -> None:
    await running(client, session)
    before = await state_of(client, session, "t1")

    reply = await steer(client, session, expected_turn_id="t-never", fallback=pb.STEER_FALLBACK_ENQUEUE)

    assert reply.mismatch.reason == pb.ERROR_REASON_ACTIVE_TURN_MISMATCH
    assert await state_of(client, session, "t1") == before


async def test_s7_a_steer_id_naming_a_turn_the_session_knows_is_refused_as_an_admission_would_be(
    client: Client, session: pb.SessionRef
) -> None:
    await complete(client, await running(client, session))

    refusal = await refused(steer(client, session, steer_id="t1", fallback=pb.STEER_FALLBACK_ENQUEUE))

    assert_reason(refusal, "TURN_ALREADY_SETTLED")


# --- Q8 guarded queue edits ------------------------------------------------------------------


async def test_q8_a_queued_turn_moves_to_the_head_or_after_another_and_the_version_counts_each_change(
    client: Client, session: pb.SessionRef
) -> None:
    await with_queue(client, session, "t2", "t3", "t4")
    version = (await snapshot(client, session)).queue_version
    head = await head_of(client, session)
    watcher = watch(client, session, after_seq=head)
    try:
        to_head = await move(client, session, "t4", expected_version=version)
        after = await move(client, session, "t2", "t3", expected_version=version + 1)
        seen = await collect(watcher, 2)
    finally:
        watcher.cancel()
    unchanged = await move(client, session, "t4")

    assert (queue_ids(to_head.queue), to_head.queue_version) == (["t4", "t2", "t3"], version + 1)
    assert (queue_ids(after.queue), after.queue_version) == (["t4", "t3", "t2"], version + 2)
    assert [(list(e.queue_reordered.turn_ids), e.queue_reordered.moved_turn_id) for e in seen] == [
        (["t4", "t2", "t3"], "t4"),
        (["t4", "t3", "t2"], "t2"),
    ]
    assert (queue_ids(unchanged.queue), unchanged.queue_version) == (["t4", "t3", "t2"], version + 2)
    current = await snapshot(client, session)
    assert (current.seq, current.queue_version) == (head + 2, version + 2), (
        "a move that changes nothing writes nothing"
    )
    assert [q.position for q in current.queue] == [1, 2, 3]


async def test_q8_an_edit_at_a_stale_queue_version_is_queue_version_mismatch_and_changes_nothing(
    client: Client, session: pb.SessionRef
) -> None:
    await with_queue(client, session, "t2", "t3")
    stale = (await snapshot(client, session)).queue_version
    await move(client, session, "t3")
    before = await state_of(client, session, "t1")

    refusal = await refused(move(client, session, "t2", expected_version=stale))

    assert_reason(refusal, "QUEUE_VERSION_MISMATCH")
    assert await state_of(client, session, "t1") == before


@pytest.mark.parametrize(("turn_id", "after_turn_id"), [("t1", ""), ("t-never", ""), ("t2", "t1")])
async def test_q8_moving_a_turn_that_is_not_queued_or_after_one_is_turn_not_queued(
    client: Client, session: pb.SessionRef, turn_id: str, after_turn_id: str
) -> None:
    await with_queue(client, session, "t2", "t3")
    before = await state_of(client, session, "t1")

    refusal = await refused(move(client, session, turn_id, after_turn_id))

    assert_reason(refusal, "TURN_NOT_QUEUED")
    assert await state_of(client, session, "t1") == before


async def test_q8_the_queue_version_counts_every_write_that_changes_who_waits(
    client: Client, session: pb.SessionRef
) -> None:
    lease = await with_queue(client, session)
    versions = [(await snapshot(client, session)).queue_version]
    await enqueue(client, session, "t2")
    versions.append((await snapshot(client, session)).queue_version)
    await complete(client, lease)  # t2 leaves the queue: promoted
    versions.append((await snapshot(client, session)).queue_version)

    assert versions[0] < versions[1] < versions[2]


# --- races -----------------------------------------------------------------------------------


async def _steer_had_one_fate(
    client: Client, session: pb.SessionRef, head: int, reply: pb.SteerTurnResponse
) -> str:
    """A steer racing the end of its turn reached it (then the end found it UNCONSUMED) or found
    it ended (mismatch, nothing written): never both, never lost."""
    log = await events_after(client, session, head)
    [settled] = settlements(log)
    if reply.WhichOneof("outcome") == "steered":
        assert steered_ids(log) == ["s1"]
        assert steer_ends(log) == [("s1", pb.STEER_STATUS_UNCONSUMED, False)]
        assert list(settled.unconsumed_steer_ids) == ["s1"]
        return "steered"
    assert reply.mismatch.reason == pb.ERROR_REASON_TURN_NOT_ACTIVE
    assert reply.mismatch.expected_phase == pb.TURN_PHASE_SETTLED
    assert (steered_ids(log), steer_ends(log), list(settled.unconsumed_steer_ids)) == ([], [], [])
    return "mismatch"


@pytest.mark.parametrize("order", list(ORDERS))
async def test_s1_s2_a_steer_racing_complete_turn_is_steered_then_unconsumed_or_a_mismatch_never_both(
    server: TurngateServer, client: Client, session: pb.SessionRef, order: str
) -> None:
    lease = await running(client, session)
    head = await head_of(client, session)
    calls = {"steer": steer(client, session), "other": complete(client, lease)}

    with gated(server, gate_for(session, ORDERS[order], {"steer": SteerTurn, "other": Complete})) as gate:
        results = await forced(gate, calls, ORDERS[order])

    fate = await _steer_had_one_fate(client, session, head, results["steer"])
    forced_fate = {"steer_decided_first": "mismatch", "other_decided_first": "steered"}
    assert fate == forced_fate.get(order, fate)


async def test_s1_s2_unforced_steers_racing_completions_each_have_one_fate(client: Client) -> None:
    sessions = [
        pb.SessionRef(project_id="p-e2e", session_id=f"s-{uuid.uuid4().hex[:16]}")
        for _ in range(UNFORCED_SESSIONS)
    ]
    leases = [await running(client, session) for session in sessions]
    heads = [await head_of(client, session) for session in sessions]

    results = await asyncio.gather(
        *(
            asyncio.gather(steer(client, session), complete(client, lease))
            for session, lease in zip(sessions, leases, strict=True)
        )
    )

    for session, head, (reply, _) in zip(sessions, heads, results, strict=True):
        await _steer_had_one_fate(client, session, head, reply)


@pytest.mark.parametrize("order", list(ORDERS))
async def test_s1_s2_a_steer_racing_a_forced_stop_is_steered_then_unconsumed_or_a_mismatch_never_both(
    server: TurngateServer, client: Client, session: pb.SessionRef, order: str
) -> None:
    await running(client, session)
    head = await head_of(client, session)
    calls = {"steer": steer(client, session), "other": stop(client, session, "t1", force=True)}

    with gated(server, gate_for(session, ORDERS[order], {"steer": SteerTurn, "other": Cancel})) as gate:
        results = await forced(gate, calls, ORDERS[order])

    fate = await _steer_had_one_fate(client, session, head, results["steer"])
    forced_fate = {"steer_decided_first": "mismatch", "other_decided_first": "steered"}
    assert fate == forced_fate.get(order, fate)


async def test_s1_steers_decided_together_on_one_state_all_reach_the_turn_each_at_its_own_seq(
    server: TurngateServer, client: Client, session: pb.SessionRef
) -> None:
    await running(client, session)
    head = await head_of(client, session)
    names = [f"s{n}" for n in range(CONCURRENT_CALLERS)]
    calls = {name: steer(client, session, steer_id=name) for name in names}

    with gated(server, Gate(session, {SteerTurn: len(names)})) as gate:
        results = await forced(gate, calls, names)

    seqs = sorted(results[name].steered.seq for name in names)
    assert seqs == list(range(head + 1, head + 1 + len(names)))
    log = await events_after(client, session, head)
    assert sorted(steered_ids(log)) == sorted(names)
    for name in names:
        [event] = [e for e in log if e.HasField("turn_steered") and e.turn_steered.steer.steer_id == name]
        assert event.seq == results[name].steered.seq
    assert sorted((await snapshot(client, session)).active.pending_steer_ids) == sorted(names)


async def test_q8_moves_decided_together_at_one_queue_version_exactly_one_wins(
    server: TurngateServer, client: Client, session: pb.SessionRef
) -> None:
    movers = [f"t{n}" for n in range(3, 3 + CONCURRENT_CALLERS)]
    await with_queue(client, session, "t2", *movers)
    version = (await snapshot(client, session)).queue_version
    head = await head_of(client, session)
    calls = {  # each would move its turn to the head, each a change
        turn_id: answer_or_refusal(move(client, session, turn_id, expected_version=version))
        for turn_id in movers
    }

    with gated(server, Gate(session, {MoveQueuedTurn: len(movers)})) as gate:
        results = await forced(gate, calls, list(calls))

    won = {name: r for name, r in results.items() if isinstance(r, pb.MoveQueuedTurnResponse)}
    lost = [r for r in results.values() if isinstance(r, Refused)]
    assert len(won) == 1, results
    [(winner, reply)] = won.items()
    assert queue_ids(reply.queue)[0] == winner
    assert reply.queue_version == version + 1
    for refusal in lost:
        assert_reason(refusal, "QUEUE_VERSION_MISMATCH")
    current = await snapshot(client, session)
    assert (queue_ids(current.queue), current.queue_version) == (queue_ids(reply.queue), version + 1)
    assert kinds(await events_after(client, session, head)) == ["queue_reordered"]


async def test_s1_i8_a_steer_after_its_turns_lease_passed_finds_it_lost_and_reaches_nothing(
    client: Client, session: pb.SessionRef
) -> None:
    admitted = await admit(client, session, "t1", runner_of("t1"), lease_ttl=1)
    head = await head_of(client, session)
    await sleep_past(admitted.lease_expires_at)

    reply = await steer(client, session)

    assert reply.WhichOneof("outcome") == "mismatch", "the steer's own decision settled the turn first"
    assert (reply.mismatch.reason, reply.mismatch.expected_outcome) == (
        pb.ERROR_REASON_TURN_NOT_ACTIVE,
        pb.TURN_OUTCOME_LOST,
    )
    log = await events_after(client, session, head)
    assert [s.turn.outcome for s in settlements(log)] == [pb.TURN_OUTCOME_LOST]
    assert steered_ids(log) == []


async def test_s2_a_steer_pending_when_its_turns_lease_passes_ends_unconsumed_with_the_settlement(
    client: Client, session: pb.SessionRef
) -> None:
    lease = await running(client, session)
    assert (await steer(client, session)).WhichOneof("outcome") == "steered"
    head = await head_of(client, session)
    # The lease shortened to a second from now: the clock, not the runner, ends the turn.
    await client.admission.Heartbeat(pb.HeartbeatRequest(lease=lease, lease_ttl=seconds(1)))
    stream = watch(client, session, after_seq=head)
    try:
        log = await collect_until(stream, lambda event: event.HasField("turn_settled"))
    finally:
        stream.cancel()

    [settled] = settlements(log)
    assert settled.turn.outcome == pb.TURN_OUTCOME_LOST
    assert list(settled.unconsumed_steer_ids) == ["s1"]
    ended = next(e for e in log if e.HasField("steer_ended"))
    assert ended.seq == log[-1].seq - 1, "ended in the settlement's own write, just before it"
    assert steer_ends(log) == [("s1", pb.STEER_STATUS_UNCONSUMED, False)]


async def test_s1_a_steer_decided_while_the_promotion_of_its_turn_is_held_finds_it_queued(
    server: TurngateServer, client: Client, session: pb.SessionRef
) -> None:
    """The completion that promotes t2 has decided, its write held: the steer, naming t2, still
    finds it queued (a mismatch writes nothing, so it cannot be the one held)."""
    lease = await with_queue(client, session, "t2")
    head = await head_of(client, session)
    calls = {"steer": steer(client, session, "t2"), "other": complete(client, lease)}

    with gated(server, gate_for(session, ("other",), {"other": Complete})) as gate:
        results = await forced(gate, calls, ("other",))

    reply = results["steer"]
    assert reply.WhichOneof("outcome") == "mismatch"
    assert (reply.mismatch.current_turn_id, reply.mismatch.expected_phase) == ("t1", pb.TURN_PHASE_QUEUED)
    log = await events_after(client, session, head)
    assert [e.turn_admitted.turn.turn_id for e in log if e.HasField("turn_admitted")] == ["t2"]
    assert steered_ids(log) == []


async def test_s1_a_steer_of_a_turn_just_promoted_from_the_queue_reaches_it_before_its_runner_claims_it(
    client: Client, session: pb.SessionRef
) -> None:
    lease = await with_queue(client, session, "t2")
    await complete(client, lease)

    reply = await steer(client, session, "t2")

    assert (reply.steered.turn_id, reply.steered.steer_id) == ("t2", "s1")
    claimed = await admit(client, session, "t2", runner_of("t2"))
    assert claimed.replayed, "its runner picks up the promoted turn's lease"
    assert (await snapshot(client, session)).active.pending_steer_ids == ["s1"]
    assert (await acknowledge(client, claimed.lease)).recorded
