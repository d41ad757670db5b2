"""The server's TLS credentials from the settings: TLS, or mutual TLS with a client CA; the
certificate files are read again on `reload()` and taken from the next handshake on."""

from __future__ import annotations

import ssl
from pathlib import Path

import grpc

from turngate.service.config import Settings


class TlsError(Exception):
    """A certificate or key file could not be read; the message names which."""


class ServerCertificates:
    """What the server presents (and, under mutual TLS, which client CA it trusts)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._current = self._read()
        self._pending: grpc.ServerCertificateConfiguration | None = None

    def credentials(self) -> grpc.ServerCredentials:
        # gRPC asks `_fetch` before every handshake: a reloaded configuration applies to new
        # connections; open ones keep the one they were made with.
        return grpc.dynamic_ssl_server_credentials(
            self._current,
            self._fetch,  # type: ignore[arg-type]  # gRPC documents None as "no change"; its stub omits it
            require_client_authentication=self._settings.tls_client_ca is not None,
        )

    def reload(self) -> None:
        """Reads the files again; raises TlsError (and keeps the current ones) if one cannot be read."""
        self._pending = self._current = self._read()

    def _fetch(self) -> grpc.ServerCertificateConfiguration | None:
        pending, self._pending = self._pending, None
        return pending

    def _read(self) -> grpc.ServerCertificateConfiguration:
        settings = self._settings
        assert settings.tls_cert is not None, "TLS is off"
        assert settings.tls_key is not None, "validated with tls_cert"
        key, cert = _read(settings.tls_key, "--tls-key"), _read(settings.tls_cert, "--tls-cert")
        client_ca = _read(settings.tls_client_ca, "--tls-client-ca") if settings.tls_client_ca else None
        _check(settings.tls_cert, settings.tls_key, settings.tls_client_ca)
        return grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=client_ca)


def _check(cert: Path, key: Path, client_ca: Path | None) -> None:
    """PEM that parses, and a key that matches the certificate: gRPC itself would only find out
    at the next handshake, failing every new connection."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert, key)
    except OSError as error:  # ssl.SSLError is an OSError
        raise TlsError(
            f"--tls-cert {cert} and --tls-key {key} are not a PEM certificate and its key"
        ) from error
    if client_ca is None:
        return
    try:
        context.load_verify_locations(client_ca)
    except OSError as error:
        raise TlsError(f"--tls-client-ca {client_ca} is not a PEM certificate") from error


def _read(path: Path, flag: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise TlsError(f"cannot read {flag} {path}: {error.strerror}") from error
