"""ControlService: what gateways call to forward a user's Stop and answers to interactions."""

from __future__ import annotations

from turngate.service import core
from turngate.service.api import convert, parse
from turngate.service.api.errors import guarded
from turngate.service.api.replies import Context, answer
from turngate.service.store.base import Store
from turngate.v1 import turngate_pb2 as pb
from turngate.v1 import turngate_pb2_grpc as pb_grpc


class ControlService(pb_grpc.ControlServiceServicer):
    def __init__(self, store: Store, policy: parse.Policy) -> None:
        self._store = store
        self._policy = policy

    @guarded
    async def CancelTurn(self, request: pb.CancelTurnRequest, context: Context) -> pb.CancelTurnResponse:
        key, command = parse.cancel(request, self._policy)
        reply = await answer(context, (await self._store.apply(key, command)).reply)
        assert isinstance(reply, core.Cancelled | core.Mismatch | core.Idle)
        return convert.cancelled(reply)

    @guarded
    async def ResolveInteraction(
        self, request: pb.ResolveInteractionRequest, context: Context
    ) -> pb.ResolveInteractionResponse:
        key, command = parse.resolve_interaction(request)
        reply = await answer(context, (await self._store.apply(key, command)).reply)
        assert isinstance(reply, core.InteractionReply)
        return convert.interaction_resolved(reply)
