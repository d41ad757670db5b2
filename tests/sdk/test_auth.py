"""The SDK with bearer tokens against a real server that requires them (the principals of
tests/support/principals.py): the token goes with every call, watch streams included; no token,
an unknown one, another project or a missing role are typed errors sent once, never retried; a
runner principal cannot take over, or write, a turn admitted to another one, and a turn whose
writes are refused so is abandoned without a retried write."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import grpc
import pytest

from tests.sdk.wire import Wire
from tests.support.backoff import FAST
from tests.support.principals import (
    ADMIN,
    EVERYONE,
    GATEWAY_A,
    PROJECT_A,
    PROJECT_B,
    RUNNER_A,
    RUNNER_A2,
    WATCHER_A,
    Named,
    tokens_toml,
    write_tokens,
)
from tests.support.servers import OwnServer, running, settings_for
from tests.support.waiting import eventually
from turngate.client import (
    AdmissionRefused,
    Cancelled,
    Client,
    NotAuthenticated,
    PermissionDenied,
    SessionPhase,
    SessionSnapshot,
    SettledBy,
    TurngateError,
    TurnHeldByOtherPrincipal,
    TurnOutcome,
    TurnPhase,
    WriteRefused,
)
from turngate.client import sync as sync_client

CALL_TIMEOUT_S = 2.0
UNKNOWN = Named("nobody", ("admin",), "*")
"""Has a token, which no tokens file lists."""


@pytest.fixture(scope="module")
async def target(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    tmp = tmp_path_factory.mktemp("sdk-auth")
    async for server, _ in running(settings_for(str(tmp), auth_file=write_tokens(tmp / "tokens.toml"))):
        yield f"127.0.0.1:{server.port}"


def client_as(target: str, named: Named | None, project: str = PROJECT_A, wire: Wire | None = None) -> Client:
    """An SDK client presenting `named`'s token (None: none)."""
    return Client(
        target,
        project,
        token=None if named is None else named.token,
        interceptors=() if wire is None else wire.interceptors,
        backoff=FAST,
        call_timeout=CALL_TIMEOUT_S,
    )


Call = Callable[[], Awaitable[object]]


def calls(client: Client, session_id: str) -> dict[str, Call]:
    """One call of each kind the SDK makes, by what it does."""
    return {
        "read": lambda: client.get_session(session_id),
        "stop": lambda: client.gateway().stop(session_id),
        "watch": lambda: anext(client.watch(session_id)),
        "enter": lambda: client.runner("r1").turn(session_id, "t1").__aenter__(),
    }


async def refusal(call: Call) -> TurngateError:
    with pytest.raises(TurngateError) as failed:
        await call()
    return failed.value


async def test_the_token_goes_with_every_call_watch_streams_included(target: str, session_id: str) -> None:
    async with (
        client_as(target, RUNNER_A) as runner,
        client_as(target, GATEWAY_A) as gateway,
        gateway.watch(session_id) as events,
    ):
        first = (await anext(events)).body
        assert isinstance(first, SessionSnapshot)
        assert first.phase == SessionPhase.IDLE
        async with runner.runner("r1").turn(session_id, "t1", lease_ttl=60) as turn:
            async with turn.tool_call("call-1", "search"):
                pass
            assert isinstance(await gateway.gateway().stop(session_id, expected_turn_id="t1"), Cancelled)
            # Pushed by the turn's own watch (the runner role may follow its session), not
            # learnt from a heartbeat, which is 20 s away.
            await asyncio.wait_for(turn.stop_requested.wait(), timeout=CALL_TIMEOUT_S)
        kinds = [(await anext(events)).kind for _ in range(5)]
    assert kinds == ["turn_admitted", "tool_call", "tool_call", "stop_requested", "turn_settled"]
    assert turn.outcome == TurnOutcome.CANCELLED


