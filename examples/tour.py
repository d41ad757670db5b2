"""A five-minute tour of turngate: admission, a busy refusal, a guarded Stop and a live watch.

Run `turngate serve` in one terminal, then `python examples/tour.py` in another
(or `python examples/tour.py HOST:PORT`). It plays a runner, a gateway and a watcher.
"""

from __future__ import annotations

import asyncio
import sys
import uuid

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from turngate.v1 import turngate_pb2 as pb
from turngate.v1 import turngate_pb2_grpc as pb_grpc


def say(step: str) -> None:
    print(f"\n== {step}")


async def watch(sessions: pb_grpc.SessionServiceAsyncStub, ref: pb.SessionRef) -> None:
    """Prints every event of the session, starting from a snapshot."""
    async for response in sessions.WatchSession(pb.WatchSessionRequest(session=ref)):
        event = response.event
        print(f"   [watch] seq={event.seq} {event.WhichOneof('kind')}")


async def tour(target: str) -> None:
    async with grpc.aio.insecure_channel(target) as channel:
        runner = pb_grpc.AdmissionServiceStub(channel)
        gateway = pb_grpc.ControlServiceStub(channel)
        sessions = pb_grpc.SessionServiceStub(channel)
        ref = pb.SessionRef(project_id="demo", session_id=f"chat-{uuid.uuid4().hex[:8]}")
        watcher = asyncio.create_task(watch(sessions, ref))
        await asyncio.sleep(0.2)

        say("a runner asks to run turn-1: admitted, with a fencing generation")
        admitted = await runner.AdmitTurn(
            pb.AdmitTurnRequest(session=ref, turn_id="turn-1", runner_id="runner-a")
        )
        lease = admitted.lease
        print(f"   generation={lease.generation} heartbeat every {admitted.heartbeat_interval.ToTimedelta()}")

        say("a second message arrives while turn-1 runs: refused, turn-1 is untouched")
        try:
            await runner.AdmitTurn(pb.AdmitTurnRequest(session=ref, turn_id="turn-2", runner_id="runner-b"))
        except grpc.aio.AioRpcError as error:
            status = rpc_status.from_call(error)
            info = error_details_pb2.ErrorInfo()
            assert status is not None
            status.details[0].Unpack(info)
            print(f"   {error.code().name} {info.reason} active={info.metadata['activeTurnId']}")

        say("the runner opens a tool call, then the user presses Stop on turn-1")
        call = pb.RecordToolCallRequest(
            lease=lease, call_id="call-1", name="search", status=pb.TOOL_CALL_STATUS_OPEN
        )
        await runner.RecordToolCall(call)
        stop = await gateway.CancelTurn(
            pb.CancelTurnRequest(session=ref, expected_turn_id="turn-1", reason="user")
        )
        print(f"   {stop.WhichOneof('outcome')}: stopping={stop.cancelled.stopping_turn_id}")

        say("the runner's next heartbeat says STOP; it reports CANCELLED")
        beat = await runner.Heartbeat(pb.HeartbeatRequest(lease=lease))
        print(f"   directive={pb.Directive.Name(beat.directive)} reason={beat.stop_reason!r}")
        done = await runner.CompleteTurn(
            pb.CompleteTurnRequest(lease=lease, outcome=pb.TURN_OUTCOME_CANCELLED)
        )
        print(f"   outcome={pb.TurnOutcome.Name(done.turn.outcome)} recorded={done.recorded}")

        say("turn-2 is admitted; a late Stop meant for turn-1 does not touch it")
        await runner.AdmitTurn(pb.AdmitTurnRequest(session=ref, turn_id="turn-2", runner_id="runner-b"))
        late = await gateway.CancelTurn(pb.CancelTurnRequest(session=ref, expected_turn_id="turn-1"))
        print(f"   {late.WhichOneof('outcome')}: current={late.mismatch.current_turn_id}")

        say("turn-1's history: the tool call left open by the Stop was closed INTERRUPTED")
        turn = (await sessions.GetTurn(pb.GetTurnRequest(session=ref, turn_id="turn-1"))).turn
        for tool_call in turn.tool_calls:
            print(f"   {tool_call.call_id} {pb.ToolCallStatus.Name(tool_call.status)}")

        await asyncio.sleep(0.2)
        watcher.cancel()


if __name__ == "__main__":
    asyncio.run(tour(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:50051"))
