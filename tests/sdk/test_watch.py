"""The watch SDK: one iterator over a session's events that survives the service being killed
and restarted, and a cut-off for falling behind, without losing or repeating an event."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.sdk.conftest import PROJECT
from tests.sdk.wire import Wire
from tests.support.backoff import FAST
from tests.support.calls import admit, complete, record_call
from tests.support.processes import free_port, spawn_server
from tests.support.servers import Client as Raw
from tests.support.servers import OwnServer
from tests.support.waiting import eventually
from tests.support.watching import STREAM_TIMEOUT_S, write_tool_calls
from turngate.client import Client, Event, SessionSnapshot, Watch
from turngate.v1 import turngate_pb2 as pb


async def gather_into(events: Watch, seen: list[Event]) -> None:
    async for event in events:
        seen.append(event)


def arrived(seen: list[Event], seq: int) -> bool:
    return bool(seen) and seen[-1].seq >= seq


async def _until(seen: list[Event], seq: int) -> None:
    await eventually(lambda: arrived(seen, seq))


async def test_watch_resumes_across_a_killed_and_restarted_server_gapless_without_duplicates(
    tmp_path: Path, wire: Wire
) -> None:
    port = free_port()
    ref = pb.SessionRef(project_id=PROJECT, session_id="s-restart")
    seen: list[Event] = []
    async with Client(f"127.0.0.1:{port}", PROJECT, backoff=FAST, interceptors=wire.interceptors) as client:
        async with spawn_server(tmp_path, port=port) as first:
            watcher = asyncio.create_task(gather_into(client.watch(ref.session_id), seen))
            await eventually(lambda: bool(seen))
            lease = (await admit(first.client, ref, "t1", lease_ttl=60)).lease
            await write_tool_calls(first.client, lease, 5, prefix="before")
            await eventually(lambda: arrived(seen, 6))
            await first.kill()  # SIGKILL, mid-stream

        async with spawn_server(tmp_path, port=port) as second:
            await write_tool_calls(second.client, lease, 5, prefix="after")
            await complete(second.client, lease)
            await asyncio.wait_for(_until(seen, 12), STREAM_TIMEOUT_S)  # resumed by itself
        watcher.cancel()

    assert [e.kind for e in seen[:2]] == ["snapshot", "turn_admitted"]
    assert [e.seq for e in seen] == list(range(13)), "a gap or a repeat across the restart"
    assert not any(isinstance(e.body, SessionSnapshot) for e in seen[1:])
    assert wire.sent["WatchSession"] >= 2
    assert seen[0].epoch == 0, "the snapshot of a session not written yet"
    assert {e.epoch for e in seen[1:]} == {seen[1].epoch} != {0}, "then the epoch of its first write"
    resumed = wire.requests["WatchSession"][-1]
    assert isinstance(resumed, pb.WatchSessionRequest)
    assert resumed.epoch == seen[-1].epoch, "it resumes in its cursor's epoch"


async def test_a_watcher_cut_off_for_falling_behind_resumes_by_itself(
    own_server: OwnServer, ref: pb.SessionRef, wire: Wire
) -> None:
    written = 256  # far more than watch_buffer plus what HTTP/2 flow control holds in transit
    async with own_server(watch_buffer=16) as (server, raw):
        lease = (await admit(raw, ref, "t1")).lease
        async with (
            Client(
                f"127.0.0.1:{server.port}",
                PROJECT,
                backoff=FAST,
                interceptors=wire.interceptors,
                channel_options=[("grpc.http2.bdp_probe", 0)],  # its receive window stays at 64 KiB
            ) as client,
            client.watch(ref.session_id) as events,
        ):
            assert (await anext(events)).seq == 1  # then it does not read while the writes go on
            await write_tool_calls(raw, lease, written, error="e" * 1024)
            rest = [await anext(events) for _ in range(written)]

    assert [e.seq for e in rest] == list(range(2, 2 + written))
    assert wire.sent["WatchSession"] == 2


async def test_a_cursor_the_service_cannot_resume_yields_a_resync_snapshot_then_live_events(
    client: Client, raw: Raw, ref: pb.SessionRef
) -> None:
    lease = (await admit(raw, ref, "t1")).lease
    async with client.watch(ref.session_id, after_seq=99) as events:
        first = await anext(events)
        assert isinstance(first.body, SessionSnapshot)
        assert (first.body.resync, first.seq, events.cursor) == (True, 1, 1)
        await record_call(raw, lease, "c1")
        assert (await anext(events)).seq == 2


async def test_a_cursor_of_another_epoch_yields_a_resync_snapshot_and_one_of_this_epoch_resumes(
    client: Client, raw: Raw, ref: pb.SessionRef
) -> None:
    """An epoch other than the session's: the cursor is of a log the service's store lost."""
    lease = (await admit(raw, ref, "t1")).lease
    await record_call(raw, lease, "c1")
    async with client.watch(ref.session_id) as events:
        epoch = (await anext(events)).epoch
    assert epoch > 0

    async with client.watch(ref.session_id, after_seq=1, epoch=epoch + 1) as events:
        first = await anext(events)
        assert isinstance(first.body, SessionSnapshot)
        assert (first.body.resync, first.body.epoch, first.seq) == (True, epoch, 2)
    async with client.watch(ref.session_id, after_seq=1, epoch=epoch) as events:
        assert ((await anext(events)).seq, events.cursor) == (2, 2)


async def test_a_turn_filter_keeps_only_that_turns_events(
    client: Client, raw: Raw, ref: pb.SessionRef
) -> None:
    await complete(raw, (await admit(raw, ref, "t1")).lease)
    lease = (await admit(raw, ref, "t2")).lease
    async with client.watch(ref.session_id, after_seq=1, turn_id="t2") as events:
        await record_call(raw, lease, "c1")
        assert [(await anext(events)).kind for _ in range(2)] == ["turn_admitted", "tool_call"]
