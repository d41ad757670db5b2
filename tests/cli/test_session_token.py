"""`turngate token session` (a gateway mints a session token through a real server) and
`turngate token key` (a new signing key entry), next to `turngate token NAME` (a tokens-file entry)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.cli.conftest import Turngate
from tests.support.principals import CURRENT, GATEWAY_A, PROJECT_A, WATCHER_A, keys_toml, write_tokens
from tests.support.servers import running, settings_for
from turngate.client import Client, Idle
from turngate.service.auth.session_tokens import load_keys
from turngate.service.operate import ExitCode


@pytest.fixture(scope="module")
async def keyed_target(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    tmp = tmp_path_factory.mktemp("cli-session-tokens")
    keys = tmp / "keys.toml"
    keys.write_text(keys_toml(CURRENT))
    settings = settings_for(str(tmp), auth_file=write_tokens(tmp / "tokens.toml"), session_token_keys=keys)
    async for server, _ in running(settings):
        yield f"127.0.0.1:{server.port}"


@pytest.fixture
async def turngate(keyed_target: str) -> AsyncIterator[Turngate]:
    command = Turngate(keyed_target, PROJECT_A)
    yield command
    await command.kill_leftovers()


async def test_token_session_prints_the_token_alone_and_its_expiry_on_stderr(turngate: Turngate) -> None:
    ran = await turngate.run(
        "token", "session", "s1", "--stop", "--ttl", "2m", TURNGATE_TOKEN=GATEWAY_A.token
    )
    assert ran.code == ExitCode.OK, ran.err
    [token] = ran.lines
    [line] = ran.err.splitlines()
    assert line.startswith("turngate: session token  session=s1 scopes=WATCH,STOP expires_at=")
    assert token not in ran.err
    expires = datetime.fromisoformat(line.split("expires_at=")[1].split()[0])
    assert timedelta(seconds=100) < expires - datetime.now(UTC) <= timedelta(seconds=121)
    async with Client(turngate.target, PROJECT_A, token=token) as page:
        assert (await page.get_session("s1")).session.session_id == "s1"
        assert isinstance(await page.gateway().stop("s1"), Idle)


async def test_token_session_json_is_the_contracts_response(turngate: Turngate) -> None:
    ran = await turngate.run("token", "session", "s1", "--json", TURNGATE_TOKEN=GATEWAY_A.token)
    assert ran.code == ExitCode.OK, ran.err
    [reply] = ran.objects()
    assert reply["scopes"] == ["SESSION_TOKEN_SCOPE_WATCH"]
    assert set(reply) == {"token", "expiresAt", "scopes"}


async def test_token_session_by_a_watcher_exits_7_and_a_bad_ttl_exits_2(turngate: Turngate) -> None:
    watcher, too_long, unreadable = await asyncio.gather(
        turngate.run("token", "session", "s1", TURNGATE_TOKEN=WATCHER_A.token),
        turngate.run("token", "session", "s1", "--ttl", "2h", TURNGATE_TOKEN=GATEWAY_A.token),
        turngate.run("token", "session", "s1", "--ttl", "soon", TURNGATE_TOKEN=GATEWAY_A.token),
    )
    assert (watcher.code, watcher.out) == (ExitCode.PERMISSION_DENIED, "")
    assert "lacks the role this call needs (gateway)" in watcher.err
    assert (too_long.code, too_long.out) == (ExitCode.USAGE, "")
    assert "ttl: must be between 10s and 1h" in too_long.err
    assert unreadable.code == ExitCode.USAGE
    assert "must be a duration such as 90s, 15m or 1h" in unreadable.err


async def test_token_key_prints_an_entry_the_keys_file_takes(turngate: Turngate, tmp_path: Path) -> None:
    named, dated, bad = await asyncio.gather(
        turngate.run("token", "key", "k-2027-01"),
        turngate.run("token", "key"),
        turngate.run("token", "key", "bad id"),
    )
    assert named.code == dated.code == 0
    path = tmp_path / "keys.toml"
    path.write_text(named.out + dated.out)
    assert len(load_keys(path)) == 2
    assert named.out.startswith('[[keys]]\nid = "k-2027-01"\n')
    assert "move it first" in named.err
    assert (bad.code, bad.out) == (ExitCode.USAGE, "")
    assert "invalid signing key: id" in bad.err


async def test_token_entry_and_the_short_form_make_the_same_kind_of_entry(turngate: Turngate) -> None:
    entry, short, named_session = await asyncio.gather(
        turngate.run("token", "entry", "gw", "--role", "gateway", "--project", "acme"),
        turngate.run("token", "gw", "--role", "gateway", "--project", "acme"),
        turngate.run("token", "entry", "session", "--role", "watcher", "--project", "acme"),
    )
    for ran in (entry, short, named_session):
        assert ran.code == 0, ran.err
        assert ran.out.startswith("[[principals]]\n")
    assert json.dumps("session") in named_session.out
