"""What a caller is told when the store fails, over gRPC on every store (docs/design.md §3.2): a
write whose reply was lost after it left is UNAVAILABLE with ErrorInfo WRITE_OUTCOME_UNKNOWN and
says it may have taken effect; the same request sent again answers what the first call did, for
every mutating RPC. A failure before the write left is UNAVAILABLE "nothing was changed", with no
reason, and nothing changed. (The reply is lost by the store's `after_write` seam; the real faults
that lose one are in tests/faults/test_outcome_unknown.py.)"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
import pytest

from tests.support.calls import DOMAIN, admit, complete, enqueue, record_interaction, refusal_of, snapshot
from tests.support.seams import reply_lost, unreachable_before_writing
from tests.support.servers import Client
from turngate.service.core import SessionKey
from turngate.service.server import TurngateServer
from turngate.v1 import turngate_pb2 as pb

Send = Callable[[Client], Awaitable[Any]]


@dataclass(frozen=True)
class Rpc:
    """A mutating RPC: `prepare` brings the session to where it applies and returns the request's
    sender, `answered` checks the retry's reply."""

    name: str
    prepare: Callable[[Client, pb.SessionRef], Awaitable[Send]]
    answered: Callable[[Any], None]


async def to_admit(client: Client, session: pb.SessionRef) -> Send:
    request = pb.AdmitTurnRequest(session=session, turn_id="t1", runner_id="r1")
    return lambda c: c.admission.AdmitTurn(request)


async def running(client: Client, session: pb.SessionRef) -> pb.TurnLease:
    return (await admit(client, session, "t1")).lease


async def to_heartbeat(client: Client, session: pb.SessionRef) -> Send:
    request = pb.HeartbeatRequest(lease=await running(client, session))
    return lambda c: c.admission.Heartbeat(request)


async def to_record_tool_call(client: Client, session: pb.SessionRef) -> Send:
    request = pb.RecordToolCallRequest(
        lease=await running(client, session),
        call_id="c1",
        name="search",
        status=pb.TOOL_CALL_STATUS_SUCCEEDED,
    )
    return lambda c: c.admission.RecordToolCall(request)


async def to_record_interaction(client: Client, session: pb.SessionRef) -> Send:
    request = pb.RecordInteractionRequest(
        lease=await running(client, session), interaction_id="i1", kind="approval"
    )
    return lambda c: c.admission.RecordInteraction(request)


async def to_resolve(client: Client, session: pb.SessionRef) -> Send:
    await record_interaction(client, await running(client, session), "i1")
    request = pb.ResolveInteractionRequest(
        session=session, interaction_id="i1", resolution="approved", request_id="req-1"
    )
    return lambda c: c.control.ResolveInteraction(request)


async def to_complete(client: Client, session: pb.SessionRef) -> Send:
    request = pb.CompleteTurnRequest(lease=await running(client, session), outcome=pb.TURN_OUTCOME_COMPLETED)
    return lambda c: c.admission.CompleteTurn(request)


async def to_stop(client: Client, session: pb.SessionRef) -> Send:
    await running(client, session)
    request = pb.CancelTurnRequest(session=session, expected_turn_id="t1", request_id="req-1")
    return lambda c: c.control.CancelTurn(request)


async def to_resume(client: Client, session: pb.SessionRef) -> Send:
    lease = (await enqueue(client, session, "t1")).lease
    await enqueue(client, session, "t2")
    await complete(client, lease, pb.TURN_OUTCOME_FAILED)  # pauses the queue
    request = pb.ResumeQueueRequest(session=session, request_id="req-1")
    return lambda c: c.control.ResumeQueue(request)


async def to_clear(client: Client, session: pb.SessionRef) -> Send:
    await enqueue(client, session, "t1")
    await enqueue(client, session, "t2")
    request = pb.ClearQueueRequest(session=session, reason="start over", request_id="req-1")
    return lambda c: c.control.ClearQueue(request)


async def to_steer(client: Client, session: pb.SessionRef) -> Send:
    await running(client, session)
    request = pb.SteerTurnRequest(
        session=session,
        expected_turn_id="t1",
        steer_id="s1",
        content="also check the tests",
        request_id="req-1",
    )
    return lambda c: c.control.SteerTurn(request)


async def to_acknowledge_steer(client: Client, session: pb.SessionRef) -> Send:
    lease = await running(client, session)
    await client.control.SteerTurn(
        pb.SteerTurnRequest(session=session, expected_turn_id="t1", steer_id="s1", content="go")
    )
    request = pb.AcknowledgeSteerRequest(lease=lease, steer_id="s1", status=pb.STEER_STATUS_CONSUMED)
    return lambda c: c.admission.AcknowledgeSteer(request)


async def to_move(client: Client, session: pb.SessionRef) -> Send:
    await enqueue(client, session, "t1")
    await enqueue(client, session, "t2")
    await enqueue(client, session, "t3")
    request = pb.MoveQueuedTurnRequest(session=session, turn_id="t3", request_id="req-1")
    return lambda c: c.control.MoveQueuedTurn(request)


