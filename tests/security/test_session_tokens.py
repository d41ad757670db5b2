"""Session tokens through real calls: a gateway mints one for one session, a page watches (and,
when allowed, stops) with it; every forgery, expiry, scope and session violation is refused;
keys rotate and reload; minting is the gateway's, for its own projects, with strict input."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import jwt
import pytest
from connectrpc.errors import ConnectError
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from google.protobuf.duration_pb2 import Duration

from tests.security.access_calls import DENIED, SAMPLES, TRANSPORTS, call, call_over, short
from tests.support.calls import admit, refused, seconds
from tests.support.http_calls import http_client, status, stream
from tests.support.principals import (
    ADMIN,
    CURRENT,
    EVERYONE,
    GATEWAY_A,
    GATEWAY_B,
    PROJECT_A,
    PROJECT_B,
    RUNNER_A,
    WATCHER_A,
    Named,
    bearer,
    client_as,
    keys_toml,
    write_tokens,
)
from tests.support.processes import run_cli
from tests.support.servers import running, settings_for
from turngate.client import Client, PermissionDenied, SessionTokenScope
from turngate.service.auth.access import ROLES, SCOPES
from turngate.service.auth.principals import Scope, entry_id, token_digest
from turngate.service.auth.session_tokens import KeysFileError, load_keys
from turngate.service.server import TurngateServer
from turngate.v1 import turngate_pb2 as pb

PREVIOUS = ("k-previous", b"p" * 32)
STRANGER = b"s" * 32
SESSION = pb.SessionRef(project_id=PROJECT_A, session_id="s-matrix")  # the sessions SAMPLES name
WATCH = "/turngate.v1.SessionService/WatchSession"
GET = "/turngate.v1.SessionService/GetSession"
CANCEL = "/turngate.v1.ControlService/CancelTurn"
MINT = "/turngate.v1.ControlService/MintSessionToken"
LIST_ACTIVE = "/turngate.v1.SessionService/ListActiveSessions"
LIST_SESSIONS = "/turngate.v1.SessionService/ListSessions"
LIST_PROJECTS = "/turngate.v1.SessionService/ListProjects"
ADMISSION = sorted(method for method in ROLES if "/turngate.v1.AdmissionService/" in method)


@pytest.fixture(scope="module")
async def keyed(tmp_path_factory: pytest.TempPathFactory, tokens_file: Path) -> AsyncIterator[TurngateServer]:
    """A server requiring bearer tokens whose session tokens are signed by CURRENT; PREVIOUS,
    still listed, verifies. Its HTTP listener is on: a page sends the same token over HTTP."""
    tmp = tmp_path_factory.mktemp("keyed")
    keys = tmp / "keys.toml"
    keys.write_text(keys_toml(CURRENT, PREVIOUS))
    settings = settings_for(
        str(tmp), auth_file=tokens_file, session_token_keys=keys, http_listen="127.0.0.1:0"
    )
    async for server, _ in running(settings):
        yield server


async def mint(
    port: int,
    session: pb.SessionRef = SESSION,
    *,
    allow_stop: bool = False,
    ttl: float | None = None,
    minter: Named = GATEWAY_A,
) -> pb.MintSessionTokenResponse:
    request = pb.MintSessionTokenRequest(session=session, allow_stop=allow_stop)
    if ttl is not None:
        request.ttl.CopyFrom(seconds(ttl))
    async with client_as(port, bearer(minter)) as gateway:
        reply: pb.MintSessionTokenResponse = await gateway.control.MintSessionToken(request)
    return reply


def claims(**changes: Any) -> dict[str, Any]:
    """What the service puts in a token for SESSION (watch only), with `changes` (None: left out)."""
    now = int(time.time())
    base = {
        "iss": "turngate",
        "aud": "turngate.v1",
        "sub": GATEWAY_A.name,
        "minter": entry_id(token_digest(GATEWAY_A.token)),
        "iat": now,
        "nbf": now,
        "exp": now + 600,
        "jti": uuid.uuid4().hex,
        "project": SESSION.project_id,
        "session": SESSION.session_id,
        "scope": "watch",
    }
    return {key: value for key, value in {**base, **changes}.items() if value is not None}


def forge(
    secret: bytes | Ed25519PrivateKey = CURRENT[1],
    *,
    kid: str | None = CURRENT[0],
    algorithm: str = "HS256",
    **changes: Any,
) -> str:
    headers = {} if kid is None else {"kid": kid}
    return jwt.encode(claims(**changes), secret, algorithm=algorithm, headers=headers)


def with_bearer(token: str) -> str:
    return f"Bearer {token}"


async def status_of(
    server: TurngateServer, token: str, method: str = GET, request: Any = None, transport: str = "grpc"
) -> grpc.StatusCode:
    sample = request if request is not None else SAMPLES[short(method)]()
    return await call_over(transport, server, with_bearer(token), method, sample)


def segment(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


# The happy path.


async def test_a_gateway_mints_a_watch_token_that_watches_and_reads_its_session(
    keyed: TurngateServer,
) -> None:
    session = pb.SessionRef(project_id=PROJECT_A, session_id=f"s-{uuid.uuid4().hex[:12]}")
    async with client_as(keyed.port, bearer(RUNNER_A)) as runner:
        await admit(runner, session, "t1")
    before = datetime.now(UTC)
    minted = await mint(keyed.port, session)
    assert list(minted.scopes) == [pb.SESSION_TOKEN_SCOPE_WATCH]
    expires = minted.expires_at.ToDatetime(tzinfo=UTC)
    assert before + timedelta(minutes=15) - timedelta(seconds=2) <= expires <= before + timedelta(minutes=16)
    header, payload = (
        jwt.get_unverified_header(minted.token),
        jwt.decode(minted.token, CURRENT[1], audience="turngate.v1", algorithms=["HS256"]),
    )
    assert header["kid"] == CURRENT[0]
    assert (payload["project"], payload["session"], payload["scope"]) == (
        PROJECT_A,
        session.session_id,
        "watch",
    )
    async with client_as(keyed.port, with_bearer(minted.token)) as page:
        stream = page.sessions.WatchSession(pb.WatchSessionRequest(session=session))
        first = await stream.read()
        assert isinstance(first, pb.WatchSessionResponse)
        assert first.event.snapshot.active.turn_id == "t1"
        stream.cancel()
        assert (
            await page.sessions.GetSession(pb.GetSessionRequest(session=session))
        ).snapshot.active.turn_id == "t1"
        turn = await page.sessions.GetTurn(pb.GetTurnRequest(session=session, turn_id="t1"))
        assert turn.turn.turn_id == "t1"
        listed = await page.sessions.ListTurns(pb.ListTurnsRequest(session=session))
        assert [record.turn_id for record in listed.turns] == ["t1"]


async def test_a_token_minted_with_allow_stop_stops_its_sessions_turn(keyed: TurngateServer) -> None:
    session = pb.SessionRef(project_id=PROJECT_A, session_id=f"s-{uuid.uuid4().hex[:12]}")
    async with client_as(keyed.port, bearer(RUNNER_A)) as runner:
        await admit(runner, session, "t1")
    minted = await mint(keyed.port, session, allow_stop=True, ttl=60)
    assert list(minted.scopes) == [pb.SESSION_TOKEN_SCOPE_WATCH, pb.SESSION_TOKEN_SCOPE_STOP]
    async with client_as(keyed.port, with_bearer(minted.token)) as page:
        answer = await page.control.CancelTurn(pb.CancelTurnRequest(session=session, expected_turn_id="t1"))
    assert answer.cancelled.stopping_turn_id == "t1"


async def test_a_token_minted_with_allow_stop_clears_its_sessions_queue_and_a_watch_only_one_may_not(
    keyed: TurngateServer,
) -> None:
    """ClearQueue needs the scope Stop needs: a Stop with queue action CLEAR clears the queue too."""
    session = pb.SessionRef(project_id=PROJECT_A, session_id=f"s-{uuid.uuid4().hex[:12]}")
    async with client_as(keyed.port, bearer(RUNNER_A)) as runner:
        await admit(runner, session, "t1")
        await admit(runner, session, "t2", mode=pb.ADMISSION_MODE_ENQUEUE)
    watching = await mint(keyed.port, session, ttl=60)
    stopping = await mint(keyed.port, session, allow_stop=True, ttl=60)
    async with client_as(keyed.port, with_bearer(watching.token)) as page:
        denial = await refused(page.control.ClearQueue(pb.ClearQueueRequest(session=session)))
    assert denial.code is grpc.StatusCode.PERMISSION_DENIED
    async with client_as(keyed.port, with_bearer(stopping.token)) as page:
        cleared = await page.control.ClearQueue(pb.ClearQueueRequest(session=session))
    assert list(cleared.cleared_turn_ids) == ["t2"]
    assert cleared.active_turn_id == "t1"


async def test_a_token_minted_with_allow_stop_may_neither_steer_nor_move_the_queue(
    keyed: TurngateServer,
) -> None:
    """No scope grants SteerTurn or MoveQueuedTurn: a page steers through its gateway."""
    session = pb.SessionRef(project_id=PROJECT_A, session_id=f"s-{uuid.uuid4().hex[:12]}")
    async with client_as(keyed.port, bearer(RUNNER_A)) as runner:
        await admit(runner, session, "t1")
        await admit(runner, session, "t2", mode=pb.ADMISSION_MODE_ENQUEUE)
    stopping = await mint(keyed.port, session, allow_stop=True, ttl=60)
    steer = pb.SteerTurnRequest(session=session, expected_turn_id="t1", steer_id="s1", content="go")
    async with client_as(keyed.port, with_bearer(stopping.token)) as page:
        denials = [
            await refused(page.control.SteerTurn(steer)),
            await refused(
                page.control.MoveQueuedTurn(pb.MoveQueuedTurnRequest(session=session, turn_id="t2"))
            ),
        ]
        current = (await page.sessions.GetSession(pb.GetSessionRequest(session=session))).snapshot
    assert [denial.code for denial in denials] == [grpc.StatusCode.PERMISSION_DENIED] * 2
    assert list(current.active.pending_steer_ids) == []


async def test_an_admin_mints_for_any_project(keyed: TurngateServer) -> None:
    theirs = pb.SessionRef(project_id=PROJECT_B, session_id="s1")
    minted = await mint(keyed.port, theirs, minter=ADMIN)
    assert (
        await status_of(keyed, minted.token, GET, pb.GetSessionRequest(session=theirs)) is grpc.StatusCode.OK
    )


# What a session token may call: its scopes, on its one session.

TOKEN_KINDS = {"watch-only": False, "watch-and-stop": True}
MATRIX = [(kind, method) for kind in TOKEN_KINDS for method in sorted(ROLES)]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(("kind", "method"), MATRIX, ids=[f"{k}-{short(m)}" for k, m in MATRIX])
async def test_a_session_token_against_each_rpc_is_allowed_by_its_scopes_or_permission_denied(
    keyed: TurngateServer, kind: str, method: str, transport: str
) -> None:
    minted = await mint(keyed.port, allow_stop=TOKEN_KINDS[kind])
    code = await status_of(keyed, minted.token, method, transport=transport)
    scope = SCOPES.get(method)
    if scope is Scope.WATCH or (scope is Scope.STOP and TOKEN_KINDS[kind]):
        assert code not in DENIED, f"{kind} must be allowed {short(method)}"
    else:
        assert code is grpc.StatusCode.PERMISSION_DENIED, f"{kind} must be denied {short(method)}"


async def test_scope_watch_only_trying_stop_is_permission_denied_and_nothing_stops(
    keyed: TurngateServer,
) -> None:
    session = pb.SessionRef(project_id=PROJECT_A, session_id=f"s-{uuid.uuid4().hex[:12]}")
    async with client_as(keyed.port, bearer(RUNNER_A)) as runner:
        await admit(runner, session, "t1")
    minted = await mint(keyed.port, session)
    async with client_as(keyed.port, with_bearer(minted.token)) as page:
        denial = await refused(page.control.CancelTurn(pb.CancelTurnRequest(session=session, force=True)))
        assert denial.code is grpc.StatusCode.PERMISSION_DENIED
        assert "lacks the scope this call needs (stop)" in denial.status.message
        snapshot = (await page.sessions.GetSession(pb.GetSessionRequest(session=session))).snapshot
    assert snapshot.phase == pb.SESSION_PHASE_RUNNING


@pytest.mark.parametrize("method", ADMISSION, ids=short)
async def test_trying_admission_rpcs_is_permission_denied(keyed: TurngateServer, method: str) -> None:
    minted = await mint(keyed.port, allow_stop=True)
    assert await status_of(keyed, minted.token, method) is grpc.StatusCode.PERMISSION_DENIED


async def test_trying_list_active_sessions_is_permission_denied(keyed: TurngateServer) -> None:
    minted = await mint(keyed.port, allow_stop=True)
    assert await status_of(keyed, minted.token, LIST_ACTIVE) is grpc.StatusCode.PERMISSION_DENIED


@pytest.mark.parametrize("method", [LIST_SESSIONS, LIST_PROJECTS], ids=short)
async def test_a_session_token_may_list_neither_its_projects_sessions_nor_the_projects(
    keyed: TurngateServer, method: str
) -> None:
    minted = await mint(keyed.port, allow_stop=True)
    assert await status_of(keyed, minted.token, method) is grpc.StatusCode.PERMISSION_DENIED


async def test_a_session_token_minting_another_is_permission_denied(keyed: TurngateServer) -> None:
    minted = await mint(keyed.port, allow_stop=True)
    assert await status_of(keyed, minted.token, MINT) is grpc.StatusCode.PERMISSION_DENIED


async def test_other_session_same_project_is_permission_denied_whether_it_exists_or_not(
    keyed: TurngateServer,
) -> None:
    existing = pb.SessionRef(project_id=PROJECT_A, session_id=f"s-{uuid.uuid4().hex[:12]}")
    never = pb.SessionRef(project_id=PROJECT_A, session_id=f"s-{uuid.uuid4().hex[:12]}")
    async with client_as(keyed.port, bearer(RUNNER_A)) as runner:
        await admit(runner, existing, "t1")
    minted = await mint(keyed.port, allow_stop=True)
    messages = []
    async with client_as(keyed.port, with_bearer(minted.token)) as page:
        for other in (existing, never):
            for attempt in (
                page.sessions.GetSession(pb.GetSessionRequest(session=other)),
                page.sessions.GetTurn(pb.GetTurnRequest(session=other, turn_id="t1")),
                page.sessions.ListTurns(pb.ListTurnsRequest(session=other)),
                page.control.CancelTurn(pb.CancelTurnRequest(session=other, force=True)),
            ):
                denial = await refused(attempt)
                assert denial.code is grpc.StatusCode.PERMISSION_DENIED
                messages.append(denial.status.message)
        watch = page.sessions.WatchSession(pb.WatchSessionRequest(session=existing))
        denial = await refused(watch.read())
        assert denial.code is grpc.StatusCode.PERMISSION_DENIED
    # The same answer for a session that exists and one that never did: nothing is revealed.
    assert messages[:4] == messages[4:]
    assert set(messages) == {"this session token does not reach the session this request names"}


async def test_other_project_same_session_id_is_permission_denied(keyed: TurngateServer) -> None:
    theirs = pb.SessionRef(project_id=PROJECT_B, session_id=SESSION.session_id)
    minted = await mint(keyed.port, allow_stop=True)
    for method, request in (
        (GET, pb.GetSessionRequest(session=theirs)),
        (WATCH, pb.WatchSessionRequest(session=theirs)),
        (CANCEL, pb.CancelTurnRequest(session=theirs, force=True)),
        (LIST_ACTIVE, pb.ListActiveSessionsRequest(project_id=PROJECT_B)),
    ):
        assert await status_of(keyed, minted.token, method, request) is grpc.StatusCode.PERMISSION_DENIED


async def test_a_watch_stream_ends_unauthenticated_when_its_session_token_expires(
    keyed: TurngateServer,
) -> None:
    token = forge(exp=int(time.time()) + 2)
    async with client_as(keyed.port, with_bearer(token)) as page:
        stream = page.sessions.WatchSession(pb.WatchSessionRequest(session=SESSION))
        first = await stream.read()
        assert isinstance(first, pb.WatchSessionResponse)
        assert first.event.HasField("snapshot")
        async with asyncio.timeout(10):
            ended = await refused(stream.read())
    assert ended.code is grpc.StatusCode.UNAUTHENTICATED
    assert ended.status.message == "the session token expired; resume with a new one"


async def test_an_http_watch_ends_unauthenticated_when_its_session_token_expires(
    keyed: TurngateServer,
) -> None:
    token = forge(exp=int(time.time()) + 2)
    async with http_client(keyed.http_port) as page:
        responses = stream(page, WATCH, pb.WatchSessionRequest(session=SESSION), with_bearer(token))
        first = await anext(aiter(responses))
        assert first.event.HasField("snapshot")
        async with asyncio.timeout(10):
            with pytest.raises(ConnectError) as ended:
                await anext(aiter(responses))
    assert status(ended.value) is grpc.StatusCode.UNAUTHENTICATED
    assert ended.value.message == "the session token expired; resume with a new one"


# Forgeries and expiry: UNAUTHENTICATED, as an unknown token.


def tampered(token: str, **changes: Any) -> str:
    header, payload, signature = token.split(".")
    decoded = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return ".".join((header, segment({**decoded, **changes}), signature))


def alg_none() -> str:
    return ".".join((segment({"alg": "none", "typ": "JWT", "kid": CURRENT[0]}), segment(claims()), ""))


FORGERIES: dict[str, Callable[[], str]] = {
    "bad-signature": lambda: forge(STRANGER),
    "unknown-kid": lambda: forge(kid="k-nobody"),
    "no-kid": lambda: forge(kid=None),
    "expired": lambda: forge(
        iat=int(time.time()) - 700, nbf=int(time.time()) - 700, exp=int(time.time()) - 60
    ),
    "not-yet-valid": lambda: forge(nbf=int(time.time()) + 120),
    "wrong-audience": lambda: forge(aud="someone-else"),
    "audience-list": lambda: forge(aud=["turngate.v1", "someone-else"]),
    "wrong-issuer": lambda: forge(iss="an-identity-provider"),
    "alg-none": alg_none,
    "alg-confusion-hs512": lambda: forge(algorithm="HS512"),
    "alg-confusion-eddsa": lambda: forge(Ed25519PrivateKey.generate(), algorithm="EdDSA"),
    "missing-exp": lambda: forge(exp=None),
    "missing-jti": lambda: forge(jti=None),
    "unknown-scope": lambda: forge(scope="watch admin"),
    "stop-without-watch": lambda: forge(scope="stop"),
    "lifetime-beyond-the-cap": lambda: forge(exp=int(time.time()) + 7200),
    "bad-session-id": lambda: forge(session="has space"),
    "minter-without-the-gateway-role": lambda: forge(sub=WATCHER_A.name),
    "minter-of-another-project": lambda: forge(sub=GATEWAY_B.name),
    "minter-unknown": lambda: forge(sub="nobody"),
    "not-a-jwt": lambda: "a.b.c",
}


# PyJWT warns that a 32-byte key is short for HS512: that forgery uses the real (HS256) secret.
@pytest.mark.filterwarnings("ignore::jwt.warnings.InsecureKeyLengthWarning")
@pytest.mark.parametrize("forgery", sorted(FORGERIES))
async def test_a_forged_or_expired_session_token_is_unauthenticated(
    keyed: TurngateServer, forgery: str
) -> None:
    token = FORGERIES[forgery]()
    for transport in TRANSPORTS:
        assert await status_of(keyed, token, transport=transport) is grpc.StatusCode.UNAUTHENTICATED
        assert await status_of(keyed, token, WATCH, transport=transport) is grpc.StatusCode.UNAUTHENTICATED


async def test_a_well_forged_control_token_is_accepted(keyed: TurngateServer) -> None:
    """The forgeries above differ from this only in what they break."""
    for transport in TRANSPORTS:
        assert await status_of(keyed, forge(), transport=transport) is grpc.StatusCode.OK
    assert await status_of(keyed, forge(PREVIOUS[1], kid=PREVIOUS[0])) is grpc.StatusCode.OK


@pytest.mark.parametrize(
    "changes",
    [
        {"session": "s-other"},
        {"project": PROJECT_B},
        {"scope": "watch stop"},
        {"exp": int(time.time()) + 3000},
    ],
    ids=["session", "project", "scope", "exp"],
)
async def test_tampered_claims_are_unauthenticated(keyed: TurngateServer, changes: dict[str, Any]) -> None:
    minted = await mint(keyed.port)
    assert await status_of(keyed, minted.token) is grpc.StatusCode.OK
    assert await status_of(keyed, tampered(minted.token, **changes)) is grpc.StatusCode.UNAUTHENTICATED


@pytest.mark.parametrize("claim", ["exp", "iat", "nbf"])
async def test_a_session_token_whose_date_is_a_numeric_string_is_unauthenticated(
    keyed: TurngateServer, claim: str
) -> None:
    """JWT dates are JSON numbers (RFC 7519 NumericDate); PyJWT alone would take "1767225600"."""
    as_text: dict[str, Any] = {claim: str(claims()[claim])}
    assert await status_of(keyed, forge()) is grpc.StatusCode.OK
    for transport in TRANSPORTS:
        token = forge(**as_text)
        assert await status_of(keyed, token, transport=transport) is grpc.StatusCode.UNAUTHENTICATED


async def test_refusals_are_logged_without_the_token_or_a_secret(
    keyed: TurngateServer, caplog: pytest.LogCaptureFixture
) -> None:
    token = forge(STRANGER)
    with caplog.at_level(logging.INFO, logger="turngate"):
        assert await status_of(keyed, token) is grpc.StatusCode.UNAUTHENTICATED
        minted = await mint(keyed.port)
    assert "session token refused: Signature verification failed" in caplog.text
    for secret in (
        token,
        minted.token,
        *(base64.urlsafe_b64encode(s).decode() for s in (CURRENT[1], STRANGER)),
    ):
        assert secret not in caplog.text


# Minting: who, for what, with which input.


@pytest.mark.parametrize("minter", [WATCHER_A, RUNNER_A], ids=lambda named: named.name)
async def test_minting_by_a_watcher_or_a_runner_is_permission_denied(
    keyed: TurngateServer, minter: Named
) -> None:
    denial = await refused(mint(keyed.port, minter=minter))
    assert denial.code is grpc.StatusCode.PERMISSION_DENIED
    assert "lacks the role this call needs (gateway)" in denial.status.message


async def test_minting_for_another_project_is_permission_denied(keyed: TurngateServer) -> None:
    denial = await refused(mint(keyed.port, pb.SessionRef(project_id=PROJECT_B, session_id="s1")))
    assert denial.code is grpc.StatusCode.PERMISSION_DENIED


async def test_minting_with_a_session_token_or_none_is_refused(keyed: TurngateServer) -> None:
    minted = await mint(keyed.port, allow_stop=True)
    assert await status_of(keyed, minted.token, MINT) is grpc.StatusCode.PERMISSION_DENIED
    assert (
        await call(keyed.port, None, MINT, SAMPLES["MintSessionToken"]()) is grpc.StatusCode.UNAUTHENTICATED
    )


@pytest.mark.parametrize(
    ("request_", "fields"),
    [
        (pb.MintSessionTokenRequest(session=SESSION, ttl=seconds(3601)), {"ttl"}),
        (pb.MintSessionTokenRequest(session=SESSION, ttl=seconds(9)), {"ttl"}),
        (pb.MintSessionTokenRequest(session=SESSION, ttl=seconds(-60)), {"ttl"}),
        (
            pb.MintSessionTokenRequest(session=SESSION, ttl=Duration(seconds=60, nanos=-1)),
            {"ttl"},
        ),
        (pb.MintSessionTokenRequest(session=pb.SessionRef(project_id=PROJECT_A)), {"session.session_id"}),
        (
            pb.MintSessionTokenRequest(
                session=pb.SessionRef(project_id=PROJECT_A, session_id="bad id"), ttl=seconds(86400)
            ),
            {"session.session_id", "ttl"},
        ),
    ],
    ids=[
        "ttl-above-the-cap",
        "ttl-below-the-floor",
        "ttl-negative",
        "ttl-malformed",
        "no-session-id",
        "bad-id-and-ttl",
    ],
)
async def test_ttl_above_the_cap_and_other_bad_input_is_invalid_argument_with_field_violations(
    keyed: TurngateServer, request_: pb.MintSessionTokenRequest, fields: set[str]
) -> None:
    async with client_as(keyed.port, bearer(GATEWAY_A)) as gateway:
        denial = await refused(gateway.control.MintSessionToken(request_))
    assert denial.code is grpc.StatusCode.INVALID_ARGUMENT
    assert denial.fields == fields


async def test_a_missing_session_is_invalid_argument(keyed: TurngateServer) -> None:
    async with client_as(keyed.port, bearer(ADMIN)) as admin:
        denial = await refused(admin.control.MintSessionToken(pb.MintSessionTokenRequest()))
    assert denial.code is grpc.StatusCode.INVALID_ARGUMENT
    assert denial.fields == {"session", "session.project_id", "session.session_id"}


async def test_ttl_at_the_cap_is_minted_for_an_hour(keyed: TurngateServer) -> None:
    minted = await mint(keyed.port, ttl=3600)
    payload = jwt.decode(minted.token, CURRENT[1], audience="turngate.v1", algorithms=["HS256"])
    assert payload["exp"] - payload["iat"] == 3600
    assert minted.expires_at.seconds == payload["exp"]


# No keys: minting is a failed precondition naming the setting; a session token is unknown.


async def test_without_keys_minting_is_failed_precondition_and_a_session_token_unauthenticated(
    guarded: TurngateServer,
) -> None:
    denial = await refused(mint(guarded.port))
    assert denial.code is grpc.StatusCode.FAILED_PRECONDITION
    assert "TURNGATE_SESSION_TOKEN_KEYS" in denial.status.message
    assert await status_of(guarded, forge()) is grpc.StatusCode.UNAUTHENTICATED


# Rotation and revocation: the keys file and the tokens file, reloaded.


async def test_rotation_a_previous_key_verifies_while_listed_and_not_after_it_is_removed(
    tmp_path: Path,
) -> None:
    keys = tmp_path / "keys.toml"
    keys.write_text(keys_toml(PREVIOUS))
    settings = settings_for(
        str(tmp_path), auth_file=write_tokens(tmp_path / "tokens.toml"), session_token_keys=keys
    )
    async for server, _ in running(settings):
        old = (await mint(server.port)).token
        assert jwt.get_unverified_header(old)["kid"] == PREVIOUS[0]

        keys.write_text(keys_toml(PREVIOUS, CURRENT))  # the new key verifies first, on every replica
        server.reload()
        keys.write_text(keys_toml(CURRENT, PREVIOUS))  # then signs
        server.reload()
        new = (await mint(server.port)).token
        assert jwt.get_unverified_header(new)["kid"] == CURRENT[0]
        assert await status_of(server, old) is grpc.StatusCode.OK
        assert await status_of(server, new) is grpc.StatusCode.OK

        keys.write_text(keys_toml(CURRENT))  # the previous key retired
        server.reload()
        assert await status_of(server, old) is grpc.StatusCode.UNAUTHENTICATED
        assert await status_of(server, new) is grpc.StatusCode.OK

        keys.write_text("keys = []")  # a broken file is not taken: the keys in force stay
        server.reload()
        assert await status_of(server, new) is grpc.StatusCode.OK


async def test_revoking_the_minting_gateway_revokes_its_session_tokens(tmp_path: Path) -> None:
    keys = tmp_path / "keys.toml"
    keys.write_text(keys_toml(CURRENT))
    tokens = write_tokens(tmp_path / "tokens.toml")
    async for server, _ in running(settings_for(str(tmp_path), auth_file=tokens, session_token_keys=keys)):
        minted = (await mint(server.port)).token
        assert await status_of(server, minted) is grpc.StatusCode.OK
        write_tokens(tokens, tuple(named for named in EVERYONE if named is not GATEWAY_A))
        server.reload()
        assert await status_of(server, minted) is grpc.StatusCode.UNAUTHENTICATED


async def test_a_session_token_stays_revoked_when_a_principal_of_its_minters_name_is_added_again(
    tmp_path: Path,
) -> None:
    """A token is bound to the tokens-file entry that minted it, not to the minter's name: a
    gateway revoked, then a principal of the same name added with another token, revives nothing."""
    keys = tmp_path / "keys.toml"
    keys.write_text(keys_toml(CURRENT))
    tokens = write_tokens(tmp_path / "tokens.toml")
    others = tuple(named for named in EVERYONE if named is not GATEWAY_A)
    async for server, _ in running(settings_for(str(tmp_path), auth_file=tokens, session_token_keys=keys)):
        minted = (await mint(server.port)).token
        assert await status_of(server, minted) is grpc.StatusCode.OK
        write_tokens(tokens, others)
        server.reload()
        assert await status_of(server, minted) is grpc.StatusCode.UNAUTHENTICATED
        readded = replace(GATEWAY_A, secret="added-again-fedcba9876543210")
        write_tokens(tokens, (*others, readded))
        server.reload()
        assert await status_of(server, minted) is grpc.StatusCode.UNAUTHENTICATED
        assert await status_of(server, (await mint(server.port, minter=readded)).token) is grpc.StatusCode.OK
        write_tokens(tokens, (*others, GATEWAY_A, readded))  # the minting entry itself listed again
        server.reload()
        assert await status_of(server, minted) is grpc.StatusCode.OK


# The keys file.


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        (
            '[[keys]]\nid = "k1"\nsecret = "c2hvcnQ"\n',
            "keys.0.secret: Value error, must be base64url of at least 32 bytes",
        ),
        ('[[keys]]\nid = "k1"\nsecret = "not base64 !!"\n', "keys.0.secret"),
        ('[[keys]]\nid = "bad id"\nsecret = "' + "A" * 43 + '"\n', "keys.0.id"),
        ("keys = []", "keys: List should have at least 1 item"),
        (keys_toml(CURRENT, CURRENT), "lists the same id twice"),
        ('[[keys]]\nid = "k1"\nsecret = "' + "A" * 43 + '"\nsecrte = "c2hvcnQ"\n', "keys.0.secrte"),
    ],
    ids=["short-secret", "not-base64", "bad-id", "no-keys", "same-id-twice", "extra-field"],
)
def test_an_invalid_keys_file_is_refused_naming_the_field_never_the_secret(
    tmp_path: Path, text: str, complaint: str
) -> None:
    path = tmp_path / "keys.toml"
    path.write_text(text)
    with pytest.raises(KeysFileError) as refused_file:
        load_keys(path)
    assert complaint in str(refused_file.value)
    assert "c2hvcnQ" not in str(refused_file.value)
    assert base64.urlsafe_b64encode(CURRENT[1]).decode() not in str(refused_file.value)


def test_a_json_keys_file_and_a_key_that_repr_does_not_show(tmp_path: Path) -> None:
    secret = base64.urlsafe_b64encode(CURRENT[1]).decode()
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"keys": [{"id": CURRENT[0], "secret": secret}]}))
    keys = load_keys(path)
    assert len(keys) == 1
    shown = repr(vars(keys))
    assert CURRENT[0] in shown
    assert "ccc" not in shown


# The SDK.


async def test_the_sdk_mints_a_typed_token_whose_client_watches_but_may_not_stop(
    keyed: TurngateServer,
) -> None:
    target = f"127.0.0.1:{keyed.port}"
    async with Client(target, PROJECT_A, token=GATEWAY_A.token) as gateway_client:
        minted = await gateway_client.gateway().mint_session_token("s-sdk", ttl=120)
    assert minted.scopes == (SessionTokenScope.WATCH,)
    assert timedelta(seconds=100) < minted.expires_at - datetime.now(UTC) <= timedelta(seconds=121)
    assert minted.token not in repr(minted)
    async with Client(target, PROJECT_A, token=minted.token) as page:
        assert (await page.get_session("s-sdk")).session.session_id == "s-sdk"
        with pytest.raises(PermissionDenied):
            await page.gateway().stop("s-sdk")


def test_serve_with_an_invalid_keys_file_refuses_to_start_in_one_line(tmp_path: Path) -> None:
    write_tokens(tmp_path / "tokens.toml")
    (tmp_path / "keys.toml").write_text('[[keys]]\nid = "k1"\nsecret = "c2hvcnQ"\n')
    args = (
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--auth-file",
        "tokens.toml",
        "--session-token-keys",
        "keys.toml",
    )
    result = run_cli(tmp_path, *args)
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == (
        "turngate: signing keys file keys.toml is invalid: keys.0.secret: Value error, must be base64url "
        "of at least 32 bytes"
    )
    assert "c2hvcnQ" not in result.stderr
