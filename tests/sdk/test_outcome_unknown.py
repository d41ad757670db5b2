"""The SDK after a write whose outcome is unknown (docs/design.md §3.2): the service answers
UNAVAILABLE WRITE_OUTCOME_UNKNOWN when its store lost a write's reply (here the store's
`after_write` seam loses it); the SDK sends the same request again, whose answer is what the first
attempt did; if its retries run out first it raises `WriteOutcomeUnknown`, naming the request id
to send again, never a plain "unavailable"."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import grpc
import pytest

from tests.sdk.conftest import PROJECT
from tests.sdk.wire import Wire
from tests.support.backoff import FAST
from tests.support.calls import admit, complete, enqueue, snapshot
from tests.support.seams import reply_lost
from tests.support.servers import Client as Raw
from turngate.client import (
    Cancelled,
    Client,
    ErrorReason,
    InteractionStatus,
    ServiceUnavailable,
    WriteOutcomeUnknown,
)
from turngate.client import errors as sdk_errors
from turngate.client.retry import Backoff, retrying
from turngate.service.core import SessionKey
from turngate.service.server import TurngateServer
from turngate.v1 import turngate_pb2 as pb


def key_of(ref: pb.SessionRef) -> SessionKey:
    return SessionKey(ref.project_id, ref.session_id)


def request_ids(wire: Wire, method: str) -> set[str]:
    kinds = (pb.CancelTurnRequest, pb.ResolveInteractionRequest, pb.ResumeQueueRequest)
    return {request.request_id for request in wire.requests[method] if isinstance(request, kinds)}


async def test_a_stop_whose_outcome_is_unknown_is_sent_again_and_answers_what_it_did(
    sdk_served: tuple[TurngateServer, Raw], client: Client, raw: Raw, ref: pb.SessionRef, wire: Wire
) -> None:
    await admit(raw, ref, "t1")

    with reply_lost(sdk_served[0].store, key_of(ref)):
        stopped = await client.gateway().stop(ref.session_id, expected_turn_id="t1")

    assert isinstance(stopped, Cancelled)
    assert stopped.stopping_turn_id == "t1"
    assert wire.sent["CancelTurn"] == 2
    assert len(request_ids(wire, "CancelTurn")) == 1, "the same request, with the same request id"


async def test_a_resolution_whose_outcome_is_unknown_answers_the_interaction_it_resolved(
    sdk_served: tuple[TurngateServer, Raw], client: Client, raw: Raw, ref: pb.SessionRef, wire: Wire
) -> None:
    lease = (await admit(raw, ref, "t1")).lease
    await raw.admission.RecordInteraction(
        pb.RecordInteractionRequest(lease=lease, interaction_id="i1", kind="ok?")
    )

    with reply_lost(sdk_served[0].store, key_of(ref)):
        resolved = await client.gateway().resolve_interaction(ref.session_id, "i1", "yes")

    assert (resolved.status, resolved.resolution) == (InteractionStatus.RESOLVED, "yes")
    assert wire.sent["ResolveInteraction"] == 2
    assert len(request_ids(wire, "ResolveInteraction")) == 1


async def test_a_resume_whose_outcome_is_unknown_answers_the_turn_it_admitted(
    sdk_served: tuple[TurngateServer, Raw], client: Client, raw: Raw, ref: pb.SessionRef, wire: Wire
) -> None:
    lease = (await enqueue(raw, ref, "t1")).lease
    await enqueue(raw, ref, "t2")
    await complete(raw, lease, pb.TURN_OUTCOME_FAILED)

    with reply_lost(sdk_served[0].store, key_of(ref)):
        resumed = await client.gateway().resume_queue(ref.session_id)

    assert resumed.admitted_turn_id == "t2"
    assert wire.sent["ResumeQueue"] == 2


async def test_a_turn_whose_admission_outcome_is_unknown_runs_on_the_lease_it_was_given(
    sdk_served: tuple[TurngateServer, Raw], client: Client, raw: Raw, ref: pb.SessionRef, wire: Wire
) -> None:
    with reply_lost(sdk_served[0].store, key_of(ref)):
        async with client.runner("r1").turn(ref.session_id, "t1") as turn:
            admitted = (await snapshot(raw, ref)).active

    assert wire.sent["AdmitTurn"] == 2
    assert turn.replayed, "the second attempt found the turn the first admitted"
    assert (admitted.turn_id, admitted.generation) == ("t1", turn.generation)


async def test_retries_that_run_out_after_an_unknown_outcome_raise_write_outcome_unknown_with_the_request_id(
    sdk_served: tuple[TurngateServer, Raw], target: str, raw: Raw, ref: pb.SessionRef
) -> None:
    wire = Wire()
    await admit(raw, ref, "t1")
    async with Client(target, PROJECT, interceptors=wire.interceptors, backoff=FAST, retry_for=0.3) as client:
        # The first attempt is made and its reply lost; every later one is lost before sending.
        with (
            reply_lost(sdk_served[0].store, key_of(ref), then=lambda: wire.lose("CancelTurn", 1_000)),
            pytest.raises(WriteOutcomeUnknown) as caught,
        ):
            await client.gateway().stop(ref.session_id, expected_turn_id="t1", request_id="req-7")

    unknown = caught.value
    assert isinstance(unknown, ServiceUnavailable), "what code written before it catches still catches it"
    assert (unknown.request_id, unknown.reason) == ("req-7", ErrorReason.WRITE_OUTCOME_UNKNOWN)
    assert "may have taken effect" in str(unknown)
    assert wire.sent["CancelTurn"] > 2
    assert (await snapshot(raw, ref)).phase == pb.SESSION_PHASE_STOPPING, "it did take effect"


async def test_retries_that_run_out_without_an_unknown_outcome_still_say_unavailable(
    target: str, ref: pb.SessionRef
) -> None:
    wire = Wire()
    wire.lose("CancelTurn", 1_000)
    async with Client(target, PROJECT, interceptors=wire.interceptors, backoff=FAST, retry_for=0.2) as client:
        with pytest.raises(ServiceUnavailable) as caught:
            await client.gateway().stop(ref.session_id, expected_turn_id="t1")

    assert not isinstance(caught.value, WriteOutcomeUnknown)


def failing(*codes: grpc.StatusCode) -> Callable[[], asyncio.Future[None]]:
    """An attempt that fails with each of `codes` in turn, then with the last one for ever."""
    remaining = list(codes)

    def attempt() -> asyncio.Future[None]:
        code = remaining.pop(0) if len(remaining) > 1 else remaining[0]
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.set_exception(grpc.aio.AioRpcError(code, None, None, "injected"))
        return future

    return attempt


@pytest.mark.parametrize(
    ("writes", "expected"), [(True, WriteOutcomeUnknown), (False, ServiceUnavailable)], ids=["write", "read"]
)
async def test_a_write_whose_deadline_passed_may_have_taken_effect_a_read_only_failed(
    writes: bool, expected: type[sdk_errors.TurngateError]
) -> None:
    codes = (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAVAILABLE)
    loop = asyncio.get_running_loop()

    with pytest.raises(ServiceUnavailable) as caught:
        await retrying(
            failing(*codes), until=loop.time() + 0.05, backoff=Backoff(0.01, 0.01), what="X", writes=writes
        )

    assert type(caught.value) is expected
