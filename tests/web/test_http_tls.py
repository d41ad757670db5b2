"""With TLS settings the HTTP listener serves TLS with the same certificate, HTTP/2 offered by
ALPN, and with mutual TLS it admits only clients holding a certificate of the trusted CA; SIGHUP
reloads its certificate, key and client CA with the gRPC port's (issue 20, item 3)."""

from __future__ import annotations

import asyncio
import socket
import ssl
from pathlib import Path

import pytest

from tests.support.certs import Issued, make_pki, tls_settings
from tests.support.servers import running, settings_for


def _context(ca: Path, client: Issued | None, alpn: list[str]) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca))
    context.set_alpn_protocols(alpn)
    if client is not None:
        context.load_cert_chain(str(client.cert), str(client.key))
    return context


def _negotiated(port: int, ca: Path, client: Issued | None) -> str | None:
    """The protocol ALPN chose in a TLS handshake that trusts `ca` only."""
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        _context(ca, client, ["h2", "http/1.1"]).wrap_socket(raw, server_hostname="localhost") as wrapped,
    ):
        return wrapped.selected_alpn_protocol()


async def test_the_http_listener_serves_tls_with_the_servers_certificate_and_offers_http2(
    tmp_path: Path,
) -> None:
    pki = make_pki(tmp_path)
    async for server, _ in running(tls_settings(str(tmp_path), pki, http_listen="127.0.0.1:0")):
        assert await asyncio.to_thread(_negotiated, server.http_port, pki.ca, None) == "h2"


async def test_with_mutual_tls_the_http_listener_refuses_a_client_without_a_trusted_certificate(
    tmp_path: Path,
) -> None:
    pki = make_pki(tmp_path)
    settings = tls_settings(str(tmp_path), pki, mutual=True, http_listen="127.0.0.1:0")
    async for server, _ in running(settings):
        assert await asyncio.to_thread(_negotiated, server.http_port, pki.ca, pki.client) == "h2"
        await asyncio.to_thread(_probe_http1, server.http_port, pki.ca, pki.client)
        for stranger in (None, pki.other_client):
            with pytest.raises((ssl.SSLError, ConnectionError)):
                await asyncio.to_thread(_probe_http1, server.http_port, pki.ca, stranger)


def _probe_http1(port: int, ca: Path, client: Issued | None) -> None:
    """A GET / over HTTP/1.1; with TLS 1.3 a refused client certificate surfaces at the first read."""
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        _context(ca, client, ["http/1.1"]).wrap_socket(raw, server_hostname="localhost") as wrapped,
    ):
        wrapped.sendall(b"GET / HTTP/1.1\r\nhost: localhost\r\n\r\n")
        if not wrapped.recv(12):
            raise ConnectionError("closed without an answer")


async def test_sighup_reloads_the_http_listeners_certificate_and_client_ca_with_the_grpc_ports(
    tmp_path: Path,
) -> None:
    (tmp_path / "pki").mkdir()
    pki = make_pki(tmp_path / "pki")
    cert, key, client_ca = tmp_path / "server.pem", tmp_path / "server.key", tmp_path / "client-ca.pem"
    for copy, source in ((cert, pki.server.cert), (key, pki.server.key), (client_ca, pki.ca)):
        copy.write_bytes(source.read_bytes())
    settings = settings_for(
        str(tmp_path), tls_cert=cert, tls_key=key, tls_client_ca=client_ca, http_listen="127.0.0.1:0"
    )
    async for server, _ in running(settings):
        port = server.http_port
        await asyncio.to_thread(_probe_http1, port, pki.ca, pki.client)
        # Another certificate, and another client CA: the old client certificate is revoked.
        for copy, source in (
            (cert, pki.other_server.cert),
            (key, pki.other_server.key),
            (client_ca, pki.other_ca),
        ):
            copy.write_bytes(source.read_bytes())
        server.reload()
        await asyncio.to_thread(_probe_http1, port, pki.other_ca, pki.other_client)
        assert await asyncio.to_thread(_negotiated, port, pki.other_ca, pki.other_client) == "h2"
        with pytest.raises(ssl.SSLCertVerificationError):  # the old certificate is no longer shown
            await asyncio.to_thread(_probe_http1, port, pki.ca, pki.client)
        with pytest.raises((ssl.SSLError, ConnectionError)):  # the revoked client certificate
            await asyncio.to_thread(_probe_http1, port, pki.other_ca, pki.client)
