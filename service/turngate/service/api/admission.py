"""AdmissionService: what runners call to get, keep and end the right to run a turn."""

from __future__ import annotations

from turngate.service import core
from turngate.service.api import convert, parse
from turngate.service.api.errors import guarded
from turngate.service.api.replies import Context, answer
from turngate.service.store.base import Store
from turngate.v1 import turngate_pb2 as pb
from turngate.v1 import turngate_pb2_grpc as pb_grpc


class AdmissionService(pb_grpc.AdmissionServiceServicer):
    def __init__(self, store: Store, policy: parse.Policy) -> None:
        self._store = store
        self._policy = policy

    @guarded
    async def AdmitTurn(self, request: pb.AdmitTurnRequest, context: Context) -> pb.AdmitTurnResponse:
        metadata = {k: v for k, v in context.invocation_metadata() or () if isinstance(v, str)}
        key, command = parse.admit(request, self._policy, parse.traceparent(metadata))
        reply = await answer(context, (await self._store.apply(key, command)).reply, admission=True)
        assert isinstance(reply, core.Admitted)
        return convert.admitted(key, reply)

    @guarded
    async def Heartbeat(self, request: pb.HeartbeatRequest, context: Context) -> pb.HeartbeatResponse:
        key, command = parse.heartbeat(request)
        reply = await answer(context, (await self._store.apply(key, command)).reply)
        assert isinstance(reply, core.HeartbeatReply)
        return convert.heartbeat(reply)

    @guarded
    async def RecordToolCall(
        self, request: pb.RecordToolCallRequest, context: Context
    ) -> pb.RecordToolCallResponse:
        key, command = parse.record_tool_call(request)
        reply = await answer(context, (await self._store.apply(key, command)).reply)
        assert isinstance(reply, core.ToolCallReply)
        return convert.tool_call_recorded(reply)

    @guarded
    async def RecordInteraction(
        self, request: pb.RecordInteractionRequest, context: Context
    ) -> pb.RecordInteractionResponse:
        key, command = parse.record_interaction(request)
        reply = await answer(context, (await self._store.apply(key, command)).reply)
        assert isinstance(reply, core.InteractionReply)
        return convert.interaction_recorded(reply)

    @guarded
    async def CompleteTurn(
        self, request: pb.CompleteTurnRequest, context: Context
    ) -> pb.CompleteTurnResponse:
        key, command = parse.complete(request)
        reply = await answer(context, (await self._store.apply(key, command)).reply)
        assert isinstance(reply, core.CompleteReply)
        return convert.completed(reply)
