"""Who is calling, and may they call this RPC: the two checks that need only a call's headers
(docs/security.md, The order of checks, steps 1 and 2), asked by the gRPC edge (api/edge.py) and,
before it reads a request's body, by the HTTP listener (web/gate.py)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import grpc

from turngate.service.auth import access
from turngate.service.auth.principals import ANONYMOUS, Principal, Tokens
from turngate.service.auth.session_tokens import Refused, SessionTokenKeys

log = logging.getLogger("turngate.auth")

_BEARER = "bearer "
_MAX_TOKEN = 4096
UNAUTHENTICATED = "a valid bearer token is required (authorization metadata)"


@dataclass(frozen=True)
class Denial:
    """Why a call is refused before its request is read: UNAUTHENTICATED or PERMISSION_DENIED."""

    code: grpc.StatusCode
    message: str


class Gatekeeper:
    """Whom tokens name; `tokens` None means authentication is off (every caller is ANONYMOUS).
    A bearer token the tokens file does not list may be a session token, checked with
    `session_keys` (None: session tokens are off). Each is replaced whole on reload, so a call
    sees either the old one or the new one."""

    def __init__(self, tokens: Tokens | None, session_keys: SessionTokenKeys | None = None) -> None:
        self.tokens = tokens
        self.session_keys = session_keys

    def admit(self, method: str, authorization: Sequence[str | bytes], peer: str) -> Principal | Denial:
        """The caller of `method` if its `authorization` values (a value that is not text is
        bytes) name a principal allowed to call it, else why not (logged, naming `peer`)."""
        principal = self.authenticate(authorization)
        if principal is None:
            log.warning("refused %s: missing or unknown bearer token from %s", method, peer)
            return Denial(grpc.StatusCode.UNAUTHENTICATED, UNAUTHENTICATED)
        if denial := access.role_denial(principal, method):
            log.warning("refused %s: %s", method, denial)
            return Denial(grpc.StatusCode.PERMISSION_DENIED, denial)
        return principal

    def authenticate(self, values: Sequence[str | bytes]) -> Principal | None:
        tokens = self.tokens
        if tokens is None:
            return ANONYMOUS
        if len(values) != 1 or not isinstance(values[0], str):
            return None
        header = values[0]
        if len(header) > _MAX_TOKEN or header[: len(_BEARER)].lower() != _BEARER:
            return None
        token = header[len(_BEARER) :].strip(" \t")
        return tokens.identify(token) or self._session_principal(token, tokens)

    def _session_principal(self, token: str, tokens: Tokens) -> Principal | None:
        keys = self.session_keys
        if keys is None or token.count(".") != 2:
            return None
        try:
            minter, principal = keys.verify(token)
        except Refused as error:
            log.info("session token refused: %s", error)
            return None
        assert principal.reach is not None
        # Revoking a gateway's entry (the tokens file, reloaded) revokes the session tokens it
        # minted, even if a principal of the same name is listed again later.
        entry = tokens.entry(minter.entry)
        if (
            entry is None
            or entry.name != minter.name
            or not access.may_mint(entry, principal.reach.project_id)
        ):
            log.info("session token refused: its minter %r may no longer mint for its project", minter.name)
            return None
        return principal
