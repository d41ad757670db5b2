"""WatchSession fan-out end to end: an event is converted and serialized once however many
watchers get it (replays included), the bytes on the wire are the contract's message, the
`turn_id` filter still holds, and a watcher that never reads slows none of the others.

Conversions are counted by a spy on `convert.event` (the one conversion of an event, in the
server running in this process), for the test's own session only.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import grpc
import pytest
from google.rpc import error_details_pb2

from tests.support.calls import admit, complete, events_after, heartbeat, refusal_of, stop
from tests.support.servers import Client, OwnServer, client_for
from tests.support.watching import (
    STREAM_TIMEOUT_S,
    act_out_turn,
    collect,
    collect_until,
    ended,
    seqs,
    settles,
    turn_of,
    watch,
    write_tool_calls,
)
from turngate.service.api import convert
from turngate.service.core import Event, SessionKey
from turngate.v1 import turngate_pb2 as pb

WATCHERS = 100
WATCH_SESSION = "/turngate.v1.SessionService/WatchSession"
Conversions = Counter[tuple[int, int]]


@pytest.fixture
def conversions(monkeypatch: pytest.MonkeyPatch, session: pb.SessionRef) -> Conversions:
    """How many times each event of the test's session was converted, by (epoch, seq)."""
    key = SessionKey(session.project_id, session.session_id)
    counts: Conversions = Counter()
    real = convert.event

    def counted(of: SessionKey, event: Event) -> pb.SessionEvent:
        if of == key:
            counts[event.epoch, event.seq] += 1
        return real(of, event)

    monkeypatch.setattr(convert, "event", counted)
    return counts


def once_each(events: list[pb.SessionEvent]) -> Conversions:
    return Counter({(e.epoch, e.seq): 1 for e in events})


async def test_i9_a_hundred_watchers_get_every_event_converted_once_and_the_filter_still_holds(
    client: Client, session: pb.SessionRef, conversions: Conversions
) -> None:
    await complete(client, (await admit(client, session, "before")).lease)
    streams = [watch(client, session) for _ in range(WATCHERS)]
    filtered = watch(client, session, turn_id="t1")
    assert {(await collect(s, 1))[0].seq for s in [*streams, filtered]} == {2}

    received = asyncio.gather(*(collect_until(s, settles("t1")) for s in [*streams, filtered]))
    await stop(client, session, "other")  # tombstones turn "other": an event the filter drops
    await act_out_turn(client, session, "t1")
    *sequences, only_t1 = await received

    log = await events_after(client, session, 2)  # a replay: equal events, read from the log
    assert {turn_of(e) for e in log} == {"other", "t1"}
    assert all(events == log for events in sequences)
    assert only_t1 == [e for e in log if turn_of(e) == "t1"]
    assert conversions == once_each(log), "one conversion per event, for 102 streams"
    for stream in [*streams, filtered]:
        stream.cancel()


async def test_the_bytes_on_the_wire_are_the_contract_messages_serialized(
    client: Client, session: pb.SessionRef
) -> None:
    raw_watch: grpc.aio.UnaryStreamMultiCallable[pb.WatchSessionRequest, bytes] = client.channel.unary_stream(
        WATCH_SESSION, request_serializer=pb.WatchSessionRequest.SerializeToString
    )
    raw = raw_watch(pb.WatchSessionRequest(session=session))
    typed = client.sessions.WatchSession(pb.WatchSessionRequest(session=session))

    async def received() -> bytes:
        message = await raw.read()
        assert isinstance(message, bytes), message
        return message

    async with asyncio.timeout(STREAM_TIMEOUT_S):
        sent = [await received()]
    snapshot = pb.WatchSessionResponse.FromString(sent[0])
    assert snapshot.event.HasField("snapshot")  # each stream's own (its time), so compared alone
    assert snapshot.SerializeToString() == sent[0]
    await collect(typed, 1)

    await act_out_turn(client, session, "t1")
    async with asyncio.timeout(STREAM_TIMEOUT_S):
        while not settles("t1")(pb.WatchSessionResponse.FromString(sent[-1]).event):
            sent.append(await received())
    events = await collect(typed, len(sent) - 1)
    assert sent[1:] == [pb.WatchSessionResponse(event=e).SerializeToString() for e in events]
    raw.cancel()
    typed.cancel()


async def test_i9_a_watcher_that_never_reads_slows_none_of_a_hundred_others(
    own_server: OwnServer, session: pb.SessionRef, conversions: Conversions
) -> None:
    events = 256  # far more than watch_buffer plus what HTTP/2 flow control holds in transit
    async with own_server(watch_buffer=16) as (server, client):
        lease = (await admit(client, session, "t1")).lease
        # A client that does not read: its receive window stays at HTTP/2's initial 64 KiB.
        async with grpc.aio.insecure_channel(
            f"127.0.0.1:{server.port}", options=[("grpc.http2.bdp_probe", 0)]
        ) as channel:
            slow = watch(client_for(channel), session)
            steady = [watch(client, session) for _ in range(WATCHERS - 1)]
            assert seqs(await collect(slow, 1)) == [1]
            assert {seqs(await collect(s, 1))[0] for s in steady} == {1}

            received = asyncio.gather(*(collect(s, events) for s in steady))
            await write_tool_calls(client, lease, events, error="e" * 1024)
            # The barrier: every other watcher has every event while the slow one has read
            # nothing since its snapshot (were it holding them up, this would never complete).
            assert all(seqs(r) == list(range(2, 2 + events)) for r in await received)
            assert server.hub.watchers == WATCHERS, "the slow stream is still open, stalled"

            delivered, error = await ended(slow)
            refusal = refusal_of(error)
            assert refusal.code == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert refusal.info == error_details_pb2.ErrorInfo(
                reason="LIMIT_EXCEEDED", domain="turngate.v1", metadata={"limit": "watch_buffer"}
            )
            cursor = delivered[-1].seq
            assert seqs(delivered) == list(range(2, cursor + 1))
            assert cursor < 1 + events

            resumed = watch(client, session, after_seq=cursor)
            rest = await collect(resumed, 1 + events - cursor)
            assert seqs(rest) == list(range(cursor + 1, 2 + events))
            assert (await heartbeat(client, lease)).directive == pb.DIRECTIVE_CONTINUE
            assert conversions == once_each([*delivered, *rest])
            resumed.cancel()
            for stream in steady:
                stream.cancel()
