"""The server's TLS credentials from the settings: TLS, or mutual TLS with a client CA, for both
listeners. The certificate files are read again on `reload()` and taken by each listener from
its next handshake on: gRPC asks for them before every handshake, and the HTTP listener's context
hands every connection over to the context read last."""

from __future__ import annotations

import ssl
from pathlib import Path

import grpc

from turngate.service.config import Settings

# What the HTTP listener offers by ALPN: HTTP/2 first, as browsers prefer.
HTTP_ALPN = ["h2", "http/1.1"]


class TlsError(Exception):
    """A certificate or key file could not be read; the message names which."""


class ServerCertificates:
    """What the server presents (and, under mutual TLS, which client CA it trusts)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._current, self._http = self._read()
        self._pending: grpc.ServerCertificateConfiguration | None = None
        # The context the HTTP listener starts with; each handshake moves to the one read last.
        self._front = self._http
        self._front.sni_callback = self._hand_over

    def credentials(self) -> grpc.ServerCredentials:
        # gRPC asks `_fetch` before every handshake: a reloaded configuration applies to new
        # connections; open ones keep the one they were made with.
        return grpc.dynamic_ssl_server_credentials(
            self._current,
            self._fetch,  # type: ignore[arg-type]  # gRPC documents None as "no change"; its stub omits it
            require_client_authentication=self._settings.tls_client_ca is not None,
        )

    def http_context(self) -> ssl.SSLContext:
        """The HTTP listener's context: the certificate it presents and, under mutual TLS, the
        client CA it trusts are those read last, from each new connection on."""
        return self._front

    def reload(self) -> None:
        """Reads the files again; raises TlsError (and keeps the current ones) if one cannot be read."""
        current, self._http = self._read()
        self._pending = self._current = current

    def _fetch(self) -> grpc.ServerCertificateConfiguration | None:
        pending, self._pending = self._pending, None
        return pending

    def _hand_over(self, connection: ssl.SSLObject, _server_name: str | None, front: ssl.SSLContext) -> None:
        # Called at every handshake (with or without SNI), before the certificate is chosen and
        # the client's is verified: both then come from the context read last.
        if self._http is not front:
            connection.context = self._http

    def _read(self) -> tuple[grpc.ServerCertificateConfiguration, ssl.SSLContext]:
        settings = self._settings
        assert settings.tls_cert is not None, "TLS is off"
        assert settings.tls_key is not None, "validated with tls_cert"
        key, cert = _read(settings.tls_key, "--tls-key"), _read(settings.tls_cert, "--tls-cert")
        client_ca = _read(settings.tls_client_ca, "--tls-client-ca") if settings.tls_client_ca else None
        http = _http_context(settings.tls_cert, settings.tls_key, settings.tls_client_ca)
        return grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=client_ca), http


def _http_context(cert: Path, key: Path, client_ca: Path | None) -> ssl.SSLContext:
    """The HTTP listener's context from the files; checking them (PEM that parses, a key that
    matches the certificate) also for gRPC, which would only find out at the next handshake,
    failing every new connection."""
    # Not create_default_context: a server context trusts no client CA but the one given.
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2  # HTTP/2 needs TLS 1.2 at least (RFC 9113 §9.2)
    context.options |= ssl.OP_NO_COMPRESSION
    context.set_alpn_protocols(HTTP_ALPN)
    try:
        context.load_cert_chain(cert, key)
    except OSError as error:  # ssl.SSLError is an OSError
        raise TlsError(
            f"--tls-cert {cert} and --tls-key {key} are not a PEM certificate and its key"
        ) from error
    if client_ca is None:
        return context
    try:
        context.load_verify_locations(client_ca)
    except OSError as error:
        raise TlsError(f"--tls-client-ca {client_ca} is not a PEM certificate") from error
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def _read(path: Path, flag: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise TlsError(f"cannot read {flag} {path}: {error.strerror}") from error
