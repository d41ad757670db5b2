"""The server's TLS credentials from the settings: TLS, or mutual TLS with a client CA."""

from __future__ import annotations

from pathlib import Path

import grpc

from turngate.service.config import Settings


class TlsError(Exception):
    """A certificate or key file could not be read; the message names which."""


def server_credentials(settings: Settings) -> grpc.ServerCredentials | None:
    """None when TLS is off."""
    if settings.tls_cert is None or settings.tls_key is None:
        return None
    client_ca = _read(settings.tls_client_ca, "--tls-client-ca") if settings.tls_client_ca else None
    return grpc.ssl_server_credentials(
        [(_read(settings.tls_key, "--tls-key"), _read(settings.tls_cert, "--tls-cert"))],
        root_certificates=client_ca,
        require_client_auth=client_ca is not None,
    )


def _read(path: Path, flag: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise TlsError(f"cannot read {flag} {path}: {error.strerror}") from error
