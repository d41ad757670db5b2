"""TLS and mutual TLS, with certificates made in the test, through the SDK against a real server
on a real port: the handshake and calls (a bearer token on top) succeed; a client that speaks
plaintext, does not trust the server's CA, or under mutual TLS presents no certificate or one
from another CA is refused. Half a TLS configuration refuses to start."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from tests.support.certs import Pki, make_pki, tls_settings
from tests.support.principals import GATEWAY_A, PROJECT_A, RUNNER_A
from tests.support.processes import run_cli
from tests.support.servers import running, settings_for
from turngate.client import (
    Backoff,
    Client,
    NotAuthenticated,
    ServiceUnavailable,
    SessionPhase,
    SessionSnapshot,
    ToolCallStatus,
    TurnOutcome,
    tls_credentials,
)
from turngate.service import cli

FAST = Backoff(initial=0.02, maximum=0.2)
# How long a refused client keeps retrying before it gives up (a refused handshake is UNAVAILABLE).
REFUSED_AFTER_S = 0.3


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
async def tls_port(
    tmp_path_factory: pytest.TempPathFactory, pki: Pki, tokens_file: Path
) -> AsyncIterator[int]:
    """TLS, and bearer tokens (tests/support/principals.py)."""
    async for server, _ in running(
        tls_settings(str(tmp_path_factory.mktemp("tls")), pki, auth_file=tokens_file)
    ):
        yield server.port


@pytest.fixture(scope="module")
async def mtls_port(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> AsyncIterator[int]:
    """Mutual TLS: only clients with a certificate `pki.ca` signed."""
    async for server, _ in running(tls_settings(str(tmp_path_factory.mktemp("mtls")), pki, mutual=True)):
        yield server.port


def connect(
    port: int,
    host: str = "127.0.0.1",
    *,
    token: str | None = None,
    credentials: grpc.ChannelCredentials | None = None,
    retry_for: float = 10.0,
) -> Client:
    return Client(
        f"{host}:{port}",
        PROJECT_A,
        token=token,
        credentials=credentials,
        retry_for=retry_for,
        backoff=FAST,
        call_timeout=2.0,
    )


async def refused(
    port: int, *, token: str | None = None, credentials: grpc.ChannelCredentials | None = None
) -> ServiceUnavailable:
    """The error of a client whose connections the server refuses."""
    async with connect(port, token=token, credentials=credentials, retry_for=REFUSED_AFTER_S) as client:
        with pytest.raises(ServiceUnavailable) as failed:
            await client.get_session("s-refused")
    assert failed.value.code == grpc.StatusCode.UNAVAILABLE
    return failed.value


async def test_calls_and_watches_succeed_over_tls_with_a_token_and_are_refused_without_one(
    tls_port: int, pki: Pki
) -> None:
    trusting = tls_credentials(ca=pki.ca)
    async with (
        connect(tls_port, token=GATEWAY_A.token, credentials=trusting) as gateway,
        connect(tls_port, token=RUNNER_A.token, credentials=trusting) as runner,
        connect(tls_port, "localhost", token=GATEWAY_A.token, credentials=trusting) as by_name,
        connect(tls_port, credentials=trusting) as anonymous,
    ):
        async with runner.runner("r1").turn("s-tls", "t1") as turn, turn.tool_call("call-1", "search"):
            pass
        async with gateway.watch("s-tls") as events:
            first = (await anext(events)).body
        assert isinstance(first, SessionSnapshot)
        assert first.last_settled is not None
        assert first.last_settled.turn_id == "t1"
        assert first.last_settled.outcome == TurnOutcome.COMPLETED
        settled = await by_name.get_turn("s-tls", "t1")
        assert [call.status for call in settled.tool_calls] == [ToolCallStatus.SUCCEEDED]
        with pytest.raises(NotAuthenticated):
            await anonymous.get_session("s-tls")


async def test_a_plaintext_client_is_refused_by_a_tls_server(tls_port: int) -> None:
    await refused(tls_port, token=GATEWAY_A.token)


async def test_a_client_that_does_not_trust_the_servers_ca_is_refused(tls_port: int, pki: Pki) -> None:
    other = await refused(tls_port, token=GATEWAY_A.token, credentials=tls_credentials(ca=pki.other_ca))
    public_roots = await refused(tls_port, token=GATEWAY_A.token, credentials=tls_credentials())
    for error in (other, public_roots):
        assert "handshake" in str(error).lower()


async def test_mutual_tls_admits_a_client_with_a_certificate_the_client_ca_signed(
    mtls_port: int, pki: Pki
) -> None:
    credentials = tls_credentials(ca=pki.ca, cert=pki.client.cert, key=pki.client.key.read_bytes())
    async with connect(mtls_port, credentials=credentials) as client:
        snapshot = await client.get_session("s-mtls")
        async with client.watch("s-mtls") as events:
            first = (await anext(events)).body
    assert isinstance(first, SessionSnapshot)
    assert (snapshot.phase, first.phase) == (SessionPhase.IDLE, SessionPhase.IDLE)


@pytest.mark.parametrize("presented", ["no certificate", "another CA's certificate"])
async def test_mutual_tls_refuses_a_client_without_a_certificate_the_client_ca_signed(
    mtls_port: int, pki: Pki, presented: str
) -> None:
    other = pki.other_client
    credentials = (
        tls_credentials(ca=pki.ca)
        if presented == "no certificate"
        else tls_credentials(ca=pki.ca, cert=other.cert, key=other.key)
    )
    await refused(mtls_port, credentials=credentials)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--tls-cert", "server.pem"), "TLS needs both --tls-cert and --tls-key"),
        (("--tls-key", "server.key"), "TLS needs both --tls-cert and --tls-key"),
        (("--tls-client-ca", "ca.pem"), "--tls-client-ca (mutual TLS) needs --tls-cert and --tls-key"),
    ],
)
def test_serve_refuses_half_a_tls_configuration_with_one_line(
    flags: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ("TURNGATE_TLS_CERT", "TURNGATE_TLS_KEY", "TURNGATE_TLS_CLIENT_CA"):
        monkeypatch.delenv(variable, raising=False)
    assert cli.main(["serve", *flags]) == cli.EXIT_USAGE
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = captured.err.splitlines()
    assert line.startswith("turngate: invalid settings: ")
    assert line.endswith(message)


async def test_sighup_rotates_the_server_certificate_for_new_connections_only(
    tmp_path: Path, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    cert, key = tmp_path / "server.pem", tmp_path / "server.key"
    cert.write_bytes(pki.server.cert.read_bytes())
    key.write_bytes(pki.server.key.read_bytes())
    async for server, _ in running(settings_for(str(tmp_path), tls_cert=cert, tls_key=key)):
        async with connect(server.port, credentials=tls_credentials(ca=pki.ca)) as before:
            await before.get_session("s-rotate")
            cert.write_bytes(pki.other_server.cert.read_bytes())
            key.write_bytes(pki.other_server.key.read_bytes())
            server.reload()
            async with connect(server.port, credentials=tls_credentials(ca=pki.other_ca)) as after:
                await after.get_session("s-rotate")
            await refused(server.port, credentials=tls_credentials(ca=pki.ca))
            # The connection made before the rotation keeps the certificate it was made with.
            await before.get_session("s-rotate")

            key.write_bytes(pki.server.key.read_bytes())  # a key that does not match the certificate
            server.reload()
            assert "kept the current TLS certificates" in caplog.text
            async with connect(server.port, credentials=tls_credentials(ca=pki.other_ca)) as still:
                await still.get_session("s-rotate")


@pytest.mark.parametrize(
    ("which", "message"),
    [
        ("missing", "cannot read --tls-cert"),
        ("mismatched", "are not a PEM certificate and its key"),
        ("not pem", "are not a PEM certificate and its key"),
    ],
)
def test_serve_refuses_certificate_files_it_cannot_use_with_one_line(
    tmp_path: Path, pki: Pki, which: str, message: str
) -> None:
    cert = tmp_path / "server.pem"
    if which == "mismatched":
        cert.write_bytes(pki.other_server.cert.read_bytes())
    elif which == "not pem":
        cert.write_text("not a certificate")
    ran = run_cli(
        tmp_path,
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--tls-cert",
        str(cert),
        "--tls-key",
        str(pki.server.key),
    )
    assert ran.returncode == 1
    [line] = ran.stderr.splitlines()
    assert line.startswith("turngate: ")
    assert message in line
