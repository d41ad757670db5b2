"""The operator commands against servers that require a bearer token, TLS or mutual TLS (real
servers on real ports, certificates made in the test): the token by file, flag or variable;
exit 6 without a known token and 7 for a principal lacking the role or the project, each with one
line that never shows the token; exit 2 for a token or certificate that cannot be used."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.cli.conftest import Ran, Turngate
from tests.support.certs import Pki, make_pki, tls_settings
from tests.support.principals import ADMIN, GATEWAY_A, PROJECT_A, PROJECT_B, WATCHER_A, write_tokens
from tests.support.servers import running, settings_for
from turngate.service import cli
from turngate.service.operate import ExitCode

UNKNOWN_TOKEN = "tok-nobody-0123456789abcdef"
# A client the server refuses keeps retrying for this long (`--timeout`).
REFUSED_TIMEOUT = "0.3"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
async def guarded_target(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    """Bearer tokens (tests/support/principals.py), plaintext on loopback."""
    tmp = tmp_path_factory.mktemp("cli-auth")
    async for server, _ in running(settings_for(str(tmp), auth_file=write_tokens(tmp / "tokens.toml"))):
        yield f"127.0.0.1:{server.port}"


@pytest.fixture(scope="module")
async def tls_target(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> AsyncIterator[str]:
    """TLS and bearer tokens."""
    tmp = tmp_path_factory.mktemp("cli-tls")
    async for server, _ in running(tls_settings(str(tmp), pki, auth_file=write_tokens(tmp / "tokens.toml"))):
        yield f"127.0.0.1:{server.port}"


@pytest.fixture(scope="module")
async def mtls_target(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> AsyncIterator[str]:
    """Mutual TLS: only clients with a certificate `pki.ca` signed."""
    async for server, _ in running(tls_settings(str(tmp_path_factory.mktemp("cli-mtls")), pki, mutual=True)):
        yield f"127.0.0.1:{server.port}"


@pytest.fixture
async def turngate(guarded_target: str) -> AsyncIterator[Turngate]:
    command = Turngate(guarded_target, PROJECT_A)
    yield command
    await command.kill_leftovers()


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    """GATEWAY_A's token, as an editor saves it (with a newline)."""
    path = tmp_path / "gateway.token"
    path.write_text(GATEWAY_A.token + "\n")
    return path


def one_line(ran: Ran, code: ExitCode) -> str:
    assert (ran.code, ran.out) == (code, "")
    [line] = ran.err.splitlines()
    return line


async def test_every_command_sends_the_token_given_by_file_flag_or_variable(
    turngate: Turngate, token_file: Path
) -> None:
    file = str(token_file)
    statuses = await asyncio.gather(
        turngate.run("status", "s1", "--token-file", file, TURNGATE_TOKEN=UNKNOWN_TOKEN),
        turngate.run("status", "s1", "--token", GATEWAY_A.token, TURNGATE_TOKEN_FILE="/nonexistent"),
        turngate.run("status", "s1", TURNGATE_TOKEN_FILE=file),
        turngate.run("status", "s1", TURNGATE_TOKEN=GATEWAY_A.token),
    )
    for ran in statuses:
        assert (ran.code, ran.err, ran.lines[0].split()) == (0, "", ["session", "s1"])
    watching = await turngate.start("watch", "s1", "--token-file", file)
    assert (await watching.line()).split()[2] == "snapshot"
    stopped = await turngate.run("stop", "s1", "--token-file", file)
    assert (stopped.code, stopped.lines[0].split()[0]) == (ExitCode.IDLE, "idle")
    assert (await watching.interrupt(signal.SIGINT)).code == 0


async def test_without_a_known_token_a_command_exits_6_with_one_line(turngate: Turngate) -> None:
    missing, unknown = await asyncio.gather(
        turngate.run("status", "s1"), turngate.run("watch", "s1", TURNGATE_TOKEN=UNKNOWN_TOKEN)
    )
    required = "turngate: not authenticated: a valid bearer token is required (authorization metadata)"
    assert one_line(missing, ExitCode.UNAUTHENTICATED) == f"{required}; give --token-file or --token"
    assert one_line(unknown, ExitCode.UNAUTHENTICATED) == f"{required}; the token given was not accepted"


async def test_a_principal_lacking_the_role_or_the_project_exits_7_with_one_line(
    turngate: Turngate, token_file: Path
) -> None:
    watcher_stops, other_project = await asyncio.gather(
        turngate.run("stop", "s1", "--token", WATCHER_A.token),
        turngate.run("watch", "s1", "--project", PROJECT_B, "--token-file", str(token_file)),
    )
    assert one_line(watcher_stops, ExitCode.PERMISSION_DENIED) == (
        "turngate: permission denied: principal 'watcher-a' lacks the role this call needs (gateway)"
    )
    assert one_line(other_project, ExitCode.PERMISSION_DENIED) == (
        "turngate: permission denied: principal 'gateway-a' may not act on this project"
    )


