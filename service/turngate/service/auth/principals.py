"""Principals and the tokens file that names them.

A tokens file (TOML, or JSON when its name ends in `.json`) lists principals; each carries the
SHA-256 of its token, never the token itself:

    [[principals]]
    name = "runner-eu"
    token_sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
    roles = ["runner"]
    projects = ["acme"]          # or "*" for every project

A principal may appear several times with different tokens (rotation).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from turngate.service.auth.files import SecretsFileError, read_validated
from turngate.service.core.limits import ID_PATTERN

ALL_PROJECTS = "*"


class Role(StrEnum):
    RUNNER = "runner"
    GATEWAY = "gateway"
    WATCHER = "watcher"
    ADMIN = "admin"


class Scope(StrEnum):
    """What a session token allows on its one session (auth/access.py says which RPCs each covers)."""

    WATCH = "watch"
    STOP = "stop"


@dataclass(frozen=True, slots=True)
class Reach:
    """The one session a session token reaches, and what it may do there."""

    project_id: str
    session_id: str
    scopes: frozenset[Scope]


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller. `projects` None means every project. A session token's principal
    has no role: its `reach` (one session, some scopes) is all it may do."""

    name: str
    roles: frozenset[Role]
    projects: frozenset[str] | None
    reach: Reach | None = None
    # When its credential stops being valid (seconds since the epoch), for those that expire.
    expires_at: float | None = None
    # The tokens-file entry that named it (`entry_id`): a session token it mints lives only as
    # long as that entry. Not part of its identity: each of a principal's tokens names the same one.
    entry: str = field(default="", compare=False)

    def may_act_on(self, project_id: str) -> bool:
        return self.projects is None or project_id in self.projects


# With no tokens file every caller is this one: any role, any project (loopback only, or --insecure).
ANONYMOUS = Principal("", frozenset(Role), None)


class TokensFileError(SecretsFileError):
    """The tokens file is missing, unreadable or invalid; the message names the problem."""


_Digest = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
_Name = Annotated[str, Field(pattern=f"^{ID_PATTERN}$")]


class Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: _Name
    token_sha256: _Digest
    roles: Annotated[list[Role], Field(min_length=1)]
    projects: Literal["*"] | Annotated[list[_Name | Literal["*"]], Field(min_length=1)]

    def principal(self) -> Principal:
        projects = [self.projects] if isinstance(self.projects, str) else self.projects
        every = ALL_PROJECTS in projects
        entry = entry_id(bytes.fromhex(self.token_sha256))
        return Principal(
            self.name, frozenset(self.roles), None if every else frozenset(projects), entry=entry
        )


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    principals: list[Entry]


def token_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def entry_id(digest: bytes) -> str:
    """The id of the tokens-file entry whose token has `digest`: derived from the digest, so that
    a session token may name its minting entry without carrying what the file holds."""
    return hashlib.sha256(b"turngate tokens-file entry\x00" + digest).hexdigest()[:32]


class Tokens:
    """The known tokens' digests and whom each names."""

    def __init__(self, entries: Iterable[tuple[bytes, Principal]]) -> None:
        self._entries = tuple(entries)
        self._by_entry = {principal.entry: principal for _, principal in self._entries}

    def __len__(self) -> int:
        return len(self._entries)

    def identify(self, token: str) -> Principal | None:
        """The principal of `token`, comparing its digest with every entry in constant time: how
        long this takes does not depend on which entry, or how much of one, matched."""
        digest = token_digest(token)
        found: Principal | None = None
        for known, principal in self._entries:
            if hmac.compare_digest(known, digest):
                found = principal
        return found

    def entry(self, entry: str) -> Principal | None:
        """The principal of the entry whose id is `entry` (`entry_id`), if it is still listed."""
        return self._by_entry.get(entry)


def load_tokens(path: Path) -> Tokens:
    parsed = read_validated(path, _File, "tokens file", TokensFileError)
    digests = [entry.token_sha256 for entry in parsed.principals]
    if len(set(digests)) != len(digests):
        raise TokensFileError(f"tokens file {path} lists the same token_sha256 twice")
    return Tokens((bytes.fromhex(entry.token_sha256), entry.principal()) for entry in parsed.principals)
