"""The principals of the security tests, the tokens file naming them, clients that present a
principal's bearer token on every call, and the session-token signing keys file."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc

from tests.support.servers import Client, client_for
from turngate.client.auth import metadata_interceptors

PROJECT_A = "p-sec-a"
PROJECT_B = "p-sec-b"
# A session-token signing key: its id and secret.
CURRENT = ("k-current", b"c" * 32)


@dataclass(frozen=True)
class Named:
    name: str
    roles: tuple[str, ...]
    projects: tuple[str, ...] | str
    # Another value makes another token for the same name (a principal added again, rotation).
    secret: str = "0123456789abcdef"

    @property
    def token(self) -> str:
        return f"tok-{self.name}-{self.secret}"


RUNNER_A = Named("runner-a", ("runner",), (PROJECT_A,))
RUNNER_A2 = Named("runner-a2", ("runner",), (PROJECT_A,))
GATEWAY_A = Named("gateway-a", ("gateway",), (PROJECT_A,))
# A runner that is also its project's gateway: it may stop (and so interrupt) any turn of project A.
RUNNER_GATEWAY_A = Named("runner-gateway-a", ("runner", "gateway"), (PROJECT_A,))
WATCHER_A = Named("watcher-a", ("watcher",), (PROJECT_A,))
ADMIN = Named("admin", ("admin",), "*")
RUNNER_B = Named("runner-b", ("runner",), (PROJECT_B,))
GATEWAY_B = Named("gateway-b", ("gateway",), (PROJECT_B,))
EVERYONE = (RUNNER_A, RUNNER_A2, GATEWAY_A, RUNNER_GATEWAY_A, WATCHER_A, ADMIN, RUNNER_B, GATEWAY_B)


def tokens_toml(principals: tuple[Named, ...] = EVERYONE) -> str:
    entries = []
    for named in principals:
        projects = '"*"' if named.projects == "*" else "[" + ", ".join(f'"{p}"' for p in named.projects) + "]"
        roles = ", ".join(f'"{role}"' for role in named.roles)
        digest = hashlib.sha256(named.token.encode()).hexdigest()
        entries.append(
            f'[[principals]]\nname = "{named.name}"\ntoken_sha256 = "{digest}"\n'
            f"roles = [{roles}]\nprojects = {projects}\n"
        )
    return "\n".join(entries)


def write_tokens(path: Path, principals: tuple[Named, ...] = EVERYONE) -> Path:
    path.write_text(tokens_toml(principals))
    return path


@asynccontextmanager
async def client_as(port: int, header: str | None) -> AsyncIterator[Client]:
    """A client of the server on `port` sending `header` as its authorization (None: nothing)."""
    interceptors = [] if header is None else metadata_interceptors("authorization", header)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", interceptors=interceptors) as channel:
        yield client_for(channel)


def bearer(named: Named) -> str:
    return f"Bearer {named.token}"


def keys_toml(*keys: tuple[str, bytes]) -> str:
    return "".join(
        f'[[keys]]\nid = "{kid}"\nsecret = "{base64.urlsafe_b64encode(secret).decode()}"\n'
        for kid, secret in keys
    )
