"""WatchSession end to end (I9): a snapshot at the head first, then every event once, in seq order,
to every watcher; resumable from any retained cursor; resynced from any other; slow watchers are
cut off without slowing anyone; cancelling a watch or shutting the server down ends only streams.
"""

from __future__ import annotations

import asyncio

import grpc
from google.rpc import error_details_pb2

from tests.support.calls import (
    admit,
    complete,
    events_after,
    heartbeat,
    record_call,
    record_interaction,
    refusal_of,
    resolve,
    snapshot,
    state_of,
    stop,
)
from tests.support.servers import Client, OwnServer, client_for
from tests.support.waiting import WAIT_TIMEOUT_S, eventually
from tests.support.watching import (
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
from turngate.v1 import turngate_pb2 as pb

WATCHERS = 100


async def test_i9_watch_from_zero_starts_with_a_snapshot_whose_seq_is_the_head(
    client: Client, session: pb.SessionRef
) -> None:
    before_any = watch(client, session)
    fresh = (await collect(before_any, 1))[0]
    before_any.cancel()
    assert fresh.seq == fresh.snapshot.seq == 0
    assert fresh.snapshot.phase == pb.SESSION_PHASE_IDLE
    assert not fresh.snapshot.HasField("active")
    assert not fresh.snapshot.resync

    first = (await admit(client, session, "t1")).lease
    await complete(client, first)
    lease = (await admit(client, session, "t2")).lease
    await record_call(client, lease, "c1")
    stream = watch(client, session)
    head = (await collect(stream, 1))[0]
    assert head.seq == head.snapshot.seq == (await snapshot(client, session)).seq == 4
    assert head.snapshot.phase == pb.SESSION_PHASE_RUNNING
    assert (head.snapshot.active.turn_id, head.snapshot.active.generation) == ("t2", lease.generation)
    assert head.snapshot.last_settled.turn_id == "t1"
    assert not head.snapshot.resync

    await record_call(client, lease, "c1", pb.TOOL_CALL_STATUS_SUCCEEDED)
    live = (await collect(stream, 1))[0]
    assert live.seq == 5
    assert live.tool_call.tool_call.status == pb.TOOL_CALL_STATUS_SUCCEEDED
    stream.cancel()


async def test_i9_hundred_watchers_receive_the_same_gapless_sequence(
    client: Client, session: pb.SessionRef
) -> None:
    await complete(client, (await admit(client, session, "before")).lease)
    streams = [watch(client, session) for _ in range(WATCHERS)]
    heads = {(await collect(s, 1))[0].seq for s in streams}
    assert heads == {2}

    received = asyncio.gather(*(collect_until(s, settles("t1")) for s in streams))
    await act_out_turn(client, session, "t1")
    sequences = await received

    log = await events_after(client, session, 2)
    assert all(events == log for events in sequences)
    assert seqs(log) == list(range(3, 3 + len(log)))
    kinds = [e.WhichOneof("kind") for e in log]
    assert {"turn_admitted", "tool_call", "interaction", "stop_requested"} <= set(kinds)
    assert kinds.count("turn_settled") == 1
    settled = log[-1].turn_settled
    assert settled.turn.outcome == pb.TURN_OUTCOME_CANCELLED
    assert list(settled.interrupted_tool_call_ids) == ["c2"]
    for stream in streams:
        stream.cancel()


async def test_i9_watcher_resuming_from_its_last_seq_misses_nothing_and_sees_nothing_twice(
    client: Client, session: pb.SessionRef
) -> None:
    steady = watch(client, session)
    stream = watch(client, session)
    await collect(steady, 1)
    await collect(stream, 1)
    lease = (await admit(client, session, "t1")).lease
    writer = asyncio.create_task(write_tool_calls(client, lease, 60))

    received: list[pb.SessionEvent] = []
    for _ in range(3):  # disconnect mid-turn, while the runner writes, and resume each time
        received += await collect(stream, 10)
        stream.cancel()
        stream = watch(client, session, after_seq=received[-1].seq)
    await writer
    await complete(client, lease)
    received += await collect_until(stream, settles("t1"))

    everything = await collect_until(steady, settles("t1"))
    assert received == everything
    assert seqs(received) == list(range(1, len(everything) + 1))
    steady.cancel()
    stream.cancel()


async def test_i9_cursor_older_than_retention_yields_a_resync_snapshot(
    own_server: OwnServer, session: pb.SessionRef
) -> None:
    async with own_server(event_retention=100) as (_, client):
        lease = (await admit(client, session, "t1")).lease
        await write_tool_calls(client, lease, 110)
        head = (await snapshot(client, session)).seq
        assert head == 111

        oldest = watch(client, session, after_seq=head - 100)  # the oldest cursor still retained
        assert seqs(await collect(oldest, 100)) == list(range(head - 99, head + 1))

        stream = watch(client, session, after_seq=head - 101)
        resync = (await collect(stream, 1))[0]
        assert resync.seq == resync.snapshot.seq == head
        assert resync.snapshot.resync
        assert resync.snapshot.active.turn_id == "t1"

        await record_call(client, lease, "after-resync")
        assert seqs(await collect(stream, 1)) == seqs(await collect(oldest, 1)) == [head + 1]
        oldest.cancel()
        stream.cancel()


async def test_i9_cursor_past_the_head_yields_a_resync_snapshot(
    client: Client, session: pb.SessionRef
) -> None:
    lease = (await admit(client, session, "t1")).lease
    head = (await snapshot(client, session)).seq

    stream = watch(client, session, after_seq=head + 5)
    resync = (await collect(stream, 1))[0]
    assert resync.seq == resync.snapshot.seq == head
    assert resync.snapshot.resync

    await record_call(client, lease, "c1")
    assert seqs(await collect(stream, 1)) == [head + 1]
    stream.cancel()


async def test_i9_turn_id_filter_delivers_only_that_turns_events(
    client: Client, session: pb.SessionRef
) -> None:
    live = watch(client, session, turn_id="b")
    assert (await collect(live, 1))[0].HasField("snapshot")  # snapshots are always sent

    a = (await admit(client, session, "a")).lease
    await record_call(client, a, "c1")
    await complete(client, a)
    b = (await admit(client, session, "b")).lease
    await record_call(client, b, "c1")
    await stop(client, session, "c")  # tombstones turn c; b stays untouched
    await record_interaction(client, b, "i1")
    await resolve(client, session, "i1")
    await complete(client, b)

    log = await events_after(client, session, 1)
    assert {turn_of(e) for e in log} == {"a", "b", "c"}
    b_events = [e for e in log if turn_of(e) == "b"]
    assert await collect_until(live, settles("b")) == b_events
    replayed = watch(client, session, after_seq=1, turn_id="b")
    assert await collect_until(replayed, settles("b")) == b_events
    live.cancel()
    replayed.cancel()


async def test_i9_slow_watcher_is_cut_off_with_limit_exceeded_and_others_are_unaffected(
    own_server: OwnServer, session: pb.SessionRef
) -> None:
    events = 256  # far more than watch_buffer plus what HTTP/2 flow control holds in transit
    async with own_server(watch_buffer=16) as (server, client):
        lease = (await admit(client, session, "t1")).lease
        # A client that does not read: its receive window stays at HTTP/2's initial 64 KiB.
        async with grpc.aio.insecure_channel(
            f"127.0.0.1:{server.port}", options=[("grpc.http2.bdp_probe", 0)]
        ) as channel:
            slow = watch(client_for(channel), session)
            steady = watch(client, session)
            assert seqs(await collect(slow, 1)) == seqs(await collect(steady, 1)) == [1]
            steady_events = asyncio.create_task(collect(steady, events))

            await write_tool_calls(client, lease, events, error="e" * 1024)
            assert seqs(await steady_events) == list(range(2, 2 + events))

            delivered, error = await ended(slow)
            refusal = refusal_of(error)
            assert refusal.code == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert refusal.info == error_details_pb2.ErrorInfo(
                reason="LIMIT_EXCEEDED", domain="turngate.v1", metadata={"limit": "watch_buffer"}
            )
            cursor = delivered[-1].seq
            assert seqs(delivered) == list(range(2, cursor + 1))
            assert f"after_seq={cursor}" in (error.details() or "")
            assert cursor < 1 + events

            resumed = watch(client, session, after_seq=cursor)
            assert seqs(await collect(resumed, 1 + events - cursor)) == list(range(cursor + 1, 2 + events))
            assert (await heartbeat(client, lease)).directive == pb.DIRECTIVE_CONTINUE
            resumed.cancel()
            steady.cancel()


async def test_i9_cancelling_a_watch_never_affects_the_turn(
    own_server: OwnServer, session: pb.SessionRef
) -> None:
    async with own_server() as (server, client):
        lease = (await admit(client, session, "t1")).lease
        await record_interaction(client, lease, "i1")
        stream = watch(client, session, turn_id="t1")
        await collect(stream, 1)
        await record_call(client, lease, "c1")
        await collect(stream, 1)
        before = await state_of(client, session, "t1")
        assert server.hub.watchers == 1

        stream.cancel()
        await eventually(lambda: server.hub.watchers == 0)
        assert await state_of(client, session, "t1") == before
        assert (await heartbeat(client, lease)).directive == pb.DIRECTIVE_CONTINUE
        done = await complete(client, lease)
        assert done.recorded
        assert (done.turn.outcome, done.turn.settled_by) == (pb.TURN_OUTCOME_COMPLETED, pb.SETTLED_BY_RUNNER)


async def test_i9_server_shutdown_ends_watch_streams_with_unavailable(
    own_server: OwnServer, session: pb.SessionRef
) -> None:
    async with own_server() as (server, client):
        await admit(client, session, "t1")
        fresh = watch(client, session)
        await collect(fresh, 1)
        resumed = watch(client, session, after_seq=1)
        await eventually(lambda: server.hub.watchers == 2)

        await asyncio.wait_for(server.stop(), WAIT_TIMEOUT_S)
        for stream in (fresh, resumed):
            delivered, error = await ended(stream)
            assert delivered == []
            assert error.code() == grpc.StatusCode.UNAVAILABLE
            assert "after_seq=1" in (error.details() or "")
