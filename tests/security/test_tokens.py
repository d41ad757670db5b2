"""The tokens file: what it accepts and refuses (without echoing secrets), identifying callers,
and reloading on SIGHUP without dropping connections."""

from __future__ import annotations

import asyncio
import hashlib
import json
import signal
from pathlib import Path

import grpc
import pytest

from tests.support.calls import admit, stop
from tests.support.principals import (
    ADMIN,
    EVERYONE,
    GATEWAY_A,
    PROJECT_A,
    RUNNER_A,
    bearer,
    client_as,
    write_tokens,
)
from tests.support.processes import free_port, run_cli, spawn_server
from tests.support.waiting import eventually
from turngate.service.auth.principals import Principal, Role, TokensFileError, load_tokens
from turngate.v1 import turngate_pb2 as pb

SECRET = "s3cret-token-never-to-be-echoed"


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def test_a_tokens_file_names_principals_by_the_digest_of_their_tokens(tmp_path: Path) -> None:
    tokens = load_tokens(write_tokens(tmp_path / "tokens.toml"))
    assert len(tokens) == len(EVERYONE)
    assert tokens.identify(RUNNER_A.token) == Principal(
        "runner-a", frozenset({Role.RUNNER}), frozenset({PROJECT_A})
    )
    assert tokens.identify(ADMIN.token) == Principal("admin", frozenset({Role.ADMIN}), None)
    assert tokens.identify("not-a-token") is None
    assert tokens.identify("") is None


def test_a_json_tokens_file_and_two_tokens_for_one_principal_rotation(tmp_path: Path) -> None:
    entry = {"name": "gw", "roles": ["gateway", "watcher"], "projects": ["p1", "p2"]}
    path = tmp_path / "tokens.json"
    path.write_text(
        json.dumps(
            {
                "principals": [
                    {**entry, "token_sha256": digest("old")},
                    {**entry, "token_sha256": digest("new")},
                ]
            }
        )
    )
    tokens = load_tokens(path)
    assert tokens.identify("old") == tokens.identify("new") is not None


@pytest.mark.parametrize(
    ("entry", "complaint"),
    [
        ({"token_sha256": SECRET}, "principals.0.token_sha256"),
        ({"roles": ["root"]}, "principals.0.roles.0"),
        ({"roles": []}, "principals.0.roles"),
        ({"projects": []}, "principals.0.projects"),
        ({"projects": ["bad project!"]}, "principals.0.projects"),
        ({"name": "has space"}, "principals.0.name"),
        ({"token": SECRET}, "principals.0.token"),
    ],
    ids=[
        "token-as-digest",
        "unknown-role",
        "no-roles",
        "no-projects",
        "bad-project",
        "bad-name",
        "extra-field",
    ],
)
def test_an_invalid_tokens_file_is_refused_naming_the_field_never_the_value(
    tmp_path: Path, entry: dict[str, object], complaint: str
) -> None:
    valid = {"name": "p", "token_sha256": digest("t"), "roles": ["runner"], "projects": "*"}
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"principals": [{**valid, **entry}]}))
    with pytest.raises(TokensFileError) as refused:
        load_tokens(path)
    assert complaint in str(refused.value)
    assert SECRET not in str(refused.value)


