"""Who the client is to turngate: a bearer token sent on every call, and TLS credentials (the CA
that signed the service's certificate, and a client certificate for mutual TLS)."""

from __future__ import annotations

import os
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeAlias, TypeVar

import grpc

Req = TypeVar("Req")
Resp = TypeVar("Resp")

Pem: TypeAlias = bytes | str | os.PathLike[str]
"""PEM data as bytes, or the path of a file holding it."""

# What an ASCII metadata value may hold, and what a bearer token is: no spaces, no control characters.
_TOKEN = re.compile(r"[\x21-\x7e]+")


def check_token(token: str) -> str:
    """`token`, if it can be sent as a bearer token: printable ASCII without spaces. Otherwise
    ValueError, whose message does not show the token."""
    if not _TOKEN.fullmatch(token):
        raise ValueError("a bearer token must be printable ASCII, not empty, without spaces or newlines")
    return token


def tls_credentials(
    ca: Pem | None = None, *, cert: Pem | None = None, key: Pem | None = None
) -> grpc.ChannelCredentials:
    """TLS for `Client(credentials=...)`: the service's certificate is verified against `ca` (gRPC's
    bundled public roots when None); `cert` and `key` are the client's certificate chain and
    private key, for a service that requires mutual TLS. Each is PEM bytes or a file's path (read
    now: a missing file raises OSError)."""
    if (cert is None) != (key is None):
        raise ValueError("a client certificate needs both cert and key")
    return grpc.ssl_channel_credentials(
        root_certificates=_pem(ca), private_key=_pem(key), certificate_chain=_pem(cert)
    )


def _pem(source: Pem | None) -> bytes | None:
    if source is None or isinstance(source, bytes):
        return source
    return Path(source).read_bytes()


def bearer_interceptors(token: str) -> list[grpc.aio.ClientInterceptor]:
    """Interceptors adding `authorization: Bearer <token>` to every call: unary calls and watch
    streams."""
    return metadata_interceptors("authorization", f"Bearer {check_token(token)}")


def metadata_interceptors(key: str, value: str) -> list[grpc.aio.ClientInterceptor]:
    """Interceptors adding the metadata `key: value` to every call, as sent. A channel files each
    interceptor under one kind of call only, so there is one per kind (unary, server-streaming)."""
    return [_UnaryMetadata((key, value)), _StreamMetadata((key, value))]


def _signed(details: grpc.aio.ClientCallDetails, header: tuple[str, str]) -> grpc.aio.ClientCallDetails:
    metadata = grpc.aio.Metadata(*(details.metadata or ()), header)
    return grpc.aio.ClientCallDetails(
        details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
    )


class _UnaryMetadata(grpc.aio.UnaryUnaryClientInterceptor):
    def __init__(self, header: tuple[str, str]) -> None:
        self._header = header

    async def intercept_unary_unary(
        self,
        continuation: Callable[
            [grpc.aio.ClientCallDetails, Req], Awaitable[grpc.aio.UnaryUnaryCall[Req, Resp]]
        ],
        client_call_details: grpc.aio.ClientCallDetails,
        request: Req,
    ) -> grpc.aio.UnaryUnaryCall[Req, Resp]:
        return await continuation(_signed(client_call_details, self._header), request)


class _StreamMetadata(grpc.aio.UnaryStreamClientInterceptor):
    def __init__(self, header: tuple[str, str]) -> None:
        self._header = header

    async def intercept_unary_stream(
        self,
        continuation: Callable[
            [grpc.aio.ClientCallDetails, Req], Awaitable[grpc.aio.UnaryStreamCall[Req, Resp]]
        ],
        client_call_details: grpc.aio.ClientCallDetails,
        request: Req,
    ) -> grpc.aio.UnaryStreamCall[Req, Resp]:
        return await continuation(_signed(client_call_details, self._header), request)
