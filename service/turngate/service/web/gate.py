"""The HTTP listener's first check of every RPC, from its headers alone, before its body is read
(a connectrpc metadata interceptor at the front of the chain, which connectrpc calls before it
reads or decodes the request): the caller is authenticated and may call this RPC (the
Gatekeeper's `admit`, as on gRPC), and its headers were well-formed (headers.py). A stranger is
answered unauthenticated without a byte of its body read; then its connection closes."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from connectrpc.code import Code
from connectrpc.errors import ConnectError
from connectrpc.request import RequestContext

from turngate.service.auth.gatekeeper import Denial, Gatekeeper
from turngate.service.peers import grpc_peer
from turngate.service.web.headers import MALFORMED

# What stands for an authorization header that was not text: bytes authenticate nobody.
_NOT_TEXT = b""


class Gate:
    """Authentication, role and well-formed headers for each RPC. `named` are the headers a
    refusal may name (the others are a stranger's words: never repeated)."""

    def __init__(self, gatekeeper: Gatekeeper, named: Collection[str]) -> None:
        self._gatekeeper = gatekeeper
        self._named = frozenset(named)

    async def on_start(self, ctx: RequestContext[Any, Any]) -> None:
        info = ctx.method
        malformed = MALFORMED.get()
        authorization: list[str | bytes] = list(ctx.request_headers.getall("authorization"))
        if "authorization" in malformed:
            authorization.append(_NOT_TEXT)
        peer = grpc_peer(ctx.client_address) if ctx.client_address else "an unknown address"
        admitted = self._gatekeeper.admit(f"/{info.service_name}/{info.name}", authorization, peer)
        if isinstance(admitted, Denial):
            raise ConnectError(Code[admitted.code.name], admitted.message)
        if malformed:
            raise ConnectError(Code.INVALID_ARGUMENT, self._invalid(malformed))

    async def on_end(self, token: None, ctx: RequestContext[Any, Any], error: Exception | None) -> None:
        return None

    def _invalid(self, malformed: frozenset[str]) -> str:
        named = sorted(malformed & self._named)
        if not named:
            return "a request header is not text (control characters, or bytes that are not UTF-8)"
        return f"request header {', '.join(named)} is not well-formed"
