"""Session tokens: short-lived JWTs reaching one session, signed by the service and checked by any
replica from the token alone (docs/security.md, Session tokens).

HS256 with a `kid` header: only turngate's replicas sign and verify, so a shared secret is enough,
and a verifier accepts no other algorithm (so neither `none` nor a public key posing as an HMAC
secret). The signing keys file (TOML, or JSON when its name ends in `.json`) lists keys by id; the
first signs, every listed one verifies:

    [[keys]]
    id = "k-2026-12"
    secret = "…"    # base64url of 32 random bytes or more (`turngate token key`)
"""

from __future__ import annotations

import base64
import binascii
import secrets
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import jwt
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, ValidationError, field_validator

from turngate.service.auth.files import SecretsFileError, describe_invalid, read_validated
from turngate.service.auth.principals import Principal, Reach, Scope
from turngate.service.core import limits

ISSUER = "turngate"
AUDIENCE = "turngate.v1"
ALGORITHM = "HS256"
# Lifetimes (µs, as the contract's other durations): a page re-asks its gateway for a new token.
DEFAULT_TTL = 15 * 60 * limits.SECOND
MIN_TTL = 10 * limits.SECOND
MAX_TTL = 3600 * limits.SECOND
# The replicas' clocks may differ by this much (seconds) without refusing a fresh token.
LEEWAY = 5
MIN_SECRET_BYTES = 32
_REQUIRED = ["iss", "aud", "sub", "iat", "nbf", "exp", "jti"]
_Id = Annotated[str, Field(pattern=f"^{limits.ID_PATTERN}$")]
# A JWT NumericDate is a JSON number (RFC 7519 §2); PyJWT would also take a string of digits.
_NumericDate = StrictInt | StrictFloat


class KeysFileError(SecretsFileError):
    """The signing keys file is missing, unreadable or invalid; the message names the problem,
    never a secret."""


class Refused(Exception):
    """A presented session token is not accepted; the message says why (never the token)."""


@dataclass(frozen=True, slots=True)
class SigningKey:
    id: str
    secret: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class Minter:
    """Who minted a session token: the principal's name and its tokens-file entry (`entry_id`)."""

    name: str
    entry: str


@dataclass(frozen=True, slots=True)
class Minted:
    token: str
    expires_at: datetime
    scopes: frozenset[Scope]


def _secret_bytes(value: str) -> bytes:
    try:
        return base64.b64decode(value + "=" * (-len(value) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("must be base64url") from None


class _Key(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: _Id
    secret: str

    @field_validator("secret")
    @classmethod
    def _long_enough(cls, value: str) -> str:
        if len(_secret_bytes(value)) < MIN_SECRET_BYTES:
            raise ValueError(f"must be base64url of at least {MIN_SECRET_BYTES} bytes")
        return value


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    keys: Annotated[list[_Key], Field(min_length=1)]


class _Claims(BaseModel):
    """The claims of ours in a verified token (the registered ones PyJWT has checked)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    sub: str
    minter: str
    jti: str
    project: _Id
    session: _Id
    scope: str
    iat: _NumericDate
    nbf: _NumericDate
    exp: _NumericDate


class SessionTokenKeys:
    """The signing keys in force: the first signs, all verify. Replaced whole on reload."""

    def __init__(self, keys: Sequence[SigningKey]) -> None:
        assert keys, "at least one key"
        self._signing = keys[0]
        self._by_id = {key.id: key for key in keys}

    def __len__(self) -> int:
        return len(self._by_id)

    def mint(self, minter: Principal, reach: Reach, ttl: int, now: float | None = None) -> Minted:
        """A token `minter` (a principal of the tokens file) gives for `reach`, valid `ttl` µs
        from `now` (seconds since the epoch)."""
        issued = int(time.time() if now is None else now)
        expires = issued + ttl // limits.SECOND
        claims = {
            "iss": ISSUER,
            "aud": AUDIENCE,
            "sub": minter.name,
            "minter": minter.entry,
            "iat": issued,
            "nbf": issued,
            "exp": expires,
            "jti": uuid.uuid4().hex,
            "project": reach.project_id,
            "session": reach.session_id,
            "scope": " ".join(sorted(reach.scopes)),
        }
        key = self._signing
        token = jwt.encode(claims, key.secret, algorithm=ALGORITHM, headers={"kid": key.id})
        return Minted(token, datetime.fromtimestamp(expires, UTC), reach.scopes)

    def verify(self, token: str) -> tuple[Minter, Principal]:
        """Who minted `token` and the principal it makes its bearer; raises Refused when the
        token is not one of ours, in force, for turngate."""
        try:
            kid = jwt.get_unverified_header(token).get("kid")
        except jwt.PyJWTError:
            raise Refused("not a JWT") from None
        key = self._by_id.get(kid) if isinstance(kid, str) else None
        if key is None:
            raise Refused("signed with a key not listed (unknown or rotated out)")
        try:
            payload: dict[str, Any] = jwt.decode(
                token,
                key.secret,
                algorithms=[ALGORITHM],
                audience=AUDIENCE,
                issuer=ISSUER,
                leeway=LEEWAY,
                options={"require": _REQUIRED, "strict_aud": True},
            )
            claims = _Claims.model_validate(payload)
        except jwt.PyJWTError as error:
            raise Refused(str(error)) from None
        except ValidationError as error:
            raise Refused(f"claims: {describe_invalid(error)}") from None
        scopes = claims.scope.split(" ")
        if Scope.WATCH not in scopes or not set(scopes) <= set(Scope):
            raise Refused("claims: scope is not watch, or watch stop")
        if claims.exp - claims.iat > MAX_TTL // limits.SECOND:
            raise Refused("lives longer than a session token may")
        reach = Reach(claims.project, claims.session, frozenset(Scope(scope) for scope in scopes))
        name = f"{claims.sub}:session:{claims.jti}"
        bearer = Principal(name, frozenset(), frozenset({claims.project}), reach, claims.exp)
        return Minter(claims.sub, claims.minter), bearer


def load_keys(path: Path) -> SessionTokenKeys:
    parsed = read_validated(path, _File, "signing keys file", KeysFileError)
    ids = [key.id for key in parsed.keys]
    if len(set(ids)) != len(ids):
        raise KeysFileError(f"signing keys file {path} lists the same id twice")
    return SessionTokenKeys([SigningKey(key.id, _secret_bytes(key.secret)) for key in parsed.keys])


def new_key_entry(key_id: str) -> str:
    """A keys-file entry with a fresh random secret; raises ValueError (pydantic's) for a bad id."""
    key = _Key(id=key_id, secret=base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("="))
    return f'[[keys]]\nid = "{key.id}"\nsecret = "{key.secret}"\n'
