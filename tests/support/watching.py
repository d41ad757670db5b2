"""Watching sessions end to end: open WatchSession streams, read what they deliver, and write
the runner and gateway traffic they watch."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import grpc

from tests.support.calls import admit, complete, record_call, record_interaction, resolve, stop
from tests.support.servers import Client
from turngate.v1 import turngate_pb2 as pb

Watch = grpc.aio.UnaryStreamCall[pb.WatchSessionRequest, pb.WatchSessionResponse]
EventTest = Callable[[pb.SessionEvent], bool]
# How long a stream may take to deliver what a test waits for: reached only when the test fails.
STREAM_TIMEOUT_S = 15.0


def watch(client: Client, session: pb.SessionRef, after_seq: int = 0, turn_id: str = "") -> Watch:
    return client.sessions.WatchSession(
        pb.WatchSessionRequest(session=session, after_seq=after_seq, turn_id=turn_id)
    )


async def _next(stream: Watch) -> pb.SessionEvent:
    response = await stream.read()
    assert response is not grpc.aio.EOF, "the watch stream ended"
    assert isinstance(response, pb.WatchSessionResponse)
    return response.event


async def collect(stream: Watch, n: int) -> list[pb.SessionEvent]:
    """The next `n` events of `stream`."""
    async with asyncio.timeout(STREAM_TIMEOUT_S):
        return [await _next(stream) for _ in range(n)]


async def collect_until(stream: Watch, last: EventTest) -> list[pb.SessionEvent]:
    """The events of `stream` up to and including the first one that passes `last`."""
    events: list[pb.SessionEvent] = []
    async with asyncio.timeout(STREAM_TIMEOUT_S):
        while not events or not last(events[-1]):
            events.append(await _next(stream))
    return events


async def ended(stream: Watch) -> tuple[list[pb.SessionEvent], grpc.aio.AioRpcError]:
    """The events `stream` still delivers, and the error that ends it (a clean end fails)."""
    events: list[pb.SessionEvent] = []
    try:
        async with asyncio.timeout(STREAM_TIMEOUT_S):
            while True:
                events.append(await _next(stream))
    except grpc.aio.AioRpcError as error:
        return events, error


def settles(turn_id: str) -> EventTest:
    """Passes the turn_settled event of `turn_id`."""
    return lambda event: event.HasField("turn_settled") and event.turn_settled.turn.turn_id == turn_id


def admits(turn_id: str) -> EventTest:
    """Passes the turn_admitted event of `turn_id`."""
    return lambda event: event.HasField("turn_admitted") and event.turn_admitted.turn.turn_id == turn_id


def dequeues(turn_id: str) -> EventTest:
    """Passes the turn_dequeued event of `turn_id` (it left the queue without running)."""
    return lambda event: event.HasField("turn_dequeued") and event.turn_dequeued.turn_id == turn_id


def turn_of(event: pb.SessionEvent) -> str:
    """The turn an event is about ('' for a snapshot)."""
    match event.WhichOneof("kind"):
        case "turn_admitted":
            return event.turn_admitted.turn.turn_id
        case "stop_requested":
            return event.stop_requested.turn_id
        case "tool_call":
            return event.tool_call.turn_id
        case "interaction":
            return event.interaction.turn_id
        case "turn_settled":
            return event.turn_settled.turn.turn_id
        case "turn_queued":
            return event.turn_queued.turn.turn_id
        case "turn_dequeued":
            return event.turn_dequeued.turn_id
        case "queue_paused":  # the turn whose end paused the queue
            return event.queue_paused.turn_id
        case "queue_resumed":
            return event.queue_resumed.turn_id
        case "turn_steered":
            return event.turn_steered.turn_id
        case "steer_ended":
            return event.steer_ended.turn_id
        case "queue_reordered":  # the turn that moved
            return event.queue_reordered.moved_turn_id
    return ""


def seqs(events: list[pb.SessionEvent]) -> list[int]:
    return [e.seq for e in events]


async def write_tool_calls(
    client: Client, lease: pb.TurnLease, n: int, prefix: str = "call", error: str = ""
) -> None:
    """Records `n` finished tool calls, one event each (FAILED with `error` when one is given)."""
    status = pb.TOOL_CALL_STATUS_FAILED if error else pb.TOOL_CALL_STATUS_SUCCEEDED
    for i in range(n):
        await record_call(client, lease, f"{prefix}-{i}", status, error)


async def act_out_turn(client: Client, session: pb.SessionRef, turn_id: str) -> None:
    """A runner and a gateway act on one turn: admission, tool calls, approvals (one answered
    while the runner works), a Stop that withdraws the open approval, and the runner's CANCELLED
    report, which interrupts the tool call still open."""
    lease = (await admit(client, session, turn_id)).lease
    await record_call(client, lease, "c1")
    await record_interaction(client, lease, "i1")
    await asyncio.gather(
        resolve(client, session, "i1"),
        record_call(client, lease, "c1", pb.TOOL_CALL_STATUS_SUCCEEDED),
        record_call(client, lease, "c2"),
    )
    await record_interaction(client, lease, "i2")
    await stop(client, session, turn_id)
    await complete(client, lease, pb.TURN_OUTCOME_CANCELLED)


async def watch_from_start(client: Client, session: pb.SessionRef) -> Watch:
    """A watch of a session nothing has happened in yet: its snapshot (read here) is at seq 0, so
    the stream goes on with the whole log, from seq 1."""
    stream = watch(client, session)
    [first] = await collect(stream, 1)
    assert first.HasField("snapshot"), first
    assert first.seq == 0, f"session {session.session_id} is not new"
    return stream