def admitted(reply: pb.AdmitTurnResponse) -> None:
    assert (reply.lease.turn_id, reply.replayed) == ("t1", True)


def continued(reply: pb.HeartbeatResponse) -> None:
    assert reply.directive == pb.DIRECTIVE_CONTINUE


def call_recorded(reply: pb.RecordToolCallResponse) -> None:
    assert (reply.tool_call.status, reply.recorded) == (pb.TOOL_CALL_STATUS_SUCCEEDED, False)


def interaction_recorded(reply: pb.RecordInteractionResponse) -> None:
    assert (reply.interaction.status, reply.recorded) == (pb.INTERACTION_STATUS_PENDING, False)


def resolved(reply: pb.ResolveInteractionResponse) -> None:
    assert (reply.interaction.status, reply.interaction.resolution) == (
        pb.INTERACTION_STATUS_RESOLVED,
        "approved",
    )
    assert reply.turn_id == "t1"


def settled(reply: pb.CompleteTurnResponse) -> None:
    assert (reply.turn.outcome, reply.turn.settled_by, reply.recorded) == (
        pb.TURN_OUTCOME_COMPLETED,
        pb.SETTLED_BY_RUNNER,
        False,
    )


def stopping(reply: pb.CancelTurnResponse) -> None:
    assert reply.cancelled.stopping_turn_id == "t1"


def resumed(reply: pb.ResumeQueueResponse) -> None:
    assert reply.admitted_turn_id == "t2", "the turn the first call admitted"


def cleared(reply: pb.ClearQueueResponse) -> None:
    assert (list(reply.cleared_turn_ids), reply.active_turn_id) == (["t2"], "t1"), "what the first cleared"


def steered(reply: pb.SteerTurnResponse) -> None:
    assert (reply.steered.turn_id, reply.steered.steer_id, reply.steered.replayed) == ("t1", "s1", True)


def steer_acknowledged(reply: pb.AcknowledgeSteerResponse) -> None:
    assert (reply.steer_id, reply.status, reply.recorded) == ("s1", pb.STEER_STATUS_CONSUMED, False)


def moved(reply: pb.MoveQueuedTurnResponse) -> None:
    assert [turn.turn_id for turn in reply.queue] == ["t3", "t2"], "the queue the first call made"


RPCS = [
    Rpc("AdmitTurn", to_admit, admitted),
    Rpc("Heartbeat", to_heartbeat, continued),
    Rpc("RecordToolCall", to_record_tool_call, call_recorded),
    Rpc("RecordInteraction", to_record_interaction, interaction_recorded),
    Rpc("ResolveInteraction", to_resolve, resolved),
    Rpc("CompleteTurn", to_complete, settled),
    Rpc("CancelTurn", to_stop, stopping),
    Rpc("ResumeQueue", to_resume, resumed),
    Rpc("ClearQueue", to_clear, cleared),
    Rpc("SteerTurn", to_steer, steered),
    Rpc("AcknowledgeSteer", to_acknowledge_steer, steer_acknowledged),
    Rpc("MoveQueuedTurn", to_move, moved),
]


def key_of(session: pb.SessionRef) -> SessionKey:
    return SessionKey(session.project_id, session.session_id)


def reason_of(error: grpc.aio.AioRpcError) -> str:
    info = refusal_of(error).info
    return info.reason if info is not None and info.domain == DOMAIN else ""


@pytest.mark.parametrize("rpc", RPCS, ids=[rpc.name for rpc in RPCS])
async def test_a_write_whose_reply_is_lost_answers_write_outcome_unknown_and_its_retry_what_it_did(
    server: TurngateServer, client: Client, session: pb.SessionRef, rpc: Rpc
) -> None:
    send = await rpc.prepare(client, session)
    head = (await snapshot(client, session)).seq

    with reply_lost(server.store, key_of(session)), pytest.raises(grpc.aio.AioRpcError) as caught:
        await send(client)

    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    assert reason_of(caught.value) == "WRITE_OUTCOME_UNKNOWN"
    assert "may have taken effect" in (caught.value.details() or "")
    assert "nothing was changed" not in (caught.value.details() or "")
    written = (await snapshot(client, session)).seq
    assert written > head or rpc.name == "Heartbeat", "the write took effect (a heartbeat writes no event)"
    rpc.answered(await send(client))
    assert (await snapshot(client, session)).seq == written, "the retry adds nothing"


@pytest.mark.parametrize("rpc", RPCS, ids=[rpc.name for rpc in RPCS])
async def test_a_write_that_fails_before_it_leaves_answers_nothing_was_changed_and_changes_nothing(
    server: TurngateServer, client: Client, session: pb.SessionRef, rpc: Rpc
) -> None:
    send = await rpc.prepare(client, session)
    before = await snapshot(client, session)

    with (
        unreachable_before_writing(server.store, key_of(session)),
        pytest.raises(grpc.aio.AioRpcError) as caught,
    ):
        await send(client)

    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    assert caught.value.details() == "store unavailable; nothing was changed, retry"
    assert reason_of(caught.value) == ""
    assert await snapshot(client, session) == before
