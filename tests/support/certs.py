"""Certificates made for the tests: a CA, a server certificate for 127.0.0.1 and localhost, a
client certificate, and the same from a second CA that nobody trusts."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.support.servers import settings_for
from turngate.service.config import Settings

_VALID = datetime.timedelta(days=1)


@dataclass(frozen=True)
class Issued:
    """A certificate and its private key, as PEM files."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class Pki:
    ca: Path
    """The CA that signed `server` and `client`."""
    server: Issued
    """For 127.0.0.1 and localhost (subject alternative names)."""
    client: Issued
    other_ca: Path
    """A CA that signed `other_client` and nothing the service trusts."""
    other_client: Issued
    other_server: Issued
    """For 127.0.0.1 and localhost, signed by `other_ca`: what a server rotates to."""


class _Authority:
    def __init__(self, name: str) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self.cert = (
            _builder(self.name, self.key.public_key(), self.name)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=False,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self.key, hashes.SHA256())
        )

    def issue(self, directory: Path, name: str, *, server: bool) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            _builder(subject, key.public_key(), self.name)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if server:
            names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        issued = Issued(directory / f"{name}.pem", directory / f"{name}.key")
        issued.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        issued.key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return issued

    def write(self, path: Path) -> Path:
        path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        return path


def _builder(
    subject: x509.Name, key: ec.EllipticCurvePublicKey, issuer: x509.Name
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALID)
    )


def make_pki(directory: Path) -> Pki:
    """Certificates and keys, written to `directory`."""
    trusted, other = _Authority("turngate test CA"), _Authority("some other CA")
    return Pki(
        ca=trusted.write(directory / "ca.pem"),
        server=trusted.issue(directory, "server", server=True),
        client=trusted.issue(directory, "client", server=False),
        other_ca=other.write(directory / "other-ca.pem"),
        other_client=other.issue(directory, "other-client", server=False),
        other_server=other.issue(directory, "other-server", server=True),
    )


def tls_settings(tmp: str, pki: Pki, *, mutual: bool = False, **overrides: object) -> Settings:
    """A test server's settings serving `pki.server` (and, `mutual`, requiring a client
    certificate `pki.ca` signed), on a SQLite store in `tmp`."""
    return settings_for(
        tmp,
        tls_cert=pki.server.cert,
        tls_key=pki.server.key,
        tls_client_ca=pki.ca if mutual else None,
        **overrides,
    )
