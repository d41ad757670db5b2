"""The queue's calls (docs/design.md §7) that the telemetry tests script: a turn that waits in the
session's queue, a Stop that says what the queue does next, and ResumeQueue."""

from __future__ import annotations

from tests.e2e.calls import seconds
from tests.e2e.servers import Client
from turngate.v1 import turngate_pb2 as pb


async def enqueue(
    client: Client, session: pb.SessionRef, turn_id: str, wait: float | None = None
) -> pb.AdmitTurnResponse:
    """AdmitTurn in mode ENQUEUE by runner r1, waiting at most `wait` seconds (the default if None)."""
    request = pb.AdmitTurnRequest(
        session=session, turn_id=turn_id, runner_id="r1", mode=pb.ADMISSION_MODE_ENQUEUE
    )
    if wait is not None:
        request.max_queue_wait.CopyFrom(seconds(wait))
    return await client.admission.AdmitTurn(request)


async def stop_then(
    client: Client, session: pb.SessionRef, expected_turn_id: str, queue: pb.QueueAction.ValueType
) -> pb.CancelTurnResponse:
    request = pb.CancelTurnRequest(
        session=session, expected_turn_id=expected_turn_id, reason="user pressed stop", queue=queue
    )
    return await client.control.CancelTurn(request)


async def resume(client: Client, session: pb.SessionRef) -> pb.ResumeQueueResponse:
    return await client.control.ResumeQueue(pb.ResumeQueueRequest(session=session))