async def test_sessions_projects_shows_only_the_tokens_projects_and_sessions_list_of_another_exits_7(
    turngate: Turngate, token_file: Path
) -> None:
    file = str(token_file)
    for project in (PROJECT_A, PROJECT_B):
        await turngate.run("stop", "s-listed", "--expect", "t1", "--project", project, "--token", ADMIN.token)
    everything, own, listed, other = await asyncio.gather(
        turngate.run("sessions", "projects", "--token", ADMIN.token),
        turngate.run("sessions", "projects", "--token-file", file),
        turngate.run("sessions", "list", "--token-file", file),
        turngate.run("sessions", "list", "--project", PROJECT_B, "--token-file", file),
    )

    assert {PROJECT_A, PROJECT_B} <= {line.split()[0] for line in everything.lines[1:]}
    assert [line.split()[0] for line in own.lines] == ["PROJECT", PROJECT_A]
    assert "s-listed" in [line.split()[0] for line in listed.lines]
    assert one_line(other, ExitCode.PERMISSION_DENIED) == (
        "turngate: permission denied: principal 'gateway-a' may not act on this project"
    )


def test_a_token_or_certificate_that_cannot_be_used_exits_2_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused before any call: run in this process."""
    for variable in [name for name in os.environ if name.startswith("TURNGATE_")]:
        monkeypatch.delenv(variable)
    empty, bad, fine = tmp_path / "empty.token", tmp_path / "bad.token", tmp_path / "fine.token"
    empty.write_text("\n")
    bad.write_text("two words\n")
    fine.write_text(GATEWAY_A.token)
    monkeypatch.setenv("TURNGATE_TOKEN_FILE", str(bad))
    runs = [
        ("--token-file", str(tmp_path / "missing")),
        ("--token-file", str(empty)),
        (),  # TURNGATE_TOKEN_FILE
        ("--token", "secret value"),
        ("--token", GATEWAY_A.token, "--token-file", str(fine)),
        ("--token-file", str(fine), "--tls-cert", str(fine)),
        ("--token-file", str(fine), "--tls-ca", str(tmp_path / "missing.pem")),
    ]
    lines = []
    for flags in runs:
        assert cli.main(["status", "s1", *flags]) == ExitCode.USAGE
        captured = capsys.readouterr()
        assert captured.out == ""
        lines.extend(captured.err.splitlines())
    unusable = "is not usable: a bearer token must be printable ASCII, not empty, without spaces or newlines"
    assert lines == [
        f"turngate: cannot read {tmp_path / 'missing'}: No such file or directory",
        f"turngate: the token in {empty} {unusable}",
        f"turngate: the token in {bad} {unusable}",
        f"turngate: the token {unusable}",
        "turngate: give --token or --token-file (TURNGATE_TOKEN or TURNGATE_TOKEN_FILE), not both",
        "turngate: a client certificate needs both --tls-cert and --tls-key",
        f"turngate: cannot read {tmp_path / 'missing.pem'}: No such file or directory",
    ]


async def test_tls_ca_by_flag_or_variable_reaches_a_tls_server_and_a_wrong_one_fails(
    tls_target: str, pki: Pki, token_file: Path
) -> None:
    turngate = Turngate(tls_target, PROJECT_A)
    ca, file = str(pki.ca), str(token_file)
    by_flag, by_variable, untrusting = await asyncio.gather(
        turngate.run("status", "s1", "--tls-ca", ca, "--token-file", file),
        turngate.run("status", "s1", TURNGATE_TLS_CA=ca, TURNGATE_TOKEN_FILE=file),
        turngate.run("status", "s1", "--tls-ca", str(pki.other_ca), "--timeout", REFUSED_TIMEOUT),
    )
    for ran in (by_flag, by_variable):
        assert (ran.code, ran.err, ran.lines[0].split()) == (0, "", ["session", "s1"])
    assert (untrusting.code, untrusting.out) == (ExitCode.FAILURE, "")
    # gRPC's C core also logs the failed handshake itself (lines of its own), unless GRPC_VERBOSITY=ERROR.
    [line] = [line for line in untrusting.err.splitlines() if line.startswith("turngate: ")]
    assert line.startswith(f"turngate: {tls_target} unavailable (UNAVAILABLE): ")
    assert "CERTIFICATE_VERIFY_FAILED" in line


async def test_a_client_certificate_by_flags_or_variables_passes_mutual_tls(
    mtls_target: str, pki: Pki
) -> None:
    turngate = Turngate(mtls_target, PROJECT_A)
    ca, cert, key = str(pki.ca), str(pki.client.cert), str(pki.client.key)
    by_flags, by_variables = await asyncio.gather(
        turngate.run("status", "s1", "--tls-ca", ca, "--tls-cert", cert, "--tls-key", key),
        turngate.run("status", "s1", TURNGATE_TLS_CA=ca, TURNGATE_CLIENT_CERT=cert, TURNGATE_CLIENT_KEY=key),
    )
    for ran in (by_flags, by_variables):
        assert (ran.code, ran.err, ran.lines[0].split()) == (0, "", ["session", "s1"])