async def test_a_turn_whose_watch_is_refused_starts_at_once_and_is_refused_an_interaction(
    own_server: OwnServer, tmp_path: Path, session_id: str
) -> None:
    async with own_server(auth_file=write_tokens(tmp_path / "tokens.toml"), max_watches_per_session=1) as (
        server,
        _,
    ):
        target = f"127.0.0.1:{server.port}"
        async with client_as(target, WATCHER_A) as watcher, watcher.watch(session_id) as events:
            await anext(events)  # the session's one watch stream is taken
            entering = time.monotonic()
            async with (
                client_as(target, RUNNER_A) as runner,
                runner.runner("r1").turn(session_id, "t1") as turn,
            ):
                assert time.monotonic() - entering < CALL_TIMEOUT_S / 2, "the turn waited for its watch"
                with pytest.raises(TurngateError) as refused:
                    async with asyncio.timeout(CALL_TIMEOUT_S):
                        await turn.interaction("ask-1", "approval")
            record = await watcher.get_turn(session_id, "t1")
    assert refused.value.code is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert (record.outcome, list(record.interactions)) == (TurnOutcome.COMPLETED, [])


def synchronously(target: str, session_id: str) -> SessionSnapshot:
    with sync_client.Client(target, PROJECT_A, token=WATCHER_A.token, backoff=FAST) as client:
        return client.get_session(session_id)


async def test_the_sync_client_sends_its_token(target: str, session_id: str) -> None:
    snapshot = await asyncio.to_thread(synchronously, target, session_id)
    assert snapshot.session.session_id == session_id


@pytest.mark.parametrize("named", [None, UNKNOWN], ids=["no token", "unknown token"])
async def test_without_a_known_token_every_call_is_not_authenticated_and_sent_once(
    target: str, session_id: str, named: Named | None
) -> None:
    wire = Wire()
    async with client_as(target, named, wire=wire) as client:
        refused = [await refusal(call) for call in calls(client, session_id).values()]
    assert all(isinstance(error, NotAuthenticated) for error in refused)
    assert {error.code for error in refused} == {grpc.StatusCode.UNAUTHENTICATED}
    assert wire.sent == {"GetSession": 1, "CancelTurn": 1, "WatchSession": 1, "AdmitTurn": 1}


@pytest.mark.parametrize(
    ("named", "project", "denied"),
    [
        (GATEWAY_A, PROJECT_B, ("read", "stop", "watch")),
        (RUNNER_A, PROJECT_B, ("enter",)),
        (WATCHER_A, PROJECT_A, ("stop", "enter")),
        (RUNNER_A, PROJECT_A, ("stop",)),
    ],
    ids=["gateway of another project", "runner of another project", "watcher", "runner"],
)
async def test_another_project_or_a_missing_role_is_permission_denied_and_sent_once(
    target: str, session_id: str, named: Named, project: str, denied: tuple[str, ...]
) -> None:
    wire = Wire()
    async with client_as(target, named, project, wire=wire) as client:
        each = calls(client, session_id)
        refused = [await refusal(each[name]) for name in denied]
    assert all(isinstance(error, PermissionDenied) for error in refused)
    assert {(error.code, error.reason) for error in refused} == {(grpc.StatusCode.PERMISSION_DENIED, "")}
    assert sum(wire.sent.values()) == len(denied)


async def test_runner_r2_cannot_enter_r1s_turn_which_goes_on_untouched(target: str, session_id: str) -> None:
    async with client_as(target, RUNNER_A) as r1, client_as(target, RUNNER_A2) as r2:
        async with r1.runner("r1").turn(session_id, "t1") as turn:
            with pytest.raises(TurnHeldByOtherPrincipal) as refused:
                async with r2.runner("r1").turn(session_id, "t1"):
                    pytest.fail("another principal entered the turn")
            async with turn.tool_call("call-1", "search"):
                pass
        assert not turn.abandoned.is_set()
    assert isinstance(refused.value, PermissionDenied)
    assert isinstance(refused.value, AdmissionRefused)
    assert isinstance(refused.value, WriteRefused)
    assert (refused.value.code, refused.value.reason) == (
        grpc.StatusCode.PERMISSION_DENIED,
        "TURN_HELD_BY_OTHER_PRINCIPAL",
    )
    assert turn.settled is not None
    assert (turn.settled.outcome, turn.settled.settled_by) == (
        TurnOutcome.COMPLETED,
        SettledBy.RUNNER,
    )


