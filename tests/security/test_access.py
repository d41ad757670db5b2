"""Authentication and authorization through real calls: every role against every RPC (the
matrix is generated from the contract), INTERRUPT of another principal's turn (Stop's roles),
missing and wrong tokens, project isolation, and a turn's writes reserved to the principal that
admitted it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable

import grpc
import pytest
from google.protobuf.message import Message

from tests.security.access_calls import DENIED, SAMPLES, TRANSPORTS, call, call_over, short
from tests.support.calls import admit, assert_reason, enqueue, get_turn, refused, state_of
from tests.support.principals import (
    ADMIN,
    GATEWAY_A,
    GATEWAY_B,
    PROJECT_A,
    PROJECT_B,
    RUNNER_A,
    RUNNER_A2,
    RUNNER_GATEWAY_A,
    WATCHER_A,
    Named,
    bearer,
    client_as,
)
from turngate.service.auth.access import ROLES
from turngate.service.codec import dump_session
from turngate.service.core import SessionKey
from turngate.service.server import TurngateServer
from turngate.v1 import turngate_pb2 as pb

ROLE_HOLDERS = {"runner": RUNNER_A, "gateway": GATEWAY_A, "watcher": WATCHER_A, "admin": ADMIN}
MATRIX = [(role, method) for role in ROLE_HOLDERS for method in sorted(ROLES)]
ADMIT = "/turngate.v1.AdmissionService/AdmitTurn"
CANCEL = "/turngate.v1.ControlService/CancelTurn"
# Who sends AdmitTurn(INTERRUPT) while RUNNER_A's turn runs: itself, another runner of the
# project, and a holder of each other role.
INTERRUPTERS = {
    "runner-own-turn": RUNNER_A,
    "other-runner": RUNNER_A2,
    "runner-and-gateway": RUNNER_GATEWAY_A,
    "gateway": GATEWAY_A,
    "watcher": WATCHER_A,
    "admin": ADMIN,
}


def may_interrupt(interrupter: Named) -> bool:
    """From the roles table: AdmitTurn's roles, and for a turn another principal holds, Stop's too."""
    roles = set(interrupter.roles)
    own_turn = interrupter is RUNNER_A
    return bool(roles & ROLES[ADMIT]) and (own_turn or bool(roles & ROLES[CANCEL]))


def test_the_matrix_covers_every_rpc_of_the_contract() -> None:
    assert {short(method) for method in ROLES} == set(SAMPLES)
    assert len(ROLES) == sum(len(s.methods) for s in pb.DESCRIPTOR.services_by_name.values())


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(("role", "method"), MATRIX, ids=[f"{r}-{short(m)}" for r, m in MATRIX])
async def test_each_role_against_each_rpc_is_allowed_or_permission_denied(
    guarded: TurngateServer, role: str, method: str, transport: str
) -> None:
    code = await call_over(transport, guarded, bearer(ROLE_HOLDERS[role]), method, SAMPLES[short(method)]())
    if role in ROLES[method]:
        assert code not in DENIED, f"{role} must be allowed {short(method)}"
    else:
        assert code is grpc.StatusCode.PERMISSION_DENIED, f"{role} must be denied {short(method)}"


@pytest.mark.parametrize(
    "header",
    [None, "Bearer not-a-known-token", f"Basic {RUNNER_A.token}", "Bearer", "Bearer " + "x" * 5000],
    ids=["missing", "unknown", "not-bearer", "empty", "huge"],
)
@pytest.mark.parametrize("method", sorted(ROLES), ids=short)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_no_or_wrong_token_is_unauthenticated_on_every_rpc(
    guarded: TurngateServer, header: str | None, method: str, transport: str
) -> None:
    code = await call_over(transport, guarded, header, method, SAMPLES[short(method)]())
    assert code is grpc.StatusCode.UNAUTHENTICATED


def fresh_session() -> pb.SessionRef:
    return pb.SessionRef(project_id=PROJECT_A, session_id=f"s-{uuid.uuid4().hex[:12]}")


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("interrupter", INTERRUPTERS)
async def test_interrupt_of_another_principals_turn_needs_the_role_that_may_stop_it(
    guarded: TurngateServer, interrupter: str, transport: str
) -> None:
    session = fresh_session()
    async with client_as(guarded.port, bearer(RUNNER_A)) as owner:
        await admit(owner, session, "t-victim", "r-victim")
    before = await document(guarded, session)
    request = pb.AdmitTurnRequest(
        session=session, turn_id="t-next", runner_id="r-next", mode=pb.ADMISSION_MODE_INTERRUPT
    )
    named = INTERRUPTERS[interrupter]
    code = await call_over(transport, guarded, bearer(named), ADMIT, request)
    async with client_as(guarded.port, bearer(ADMIN)) as admin:
        victim = await get_turn(admin, session, "t-victim")
    if may_interrupt(named):
        assert code is grpc.StatusCode.OK, f"{interrupter} may interrupt"
        assert victim.phase == pb.TURN_PHASE_STOPPING
    else:
        assert code is grpc.StatusCode.PERMISSION_DENIED, f"{interrupter} must be denied"
        assert victim.phase == pb.TURN_PHASE_RUNNING
        assert await document(guarded, session) == before


async def test_interrupt_of_another_principals_stopping_turn_leaves_the_gateways_pause(
    guarded: TurngateServer,
) -> None:
    session = fresh_session()
    async with (
        client_as(guarded.port, bearer(RUNNER_A)) as owner,
        client_as(guarded.port, bearer(GATEWAY_A)) as gateway,
        client_as(guarded.port, bearer(RUNNER_A2)) as other,
    ):
        await admit(owner, session, "t-victim", "r-victim")
        await enqueue(owner, session, "t-queued")
        await gateway.control.CancelTurn(pb.CancelTurnRequest(session=session, expected_turn_id="t-victim"))
        before = await document(guarded, session)
        interrupt = admit(other, session, "t-jump", "r-jump", mode=pb.ADMISSION_MODE_INTERRUPT)
        assert_reason(await refused(interrupt), "TURN_HELD_BY_OTHER_PRINCIPAL", admission=True)
        assert await document(guarded, session) == before


async def test_health_needs_no_token(guarded: TurngateServer) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    async with grpc.aio.insecure_channel(f"127.0.0.1:{guarded.port}") as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def document(server: TurngateServer, session: pb.SessionRef) -> bytes:
    return dump_session(await server.store.load(SessionKey(session.project_id, session.session_id)))


async def test_i11_a_gateway_of_project_a_cannot_stop_watch_or_read_project_b_and_b_is_unchanged(
    guarded: TurngateServer,
) -> None:
    shared = f"s-{uuid.uuid4().hex[:12]}"
    theirs = pb.SessionRef(project_id=PROJECT_B, session_id=shared)
    async with client_as(guarded.port, bearer(ADMIN)) as admin:
        await admit(admin, theirs, "t-b", "r-b")
        await admin.admission.RecordInteraction(
            pb.RecordInteractionRequest(
                lease=(await admit(admin, theirs, "t-b", "r-b")).lease, interaction_id="i1", kind="approval"
            )
        )
        before = (await document(guarded, theirs), await state_of(admin, theirs, "t-b"))

    attempts: list[tuple[str, Message]] = [
        ("/turngate.v1.ControlService/CancelTurn", pb.CancelTurnRequest(session=theirs, force=True)),
        (
            "/turngate.v1.ControlService/CancelTurn",
            pb.CancelTurnRequest(session=theirs, expected_turn_id="t-b"),
        ),
        (
            "/turngate.v1.ControlService/ResolveInteraction",
            pb.ResolveInteractionRequest(session=theirs, interaction_id="i1", resolution="approved"),
        ),
        ("/turngate.v1.ControlService/ResumeQueue", pb.ResumeQueueRequest(session=theirs)),
        ("/turngate.v1.ControlService/ClearQueue", pb.ClearQueueRequest(session=theirs)),
        (
            "/turngate.v1.ControlService/MintSessionToken",
            pb.MintSessionTokenRequest(session=theirs, allow_stop=True),
        ),
        ("/turngate.v1.SessionService/WatchSession", pb.WatchSessionRequest(session=theirs)),
        ("/turngate.v1.SessionService/GetSession", pb.GetSessionRequest(session=theirs)),
        ("/turngate.v1.SessionService/GetTurn", pb.GetTurnRequest(session=theirs, turn_id="t-b")),
        ("/turngate.v1.SessionService/ListTurns", pb.ListTurnsRequest(session=theirs)),
        (
            "/turngate.v1.SessionService/ListActiveSessions",
            pb.ListActiveSessionsRequest(project_id=PROJECT_B),
        ),
        ("/turngate.v1.SessionService/ListSessions", pb.ListSessionsRequest(project_id=PROJECT_B)),
    ]
    for transport in TRANSPORTS:
        for method, request in attempts:
            code = await call_over(transport, guarded, bearer(GATEWAY_A), method, request)
            assert code is grpc.StatusCode.PERMISSION_DENIED, f"{short(method)} over {transport}"

    async with client_as(guarded.port, bearer(ADMIN)) as admin:
        after = (await document(guarded, theirs), await state_of(admin, theirs, "t-b"))
    assert after == before, "project B's session changed"
    # Their own gateway still can.
    code = await call(
        guarded.port,
        bearer(GATEWAY_B),
        "/turngate.v1.ControlService/CancelTurn",
        pb.CancelTurnRequest(session=theirs),
    )
    assert code is grpc.StatusCode.OK


async def test_i11_list_projects_shows_a_principal_only_its_projects_and_an_admin_every_one(
    guarded: TurngateServer,
) -> None:
    ours = fresh_session()
    theirs = pb.SessionRef(project_id=PROJECT_B, session_id=ours.session_id)
    async with client_as(guarded.port, bearer(ADMIN)) as admin:
        for session in (ours, theirs):
            await admit(admin, session, "t1", "r1")
        everything = await admin.sessions.ListProjects(pb.ListProjectsRequest(page_size=500))
    assert {PROJECT_A, PROJECT_B} <= {p.project_id for p in everything.projects}

    for principal in (GATEWAY_A, WATCHER_A):
        async with client_as(guarded.port, bearer(principal)) as client:
            projects = await client.sessions.ListProjects(pb.ListProjectsRequest())
            assert [p.project_id for p in projects.projects] == [PROJECT_A], principal.name
            listed = await client.sessions.ListSessions(pb.ListSessionsRequest(project_id=PROJECT_A))
            assert ours.session_id in [s.snapshot.session.session_id for s in listed.sessions]
    async with client_as(guarded.port, bearer(GATEWAY_B)) as client:
        projects = await client.sessions.ListProjects(pb.ListProjectsRequest())
        assert [p.project_id for p in projects.projects] == [PROJECT_B]


async def test_turn_held_by_other_principal_r2_cannot_heartbeat_record_or_complete_r1s_turn(
    guarded: TurngateServer,
) -> None:
    session = pb.SessionRef(project_id=PROJECT_A, session_id=f"s-{uuid.uuid4().hex[:12]}")
    async with (
        client_as(guarded.port, bearer(RUNNER_A)) as r1,
        client_as(guarded.port, bearer(RUNNER_A2)) as r2,
    ):
        lease = (await admit(r1, session, "t1", "runner-process")).lease
        before = await document(guarded, session)
        writes: list[Awaitable[object]] = [
            r2.admission.Heartbeat(pb.HeartbeatRequest(lease=lease)),
            r2.admission.RecordToolCall(
                pb.RecordToolCallRequest(lease=lease, call_id="c1", name="x", status=pb.TOOL_CALL_STATUS_OPEN)
            ),
            r2.admission.RecordInteraction(
                pb.RecordInteractionRequest(lease=lease, interaction_id="i1", kind="k")
            ),
            r2.admission.CompleteTurn(pb.CompleteTurnRequest(lease=lease, outcome=pb.TURN_OUTCOME_FAILED)),
        ]
        for write in writes:
            assert_reason(await refused(write), "TURN_HELD_BY_OTHER_PRINCIPAL")
        # The same turn id and runner id, replayed by another principal, is not the same admission.
        replay = await refused(admit(r2, session, "t1", "runner-process"))
        assert_reason(replay, "TURN_HELD_BY_OTHER_PRINCIPAL", admission=True)
        assert await document(guarded, session) == before
        reply = await r1.admission.CompleteTurn(
            pb.CompleteTurnRequest(lease=lease, outcome=pb.TURN_OUTCOME_COMPLETED)
        )
        assert reply.recorded


async def test_turn_held_by_other_principal_foreign_completions_racing_the_owner_are_all_refused(
    guarded: TurngateServer,
) -> None:
    session = pb.SessionRef(project_id=PROJECT_A, session_id=f"s-{uuid.uuid4().hex[:12]}")
    async with (
        client_as(guarded.port, bearer(RUNNER_A)) as r1,
        client_as(guarded.port, bearer(RUNNER_A2)) as r2,
    ):
        lease = (await admit(r1, session, "t1", "r")).lease
        foreign = [
            r2.admission.CompleteTurn(pb.CompleteTurnRequest(lease=lease, outcome=pb.TURN_OUTCOME_FAILED))
            for _ in range(20)
        ]
        owner = r1.admission.CompleteTurn(
            pb.CompleteTurnRequest(lease=lease, outcome=pb.TURN_OUTCOME_COMPLETED)
        )
        # The owner's completion lands among the foreign ones, before, between or after them.
        first, *others = await asyncio.gather(owner, *foreign, return_exceptions=True)
    assert isinstance(first, pb.CompleteTurnResponse)
    assert (first.recorded, first.turn.outcome) == (True, pb.TURN_OUTCOME_COMPLETED)
    codes = {other.code() for other in others if isinstance(other, grpc.aio.AioRpcError)}
    assert (len(codes), codes) == (1, {grpc.StatusCode.PERMISSION_DENIED})
    assert len(others) == 20