def test_the_same_token_twice_and_an_unreadable_file_are_refused(tmp_path: Path) -> None:
    twice = tmp_path / "twice.toml"
    twice.write_text(write_tokens(tmp_path / "one.toml", (RUNNER_A,)).read_text() * 2)
    with pytest.raises(TokensFileError, match="same token_sha256 twice"):
        load_tokens(twice)
    with pytest.raises(TokensFileError, match="cannot read"):
        load_tokens(tmp_path / "missing.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text(f'[[principals]]\nname = "{SECRET}')
    with pytest.raises(TokensFileError) as refused:
        load_tokens(broken)
    assert SECRET not in str(refused.value)


def test_serve_with_an_invalid_tokens_file_refuses_to_start(tmp_path: Path) -> None:
    (tmp_path / "tokens.toml").write_text("principals = 3")
    result = run_cli(tmp_path, "serve", "--listen", "127.0.0.1:0", "--auth-file", "tokens.toml")
    assert result.returncode == 1
    assert "tokens file tokens.toml is invalid" in result.stderr
    assert "Traceback" not in result.stderr


async def test_sighup_reloads_the_tokens_file_without_dropping_connections(tmp_path: Path) -> None:
    tokens = write_tokens(tmp_path / "tokens.toml", (RUNNER_A, ADMIN))
    session = pb.SessionRef(project_id=PROJECT_A, session_id="s-reload")
    port = free_port()
    server_log = tmp_path / f"serve-{port}.log"  # where spawn_server sends the server's stderr
    async with (
        spawn_server(tmp_path, "--auth-file", str(tokens), port=port) as served,
        client_as(port, bearer(ADMIN)) as admin,
        client_as(port, bearer(GATEWAY_A)) as gateway,
    ):
        watch = admin.sessions.WatchSession(pb.WatchSessionRequest(session=session))
        first = await watch.read()
        assert isinstance(first, pb.WatchSessionResponse)
        assert first.event.HasField("snapshot")
        with pytest.raises(grpc.aio.AioRpcError) as before:
            await stop(gateway, session)
        assert before.value.code() is grpc.StatusCode.UNAUTHENTICATED

        write_tokens(tokens, (ADMIN, GATEWAY_A))  # the gateway is added, runner-a revoked
        served.process.send_signal(signal.SIGHUP)

        async def gateway_admitted() -> bool:
            try:
                await stop(gateway, session)
            except grpc.aio.AioRpcError as error:
                if error.code() is not grpc.StatusCode.UNAUTHENTICATED:
                    raise
                return False
            return True

        await eventually(gateway_admitted)
        async with client_as(port, bearer(RUNNER_A)) as revoked:
            with pytest.raises(grpc.aio.AioRpcError) as after:
                await admit(revoked, session)
            assert after.value.code() is grpc.StatusCode.UNAUTHENTICATED

        # The watch opened before the reload still streams, over the same connection.
        await admit(admin, session, "t-after-reload")
        async with asyncio.timeout(5):
            async for response in watch:
                if response.event.HasField("turn_admitted"):
                    break

        # A broken file is not taken: the tokens in force stay.
        tokens.write_text("this is not toml [")
        served.process.send_signal(signal.SIGHUP)

        async def reload_refused() -> bool:
            """The server read the broken file and said it kept its tokens (server.reload)."""
            return "kept the current tokens" in await asyncio.to_thread(server_log.read_text)

        await eventually(reload_refused)
        await stop(gateway, session)
        watch.cancel()
    log = await asyncio.to_thread(server_log.read_text)
    assert "tokens reloaded: 2" in log
    assert "kept the current tokens" in log


def test_turngate_token_prints_an_entry_that_names_the_new_token(tmp_path: Path) -> None:
    made = run_cli(
        tmp_path, "token", "runner-eu", "--role", "runner", "--project", "acme", "--project", "beta"
    )
    assert made.returncode == 0, made.stderr
    token = made.stderr.rsplit(": ", 1)[1].strip()
    path = tmp_path / "tokens.toml"
    path.write_text(made.stdout)
    assert load_tokens(path).identify(token) == Principal(
        "runner-eu", frozenset({Role.RUNNER}), frozenset({"acme", "beta"})
    )
    assert token not in made.stdout, "the file keeps only the digest"


def test_turngate_token_refuses_a_bad_name_with_usage(tmp_path: Path) -> None:
    made = run_cli(tmp_path, "token", "bad name", "--role", "runner", "--project", "*")
    assert made.returncode == 2
    assert "invalid token entry: name" in made.stderr
