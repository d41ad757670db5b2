"""Bad input on every RPC: INVALID_ARGUMENT with a google.rpc.BadRequest naming exactly the bad
field paths, descriptions that never echo the input, the server still serving, nothing changed.

Every request is built from one that would change the session (close a call, resolve an
interaction, settle the turn…), with one thing broken.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from functools import partial
from typing import Any

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message

from tests.support.calls import (
    admit,
    complete,
    heartbeat,
    record_call,
    record_interaction,
    refused,
    resolve,
    seconds,
    state_of,
    stop,
)
from tests.support.servers import Client
from turngate.v1 import turngate_pb2 as pb

LONG_ID = "a" * 129
ILL_FORMED_IDS = {
    "empty": "",
    "129 chars": LONG_ID,
    "leading dash": "-turn",
    "space": "a b",
    "non-ASCII": "tür",
}
KIB = 1024
DAY_S = 24 * 3600
# The longest max_queue_wait an AdmitTurn may name on a server with the default settings.
QUEUE_WAIT_CAP_S = 3600
ENQUEUE = pb.ADMISSION_MODE_ENQUEUE
INTERRUPT = pb.ADMISSION_MODE_INTERRUPT

Build = Callable[[pb.TurnLease], Message]


def ref(lease: pb.TurnLease, **fields: Any) -> pb.SessionRef:
    return pb.SessionRef(
        **{"project_id": lease.session.project_id, "session_id": lease.session.session_id, **fields}
    )


def fenced(lease: pb.TurnLease, **fields: Any) -> pb.TurnLease:
    return pb.TurnLease(
        **{"session": lease.session, "turn_id": lease.turn_id, "generation": lease.generation, **fields}
    )


def admit_req(lease: pb.TurnLease, /, **fields: Any) -> pb.AdmitTurnRequest:
    return pb.AdmitTurnRequest(**{"session": lease.session, "turn_id": "t2", "runner_id": "r2", **fields})


def heartbeat_req(lease: pb.TurnLease, /, **fields: Any) -> pb.HeartbeatRequest:
    return pb.HeartbeatRequest(**{"lease": lease, **fields})


def tool_call_req(lease: pb.TurnLease, /, **fields: Any) -> pb.RecordToolCallRequest:
    values = {"lease": lease, "call_id": "c-open", "name": "search", "status": pb.TOOL_CALL_STATUS_SUCCEEDED}
    return pb.RecordToolCallRequest(**{**values, **fields})


def interaction_req(lease: pb.TurnLease, /, **fields: Any) -> pb.RecordInteractionRequest:
    return pb.RecordInteractionRequest(
        **{"lease": lease, "interaction_id": "i-new", "kind": "approval", **fields}
    )


def complete_req(lease: pb.TurnLease, /, **fields: Any) -> pb.CompleteTurnRequest:
    return pb.CompleteTurnRequest(**{"lease": lease, "outcome": pb.TURN_OUTCOME_COMPLETED, **fields})


def cancel_req(lease: pb.TurnLease, /, **fields: Any) -> pb.CancelTurnRequest:
    return pb.CancelTurnRequest(
        **{"session": lease.session, "expected_turn_id": "t1", "force": True, **fields}
    )


def resume_req(lease: pb.TurnLease, /, **fields: Any) -> pb.ResumeQueueRequest:
    return pb.ResumeQueueRequest(**{"session": lease.session, **fields})


def resolve_req(lease: pb.TurnLease, /, **fields: Any) -> pb.ResolveInteractionRequest:
    values = {"session": lease.session, "interaction_id": "i-open", "resolution": "yes"}
    return pb.ResolveInteractionRequest(**{**values, **fields})


def watch_req(lease: pb.TurnLease, /, **fields: Any) -> pb.WatchSessionRequest:
    return pb.WatchSessionRequest(**{"session": lease.session, **fields})


def get_session_req(lease: pb.TurnLease, /, **fields: Any) -> pb.GetSessionRequest:
    return pb.GetSessionRequest(**{"session": lease.session, **fields})


def get_turn_req(lease: pb.TurnLease, /, **fields: Any) -> pb.GetTurnRequest:
    return pb.GetTurnRequest(**{"session": lease.session, "turn_id": "t1", **fields})


def list_turns_req(lease: pb.TurnLease, /, **fields: Any) -> pb.ListTurnsRequest:
    return pb.ListTurnsRequest(**{"session": lease.session, **fields})


def case(name: str, fields: set[str], build: Build) -> Any:
    return pytest.param(build, fields, id=name)


def ill_formed_ids(
    rpc: str, field: str, build: Callable[[str, pb.TurnLease], Message], *, optional: bool = False
) -> list[Any]:
    """One case per kind of ill-formed identifier in `field`: build(bad_id, lease). An optional
    field may be empty."""
    return [
        case(f"{rpc} {field} {kind}", {field}, partial(build, bad))
        for kind, bad in ILL_FORMED_IDS.items()
        if bad or not optional
    ]


SESSION_MISSING = {"session", "session.project_id", "session.session_id"}
LEASE_SESSION_MISSING = {"lease.session", "lease.session.project_id", "lease.session.session_id"}

CASES = [
    # AdmitTurn
    case(
        "AdmitTurn all missing", {*SESSION_MISSING, "turn_id", "runner_id"}, lambda _: pb.AdmitTurnRequest()
    ),
    case("AdmitTurn session missing", SESSION_MISSING, lambda lease: admit_req(lease, session=None)),
    *ill_formed_ids(
        "AdmitTurn",
        "session.project_id",
        lambda bad, lease: admit_req(lease, session=ref(lease, project_id=bad)),
    ),
    case(
        "AdmitTurn session_id 129 chars",
        {"session.session_id"},
        lambda lease: admit_req(lease, session=ref(lease, session_id=LONG_ID)),
    ),
    case("AdmitTurn turn_id empty", {"turn_id"}, lambda lease: admit_req(lease, turn_id="")),
    case("AdmitTurn runner_id ill-formed", {"runner_id"}, lambda lease: admit_req(lease, runner_id="r:1/2")),
    case("AdmitTurn lease_ttl 0", {"lease_ttl"}, lambda lease: admit_req(lease, lease_ttl=Duration())),
    case(
        "AdmitTurn lease_ttl negative", {"lease_ttl"}, lambda lease: admit_req(lease, lease_ttl=seconds(-5))
    ),
    case(
        "AdmitTurn lease_ttl under 1s",
        {"lease_ttl"},
        lambda lease: admit_req(lease, lease_ttl=seconds(0.999)),
    ),
    case(
        "AdmitTurn lease_ttl over 24h",
        {"lease_ttl"},
        lambda lease: admit_req(lease, lease_ttl=seconds(DAY_S + 1)),
    ),
    case(
        "AdmitTurn lease_ttl mixed signs",
        {"lease_ttl"},
        lambda lease: admit_req(lease, lease_ttl=Duration(seconds=2, nanos=-1)),
    ),
    case("AdmitTurn mode 99", {"mode"}, lambda lease: admit_req(lease, mode=99)),
    case(
        "AdmitTurn expected_active_turn_id without a mode",
        {"expected_active_turn_id"},
        lambda lease: admit_req(lease, expected_active_turn_id="t1"),
    ),
    case(
        "AdmitTurn expected_active_turn_id with ENQUEUE",
        {"expected_active_turn_id"},
        lambda lease: admit_req(lease, mode=ENQUEUE, expected_active_turn_id="t1"),
    ),
    *ill_formed_ids(
        "AdmitTurn INTERRUPT",
        "expected_active_turn_id",
        lambda bad, lease: admit_req(lease, mode=INTERRUPT, expected_active_turn_id=bad),
        optional=True,
    ),
    case(
        "AdmitTurn max_queue_wait 0",
        {"max_queue_wait"},
        lambda lease: admit_req(lease, mode=ENQUEUE, max_queue_wait=Duration()),
    ),
    case(
        "AdmitTurn max_queue_wait under 1s",
        {"max_queue_wait"},
        lambda lease: admit_req(lease, mode=INTERRUPT, max_queue_wait=seconds(0.999)),
    ),
    case(
        "AdmitTurn max_queue_wait over the cap",
        {"max_queue_wait"},
        lambda lease: admit_req(lease, mode=ENQUEUE, max_queue_wait=seconds(QUEUE_WAIT_CAP_S + 1)),
    ),
    case(
        "AdmitTurn max_queue_wait mixed signs",
        {"max_queue_wait"},
        lambda lease: admit_req(lease, mode=ENQUEUE, max_queue_wait=Duration(seconds=5, nanos=-1)),
    ),
    case(
        "AdmitTurn max_queue_wait without a mode",
        {"max_queue_wait"},
        lambda lease: admit_req(lease, max_queue_wait=seconds(5)),
    ),
    case(
        "AdmitTurn max_queue_wait with REJECT",
        {"max_queue_wait"},
        lambda lease: admit_req(lease, mode=pb.ADMISSION_MODE_REJECT, max_queue_wait=seconds(5)),
    ),
    case(
        "AdmitTurn three bad queue fields",
        {"mode", "expected_active_turn_id", "max_queue_wait"},
        lambda lease: admit_req(lease, mode=7, expected_active_turn_id="t 1", max_queue_wait=seconds(-1)),
    ),
    # Heartbeat
    case(
        "Heartbeat lease missing",
        {"lease", *LEASE_SESSION_MISSING, "lease.turn_id", "lease.generation"},
        lambda _: pb.HeartbeatRequest(),
    ),
    case(
        "Heartbeat lease.session missing",
        LEASE_SESSION_MISSING,
        lambda lease: heartbeat_req(fenced(lease, session=None)),
    ),
    case(
        "Heartbeat project_id 129 chars",
        {"lease.session.project_id"},
        lambda lease: heartbeat_req(fenced(lease, session=ref(lease, project_id=LONG_ID))),
    ),
    *ill_formed_ids(
        "Heartbeat", "lease.turn_id", lambda bad, lease: heartbeat_req(fenced(lease, turn_id=bad))
    ),
    case(
        "Heartbeat generation 0",
        {"lease.generation"},
        lambda lease: heartbeat_req(fenced(lease, generation=0)),
    ),
    case(
        "Heartbeat generation negative",
        {"lease.generation"},
        lambda lease: heartbeat_req(fenced(lease, generation=-lease.generation)),
    ),
    case("Heartbeat lease_ttl 0", {"lease_ttl"}, lambda lease: heartbeat_req(lease, lease_ttl=Duration())),
    case(
        "Heartbeat lease_ttl over 24h",
        {"lease_ttl"},
        lambda lease: heartbeat_req(lease, lease_ttl=seconds(DAY_S * 2)),
    ),
    # RecordToolCall
    case(
        "RecordToolCall lease missing",
        {"lease", *LEASE_SESSION_MISSING, "lease.turn_id", "lease.generation"},
        lambda lease: tool_call_req(lease, lease=None),
    ),
    case(
        "RecordToolCall session_id ill-formed",
        {"lease.session.session_id"},
        lambda lease: tool_call_req(fenced(lease, session=ref(lease, session_id="s/1"))),
    ),
    *ill_formed_ids("RecordToolCall", "call_id", lambda bad, lease: tool_call_req(lease, call_id=bad)),
    case("RecordToolCall name empty", {"name"}, lambda lease: tool_call_req(lease, name="")),
    case("RecordToolCall name 257 bytes", {"name"}, lambda lease: tool_call_req(lease, name="n" * 257)),
    case(
        "RecordToolCall status unspecified",
        {"status"},
        lambda lease: tool_call_req(lease, status=pb.TOOL_CALL_STATUS_UNSPECIFIED),
    ),
    case(
        "RecordToolCall status interrupted",
        {"status"},
        lambda lease: tool_call_req(lease, status=pb.TOOL_CALL_STATUS_INTERRUPTED),
    ),
    case("RecordToolCall status 99", {"status"}, lambda lease: tool_call_req(lease, status=99)),
    case(
        "RecordToolCall error over 1 KiB",
        {"error"},
        lambda lease: tool_call_req(lease, status=pb.TOOL_CALL_STATUS_FAILED, error="e" * (KIB + 1)),
    ),
    case(
        "RecordToolCall error over 1 KiB of UTF-8",
        {"error"},
        lambda lease: tool_call_req(lease, status=pb.TOOL_CALL_STATUS_FAILED, error="é" * 513),
    ),
    case("RecordToolCall error without FAILED", {"error"}, lambda lease: tool_call_req(lease, error="boom")),
    case(
        "RecordToolCall three bad fields",
        {"call_id", "status", "error"},
        lambda lease: tool_call_req(lease, call_id=LONG_ID, status=99, error="e" * (KIB + 1)),
    ),
    # RecordInteraction
    case(
        "RecordInteraction generation 0",
        {"lease.generation"},
        lambda lease: interaction_req(fenced(lease, generation=0)),
    ),
    case(
        "RecordInteraction interaction_id 129 chars",
        {"interaction_id"},
        lambda lease: interaction_req(lease, interaction_id=LONG_ID),
    ),
    case(
        "RecordInteraction interaction_id empty",
        {"interaction_id"},
        lambda lease: interaction_req(lease, interaction_id=""),
    ),
    case("RecordInteraction kind empty", {"kind"}, lambda lease: interaction_req(lease, kind="")),
    case("RecordInteraction kind 129 bytes", {"kind"}, lambda lease: interaction_req(lease, kind="k" * 129)),
    # CompleteTurn
    case(
        "CompleteTurn lease.turn_id space",
        {"lease.turn_id"},
        lambda lease: complete_req(fenced(lease, turn_id="t 1")),
    ),
    case(
        "CompleteTurn outcome unspecified",
        {"outcome"},
        lambda lease: complete_req(lease, outcome=pb.TURN_OUTCOME_UNSPECIFIED),
    ),
    case(
        "CompleteTurn outcome LOST",
        {"outcome"},
        lambda lease: complete_req(lease, outcome=pb.TURN_OUTCOME_LOST),
    ),
    case("CompleteTurn outcome 99", {"outcome"}, lambda lease: complete_req(lease, outcome=99)),
    case(
        "CompleteTurn error over 1 KiB",
        {"error"},
        lambda lease: complete_req(lease, outcome=pb.TURN_OUTCOME_FAILED, error="e" * (KIB + 1)),
    ),
    case("CompleteTurn error with COMPLETED", {"error"}, lambda lease: complete_req(lease, error="oops")),
    # CancelTurn
    case("CancelTurn session missing", SESSION_MISSING, lambda lease: cancel_req(lease, session=None)),
    case(
        "CancelTurn project_id empty",
        {"session.project_id"},
        lambda lease: cancel_req(lease, session=ref(lease, project_id="")),
    ),
    case(
        "CancelTurn expected_turn_id ill-formed",
        {"expected_turn_id"},
        lambda lease: cancel_req(lease, expected_turn_id="t1;drop"),
    ),
    case(
        "CancelTurn expected_turn_id 129 chars",
        {"expected_turn_id"},
        lambda lease: cancel_req(lease, expected_turn_id=LONG_ID),
    ),
    case("CancelTurn reason over 1 KiB", {"reason"}, lambda lease: cancel_req(lease, reason="r" * (KIB + 1))),
    case(
        "CancelTurn request_id 129 chars", {"request_id"}, lambda lease: cancel_req(lease, request_id=LONG_ID)
    ),
    case("CancelTurn queue 99", {"queue"}, lambda lease: cancel_req(lease, queue=99)),
    # ResumeQueue
    case("ResumeQueue session missing", SESSION_MISSING, lambda _: pb.ResumeQueueRequest()),
    case(
        "ResumeQueue session_id ill-formed",
        {"session.session_id"},
        lambda lease: resume_req(lease, session=ref(lease, session_id="s 1")),
    ),
    case(
        "ResumeQueue request_id 129 chars",
        {"request_id"},
        lambda lease: resume_req(lease, request_id=LONG_ID),
    ),
    # ResolveInteraction
    case(
        "ResolveInteraction session missing", SESSION_MISSING, lambda lease: resolve_req(lease, session=None)
    ),
    case(
        "ResolveInteraction session_id non-ASCII",
        {"session.session_id"},
        lambda lease: resolve_req(lease, session=ref(lease, session_id="sé")),
    ),
    case(
        "ResolveInteraction interaction_id empty",
        {"interaction_id"},
        lambda lease: resolve_req(lease, interaction_id=""),
    ),
    case(
        "ResolveInteraction resolution over 16 KiB",
        {"resolution"},
        lambda lease: resolve_req(lease, resolution="y" * (16 * KIB + 1)),
    ),
    # WatchSession
    case("WatchSession session missing", SESSION_MISSING, lambda lease: watch_req(lease, session=None)),
    case(
        "WatchSession project_id 129 chars",
        {"session.project_id"},
        lambda lease: watch_req(lease, session=ref(lease, project_id=LONG_ID)),
    ),
    case("WatchSession after_seq negative", {"after_seq"}, lambda lease: watch_req(lease, after_seq=-1)),
    case("WatchSession turn_id ill-formed", {"turn_id"}, lambda lease: watch_req(lease, turn_id="*")),
    # GetSession
    case("GetSession session missing", SESSION_MISSING, lambda _: pb.GetSessionRequest()),
    case(
        "GetSession session_id empty",
        {"session.session_id"},
        lambda lease: get_session_req(lease, session=ref(lease, session_id="")),
    ),
    # GetTurn
    case("GetTurn turn_id empty", {"turn_id"}, lambda lease: get_turn_req(lease, turn_id="")),
    case("GetTurn turn_id 129 chars", {"turn_id"}, lambda lease: get_turn_req(lease, turn_id=LONG_ID)),
    case(
        "GetTurn project_id leading dot",
        {"session.project_id"},
        lambda lease: get_turn_req(lease, session=ref(lease, project_id=".p")),
    ),
    # ListTurns
    case("ListTurns session missing", SESSION_MISSING, lambda _: pb.ListTurnsRequest()),
    case("ListTurns page_size negative", {"page_size"}, lambda lease: list_turns_req(lease, page_size=-1)),
    case("ListTurns page_size 501", {"page_size"}, lambda lease: list_turns_req(lease, page_size=501)),
    case(
        "ListTurns page_token garbage",
        {"page_token"},
        lambda lease: list_turns_req(lease, page_token="not a token!"),
    ),
    case(
        "ListTurns page_token other base64",
        {"page_token"},
        lambda lease: list_turns_req(lease, page_token=base64.urlsafe_b64encode(b"x12").decode()),
    ),
    case(
        "ListTurns page_token with non-ASCII digits",
        {"page_token"},
        lambda lease: list_turns_req(lease, page_token=base64.urlsafe_b64encode("g²".encode()).decode()),
    ),
    case(
        "ListTurns page_token beyond int64",
        {"page_token"},
        lambda lease: list_turns_req(lease, page_token=base64.urlsafe_b64encode(b"g" + b"9" * 40).decode()),
    ),
    case(
        "ListTurns page_token overlong",
        {"page_token"},
        lambda lease: list_turns_req(lease, page_token="Z" * 100),
    ),
    case(
        "ListTurns two bad fields",
        {"page_size", "page_token"},
        lambda lease: list_turns_req(lease, page_size=1000, page_token="%%"),
    ),
    # ListActiveSessions
    case("ListActiveSessions project_id missing", {"project_id"}, lambda _: pb.ListActiveSessionsRequest()),
    case(
        "ListActiveSessions project_id ill-formed",
        {"project_id"},
        lambda _: pb.ListActiveSessionsRequest(project_id=LONG_ID),
    ),
    case(
        "ListActiveSessions page_size and page_token",
        {"page_size", "page_token"},
        lambda lease: pb.ListActiveSessionsRequest(
            project_id=lease.session.project_id,
            page_size=501,
            page_token=base64.urlsafe_b64encode(b"d12/not a session").decode(),
        ),
    ),
    # ListSessions
    case("ListSessions project_id missing", {"project_id"}, lambda _: pb.ListSessionsRequest()),
    case(
        "ListSessions project_id ill-formed",
        {"project_id"},
        lambda _: pb.ListSessionsRequest(project_id=LONG_ID),
    ),
    case(
        "ListSessions page_token of ListActiveSessions",
        {"page_token"},
        lambda lease: pb.ListSessionsRequest(
            project_id=lease.session.project_id,
            page_token=base64.urlsafe_b64encode(b"d12/s1").decode(),
        ),
    ),
    case(
        "ListSessions page_size and page_token",
        {"page_size", "page_token"},
        lambda lease: pb.ListSessionsRequest(
            project_id=lease.session.project_id, page_size=-1, page_token="not a token!"
        ),
    ),
    # ListProjects
    case("ListProjects page_size 501", {"page_size"}, lambda _: pb.ListProjectsRequest(page_size=501)),
    case(
        "ListProjects page_token naming an ill-formed project",
        {"page_token"},
        lambda _: pb.ListProjectsRequest(
            page_token=base64.urlsafe_b64encode(b"p" + LONG_ID.encode()).decode()
        ),
    ),
]

_SERVICE = {
    "AdmitTurn": "admission",
    "Heartbeat": "admission",
    "RecordToolCall": "admission",
    "RecordInteraction": "admission",
    "CompleteTurn": "admission",
    "CancelTurn": "control",
    "ResolveInteraction": "control",
    "ResumeQueue": "control",
    "WatchSession": "sessions",
    "GetSession": "sessions",
    "GetTurn": "sessions",
    "ListTurns": "sessions",
    "ListActiveSessions": "sessions",
    "ListSessions": "sessions",
    "ListProjects": "sessions",
}


async def _call(client: Client, request: Message) -> None:
    """Calls the RPC that takes `request`; a stream is read up to its first message or error."""
    rpc = type(request).__name__.removesuffix("Request")
    method = getattr(getattr(client, _SERVICE[rpc]), rpc)
    if rpc != "WatchSession":
        await method(request)
        return
    call = method(request)
    try:
        await call.read()
    finally:
        call.cancel()


async def _live_turn(client: Client, session: pb.SessionRef) -> pb.TurnLease:
    """A running turn t1 with an open call c-open and a pending interaction i-open."""
    lease = (await admit(client, session, "t1", "r1")).lease
    await record_call(client, lease, "c-open")
    await record_interaction(client, lease, "i-open")
    return lease


@pytest.mark.parametrize(("build", "fields"), CASES)
async def test_bad_input_is_invalid_argument_with_bad_request_naming_the_fields_and_changes_nothing(
    client: Client, session: pb.SessionRef, build: Build, fields: set[str]
) -> None:
    lease = await _live_turn(client, session)
    before = await state_of(client, session, "t1")

    refusal = await refused(_call(client, build(lease)))

    assert refusal.code == grpc.StatusCode.INVALID_ARGUMENT
    assert refusal.fields == fields
    assert refusal.bad_request is not None
    assert all(v.description for v in refusal.bad_request.field_violations)
    assert LONG_ID not in refusal.status.message
    assert await state_of(client, session, "t1") == before  # and the server still answers


async def test_values_at_the_input_limits_are_accepted(client: Client, session: pb.SessionRef) -> None:
    longest = pb.SessionRef(project_id="p" * 128, session_id=session.session_id.ljust(128, "s"))
    admitted = await admit(client, longest, "t" * 128, "r" * 128, lease_ttl=DAY_S)
    lease = admitted.lease
    assert (await client.admission.Heartbeat(heartbeat_req(lease, lease_ttl=seconds(1)))).directive == (
        pb.DIRECTIVE_CONTINUE
    )
    await heartbeat(client, lease)
    name_limit = tool_call_req(lease, call_id="c" * 128, name="n" * 256)
    assert (await client.admission.RecordToolCall(name_limit)).recorded
    failed = tool_call_req(lease, call_id="c2", status=pb.TOOL_CALL_STATUS_FAILED, error="é" * 512)
    assert (await client.admission.RecordToolCall(failed)).tool_call.error == "é" * 512
    asked = interaction_req(lease, interaction_id="i" * 128, kind="k" * 128)
    assert (await client.admission.RecordInteraction(asked)).recorded
    resolved = await resolve(client, longest, "i" * 128, "y" * 16 * KIB)
    assert len(resolved.interaction.resolution) == 16 * KIB
    assert (await stop(client, longest, "t" * 128, reason="r" * KIB, request_id="q" * 128)).HasField(
        "cancelled"
    )
    done = await complete(client, lease, pb.TURN_OUTCOME_CANCELLED, "e" * KIB)
    assert done.turn.error == "e" * KIB
    page = await client.sessions.ListTurns(pb.ListTurnsRequest(session=longest, page_size=500))
    assert [t.turn_id for t in page.turns] == ["t" * 128]


async def test_queue_waits_at_their_limits_are_accepted(client: Client, session: pb.SessionRef) -> None:
    await admit(client, session, "t1", "r1")
    for turn_id, mode, wait_s in (("t2", ENQUEUE, 1), ("tx", INTERRUPT, QUEUE_WAIT_CAP_S)):
        queued = (await admit(client, session, turn_id, "r2", mode=mode, max_queue_wait=wait_s)).queued
        assert queued.turn_id == turn_id
        assert queued.expires_at.ToMicroseconds() - queued.queued_at.ToMicroseconds() == wait_s * 1_000_000
