"""ControlService: what gateways call to forward a user's Stop and answers to interactions, and
to mint the session tokens their web pages hold."""

from __future__ import annotations

from collections.abc import Callable

from turngate.service import core
from turngate.service.api import convert, errors, parse
from turngate.service.api.edge import current_principal
from turngate.service.api.errors import guarded
from turngate.service.api.policy import Policy
from turngate.service.api.replies import Context, decided
from turngate.service.auth.session_tokens import SessionTokenKeys
from turngate.service.ports.store import Store
from turngate.v1 import turngate_pb2 as pb
from turngate.v1 import turngate_pb2_grpc as pb_grpc


class ControlService(pb_grpc.ControlServiceServicer):
    def __init__(
        self, store: Store, policy: Policy, session_keys: Callable[[], SessionTokenKeys | None]
    ) -> None:
        self._store = store
        self._policy = policy
        # Looked up at each call: SIGHUP may have replaced them.
        self._session_keys = session_keys

    @guarded
    async def CancelTurn(self, request: pb.CancelTurnRequest, context: Context) -> pb.CancelTurnResponse:
        key, command = parse.cancel(request, self._policy)
        expected = (core.Cancelled, core.Mismatch, core.Idle)
        return convert.cancelled(await decided(self._store, context, key, command, expected))

    @guarded
    async def ResolveInteraction(
        self, request: pb.ResolveInteractionRequest, context: Context
    ) -> pb.ResolveInteractionResponse:
        key, command = parse.resolve_interaction(request, self._policy)
        reply = await decided(self._store, context, key, command, core.InteractionReply)
        return convert.interaction_resolved(reply)

    @guarded
    async def ResumeQueue(self, request: pb.ResumeQueueRequest, context: Context) -> pb.ResumeQueueResponse:
        key, command = parse.resume_queue(request, self._policy)
        return convert.resumed(await decided(self._store, context, key, command, core.Resumed))

    @guarded
    async def ClearQueue(self, request: pb.ClearQueueRequest, context: Context) -> pb.ClearQueueResponse:
        key, command = parse.clear_queue(request, self._policy)
        return convert.queue_cleared(await decided(self._store, context, key, command, core.QueueCleared))

    @guarded
    async def MoveQueuedTurn(
        self, request: pb.MoveQueuedTurnRequest, context: Context
    ) -> pb.MoveQueuedTurnResponse:
        key, command = parse.move_queued_turn(request, self._policy)
        return convert.queue_moved(await decided(self._store, context, key, command, core.QueueMoved))

    @guarded
    async def SteerTurn(self, request: pb.SteerTurnRequest, context: Context) -> pb.SteerTurnResponse:
        key, command = parse.steer(request, self._policy)
        expected = (core.Steered, core.SteerMismatch, core.SteerQueued)
        return convert.steered(await decided(self._store, context, key, command, expected))

    @guarded
    async def MintSessionToken(
        self, request: pb.MintSessionTokenRequest, context: Context
    ) -> pb.MintSessionTokenResponse:
        order = parse.mint_session_token(request)
        keys = self._session_keys()
        if keys is None:
            await errors.abort(
                context,
                errors.failed_precondition(
                    "session tokens are off: this service has no signing keys (TURNGATE_SESSION_TOKEN_KEYS)"
                ),
            )
        return convert.session_token(keys.mint(current_principal.get(), order.reach, order.ttl))
