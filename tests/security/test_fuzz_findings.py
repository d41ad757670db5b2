"""What fuzzing and the hostile-input review of the edge found, one regression test each."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from google.protobuf.message import Message

from tests.security.fuzz_stores import fresh_database
from tests.support.calls import admit, record_interaction, refused
from tests.support.servers import Client, running, settings_for
from turngate.service.api import parse
from turngate.service.api.fields import InvalidArgument
from turngate.service.api.policy import Policy
from turngate.v1 import turngate_pb2 as pb

NUL = "before\x00after"

# (RPC, field, the request with `text` in that field): every free-text field of every request.
Build = Callable[[pb.TurnLease, str], Message]
FREE_TEXT: list[tuple[str, str, Build]] = [
    (
        "RecordToolCall",
        "name",
        lambda lease, text: pb.RecordToolCallRequest(
            lease=lease, call_id="c-text", name=text, status=pb.TOOL_CALL_STATUS_OPEN
        ),
    ),
    (
        "RecordToolCall",
        "error",
        lambda lease, text: pb.RecordToolCallRequest(
            lease=lease, call_id="c-text", name="search", status=pb.TOOL_CALL_STATUS_FAILED, error=text
        ),
    ),
    (
        "RecordInteraction",
        "kind",
        lambda lease, text: pb.RecordInteractionRequest(lease=lease, interaction_id="i-text", kind=text),
    ),
    (
        "ResolveInteraction",
        "resolution",
        lambda lease, text: pb.ResolveInteractionRequest(
            session=lease.session, interaction_id="i-open", resolution=text
        ),
    ),
    (
        "CancelTurn",
        "reason",
        lambda lease, text: pb.CancelTurnRequest(
            session=lease.session, expected_turn_id=lease.turn_id, reason=text
        ),
    ),
    (
        "CompleteTurn",
        "error",
        lambda lease, text: pb.CompleteTurnRequest(lease=lease, outcome=pb.TURN_OUTCOME_FAILED, error=text),
    ),
]
CASES = [pytest.param(build, field, id=f"{rpc}.{field}") for rpc, field, build in FREE_TEXT]

_POLICY = Policy(lease_ttl=20_000_000, stop_grace=30_000_000, tombstone_ttl=600_000_000)
_PARSERS: dict[type[Message], Callable[[Any], object]] = {
    pb.RecordToolCallRequest: lambda r: parse.record_tool_call(r, _POLICY, ""),
    pb.RecordInteractionRequest: lambda r: parse.record_interaction(r, _POLICY, ""),
    pb.ResolveInteractionRequest: lambda r: parse.resolve_interaction(r, _POLICY),
    pb.CancelTurnRequest: lambda r: parse.cancel(r, _POLICY),
    pb.CompleteTurnRequest: lambda r: parse.complete(r, ""),
}
_LEASE = pb.TurnLease(session=pb.SessionRef(project_id="p", session_id="s"), turn_id="t1", generation=7)


@pytest.mark.parametrize(("build", "field"), CASES)
def test_nul_in_free_text_is_refused_at_the_edge(build: Build, field: str) -> None:
    request = build(_LEASE, NUL)
    with pytest.raises(InvalidArgument) as refusal:
        _PARSERS[type(request)](request)
    assert refusal.value.violations == [(field, "must not contain NUL (U+0000)")]
    _PARSERS[type(request)](build(_LEASE, "before after"))


async def _call(client: Client, request: Message) -> object:
    stub: Any = (
        client.control
        if isinstance(request, pb.CancelTurnRequest | pb.ResolveInteractionRequest)
        else (client.admission)
    )
    return await getattr(stub, type(request).__name__.removesuffix("Request"))(request)


@pytest.fixture(scope="module")
async def on_postgres(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Client]:
    async with fresh_database() as url:
        async for _, client in running(settings_for(str(tmp_path_factory.mktemp("nul")), store=url)):
            yield client


@pytest.mark.postgres
@pytest.mark.parametrize(("build", "field"), CASES)
async def test_nul_in_free_text_is_invalid_argument_not_unavailable_on_postgresql(
    on_postgres: Client, build: Build, field: str
) -> None:
    """PostgreSQL text cannot hold NUL: the write failed and the caller was told UNAVAILABLE
    ("store unavailable"), so a runner could never report its turn's error, nor a gateway stop
    with such a reason. The edge now refuses it; the same text without NUL is stored."""
    session = pb.SessionRef(project_id="p-nul", session_id=f"s-{uuid.uuid4().hex[:12]}")
    lease = (await admit(on_postgres, session)).lease
    await record_interaction(on_postgres, lease, "i-open")

    refusal = await refused(_call(on_postgres, build(lease, NUL)))
    assert refusal.fields == {field}
    await _call(on_postgres, build(lease, "before after"))
