"""AdmissionService: what runners call to get, keep and end the right to run a turn."""

from __future__ import annotations

from dataclasses import replace

from turngate.service import core
from turngate.service.api import convert, parse
from turngate.service.api.edge import current_principal
from turngate.service.api.errors import guarded
from turngate.service.api.fields import traceparent
from turngate.service.api.policy import Policy
from turngate.service.api.replies import Context, decided
from turngate.service.auth import access
from turngate.service.core import SessionKey
from turngate.service.ports.store import Store
from turngate.v1 import turngate_pb2 as pb
from turngate.v1 import turngate_pb2_grpc as pb_grpc


class AdmissionService(pb_grpc.AdmissionServiceServicer):
    def __init__(self, store: Store, policy: Policy) -> None:
        self._store = store
        self._policy = policy

    @guarded
    async def AdmitTurn(self, request: pb.AdmitTurnRequest, context: Context) -> pb.AdmitTurnResponse:
        metadata = {k: v for k, v in context.invocation_metadata() or () if isinstance(v, str)}
        caller = current_principal.get()
        key, command = parse.admit(
            request,
            self._policy,
            traceparent(metadata),
            caller.name,
            may_stop_others=access.may_stop_others(caller),
        )
        if command.max_active_in_project:
            command = replace(command, active_in_project=await self._active_in_project(key, command))
        expected = (core.Admitted, core.Queued)
        reply = await decided(self._store, context, key, command, expected, admission=True)
        return convert.admitted(key, reply)

    async def _active_in_project(self, key: SessionKey, command: core.Admit) -> int:
        """How many of the project's sessions a turn holds, counted up to the bound."""
        return await self._store.count_active_in_project(key.project_id, command.max_active_in_project)

    @guarded
    async def Heartbeat(self, request: pb.HeartbeatRequest, context: Context) -> pb.HeartbeatResponse:
        key, command = parse.heartbeat(request, current_principal.get().name)
        return convert.heartbeat(await decided(self._store, context, key, command, core.HeartbeatReply))

    @guarded
    async def RecordToolCall(
        self, request: pb.RecordToolCallRequest, context: Context
    ) -> pb.RecordToolCallResponse:
        key, command = parse.record_tool_call(request, self._policy, current_principal.get().name)
        reply = await decided(self._store, context, key, command, core.ToolCallReply)
        return convert.tool_call_recorded(reply)

    @guarded
    async def RecordInteraction(
        self, request: pb.RecordInteractionRequest, context: Context
    ) -> pb.RecordInteractionResponse:
        key, command = parse.record_interaction(request, self._policy, current_principal.get().name)
        reply = await decided(self._store, context, key, command, core.InteractionReply)
        return convert.interaction_recorded(reply)

    @guarded
    async def CompleteTurn(
        self, request: pb.CompleteTurnRequest, context: Context
    ) -> pb.CompleteTurnResponse:
        key, command = parse.complete(request, current_principal.get().name)
        return convert.completed(await decided(self._store, context, key, command, core.CompleteReply))

    @guarded
    async def AcknowledgeSteer(
        self, request: pb.AcknowledgeSteerRequest, context: Context
    ) -> pb.AcknowledgeSteerResponse:
        key, command = parse.acknowledge_steer(request, current_principal.get().name)
        reply = await decided(self._store, context, key, command, core.SteerAcknowledged)
        return convert.steer_acknowledged(reply)