def reassigned(token: str, to: Named) -> str:
    """A tokens-file entry giving `token` to the principal `to`."""
    digest = hashlib.sha256(to.token.encode()).hexdigest()
    return tokens_toml((to,)).replace(digest, hashlib.sha256(token.encode()).hexdigest())


def reissue(tokens: Path, runner_token: str) -> None:
    """RUNNER_A's token revoked (UNAUTHENTICATED) or given to RUNNER_A2 (TURN_HELD_BY_OTHER_PRINCIPAL)."""
    others = tokens_toml(tuple(named for named in EVERYONE if named is not RUNNER_A))
    tokens.write_text(
        others if runner_token == "revoked" else others + "\n" + reassigned(RUNNER_A.token, RUNNER_A2)
    )


@pytest.mark.parametrize(
    ("runner_token", "refused"),
    [("revoked", "UNAUTHENTICATED"), ("reassigned", "TURN_HELD_BY_OTHER_PRINCIPAL")],
)
async def test_a_refused_write_abandons_the_turn_and_nothing_more_is_sent(
    own_server: OwnServer, tmp_path: Path, session_id: str, runner_token: str, refused: str
) -> None:
    tokens = write_tokens(tmp_path / "tokens.toml")
    wire = Wire()
    async with own_server(auth_file=tokens) as (server, _):
        target = f"127.0.0.1:{server.port}"
        async with client_as(target, RUNNER_A, wire=wire) as runner, client_as(target, ADMIN) as admin:
            # Heartbeats every second: the refused write comes first.
            async with runner.runner("r1").turn(session_id, "t1", lease_ttl=3.0) as turn:
                reissue(tokens, runner_token)
                server.reload()
                before = wire.sent.copy()
                async with turn.tool_call("call-1", "search"):
                    assert turn.abandoned.is_set()
                    assert turn.stop_requested.is_set()
                    await asyncio.sleep(turn.heartbeat_interval * 1.2)  # a heartbeat falls due
            record = await admin.get_turn(session_id, "t1")
    assert refused in turn.stop_reason
    assert wire.sent - before == {"RecordToolCall": 1}
    assert (record.phase, list(record.tool_calls)) == (TurnPhase.RUNNING, [])


async def test_r2_cannot_heartbeat_r1s_turn_which_is_abandoned_and_settled_lost(
    own_server: OwnServer, tmp_path: Path, session_id: str
) -> None:
    tokens = write_tokens(tmp_path / "tokens.toml")
    wire = Wire()
    async with own_server(auth_file=tokens) as (server, _):
        target = f"127.0.0.1:{server.port}"
        async with client_as(target, RUNNER_A, wire=wire) as runner, client_as(target, ADMIN) as admin:
            async with runner.runner("r1").turn(session_id, "t1", lease_ttl=1.5) as turn:
                reissue(tokens, "reassigned")  # the runner's heartbeats now come from R2
                server.reload()
                before = wire.sent.copy()
                await asyncio.wait_for(turn.abandoned.wait(), timeout=5.0)
                await asyncio.sleep(turn.heartbeat_interval * 1.2)  # another heartbeat would fall due

            async def settled_lost() -> bool:
                record = await admin.get_turn(session_id, "t1")
                return (record.outcome, record.settled_by) == (TurnOutcome.LOST, SettledBy.WATCHDOG)

            await eventually(settled_lost)
    assert "TURN_HELD_BY_OTHER_PRINCIPAL" in turn.stop_reason
    assert wire.sent - before == {"Heartbeat": 1}


@pytest.mark.parametrize(
    ("target", "warned"),
    [
        ("127.0.0.1:50051", False),
        ("localhost:50051", False),
        ("[::1]:50051", False),
        ("unix:/run/turngate.sock", False),
        ("turngate.internal:50051", True),
        ("10.0.0.7:50051", True),
        ("dns:///turngate.internal:50051", True),
    ],
)
async def test_a_token_sent_in_plaintext_beyond_this_host_is_warned_about(
    target: str, warned: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="turngate.client"):
        async with Client(target, PROJECT_A, token=RUNNER_A.token):
            pass
    plaintext = [r for r in caplog.records if "in plaintext" in r.getMessage()]
    assert bool(plaintext) is warned
    assert all(RUNNER_A.token not in r.getMessage() for r in caplog.records)
