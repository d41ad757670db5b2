"""WatchHub (watch.py) over the in-memory store: a snapshot first, replay then live without
duplicates or gaps (I9), gaps filled from the log, slow watchers cut off alone, resync (also across
a session the store lost and started again, in a new epoch), shutdown, and what the cross-replica
feed is told.

Each stream is pulled one item at a time, as a gRPC handler pulls it; between two pulls the test
writes through the store (the hub's listener publishes) or delivers as a feed would, so every
interleaving below is forced, never hoped for.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from tests.support.memory_store import MemoryStore
from turngate.service.core import NO_EPOCH, Event, Session
from turngate.service.watch import Snapshot, WatchClosed, WatchOverflow

from .helpers import SECOND, T0, admit
from .watch_hub import (
    KEY,
    OTHER,
    FakeFeed,
    ReadsLogged,
    Stream,
    Writer,
    hub_on,
    written,
)


async def test_i9_a_stream_from_zero_starts_with_a_snapshot_of_the_head_then_follows_live() -> None:
    store, writer = await written(3)
    store.clock.advance(7)
    hub = hub_on(store)
    stream = Stream(hub)

    assert await stream.snapshot() == Snapshot(await store.load(KEY), T0 + 7, resync=False)
    await writer.call()
    assert await stream.seqs(1) == [4]
    await stream.close()


async def test_a_session_never_written_starts_with_an_empty_snapshot() -> None:
    hub = hub_on(MemoryStore())
    stream = Stream(hub, OTHER)
    assert await stream.snapshot() == Snapshot(Session(), T0, resync=False)
    await stream.close()


async def test_i9_events_committed_between_the_snapshot_and_the_replay_are_yielded_once() -> None:
    store, writer = await written(3)
    stream = Stream(hub_on(store))
    assert (await stream.snapshot()).state.head == 3

    # Committed after the watcher subscribed: queued live, and in the log its replay reads.
    await writer.calls(2)
    assert await stream.seqs(1) == [4]  # replayed from the log
    await writer.call()  # committed while replaying: queued live only
    assert await stream.seqs(2) == [5, 6]  # the replay's last, then 6 live (4 and 5 dropped)
    await writer.call()
    assert await stream.seqs(1) == [7], "nothing repeated, nothing missed"
    await stream.close()


async def test_i9_a_resumed_stream_replays_from_its_cursor_then_goes_live_without_a_snapshot() -> None:
    store, writer = await written(3)
    stream = Stream(hub_on(store), after_seq=1)

    assert await stream.seqs(1) == [2]
    await writer.call()  # seq 4, committed while the replay still has 3 to yield
    assert await stream.seqs(2) == [3, 4]
    await writer.call()
    assert await stream.seqs(1) == [5]
    await stream.close()


async def test_i9_a_replay_longer_than_a_page_is_gapless_with_commits_landing_between_pages() -> None:
    store, writer = await written(520)
    stream = Stream(hub_on(store, buffer=1_000), after_seq=10)

    seen = await stream.seqs(490)  # the first page of the replay, up to seq 500
    await writer.calls(3)  # 521-523: in the second page, and queued live too
    seen += await stream.seqs(23)

    assert seen == list(range(11, 524))
    await stream.close()


async def test_i9_events_delivered_out_of_commit_order_are_gap_filled_from_the_log() -> None:
    feed = FakeFeed()
    store, writer = await written(1, ReadsLogged())
    hub = hub_on(store, feed=feed)
    stream = Stream(hub)
    assert (await stream.snapshot()).state.head == 1
    pull = await store.waiting_live(stream)

    elsewhere = Writer(store.replica(), lease=writer.lease)  # not published here: another replica
    second, third = await elsewhere.calls(2)
    feed.read(KEY, [third])  # the feed hands over 3 before 2

    assert (await pull) == second, "2 is read from the log before 3 is yielded"
    assert await stream.seqs(1) == [3]
    feed.read(KEY, [second])  # 2 arrives late: already yielded
    await writer.call()
    assert await stream.seqs(1) == [4]
    await stream.close()


async def test_i9_an_event_both_committed_here_and_read_by_the_feed_is_yielded_once() -> None:
    feed = FakeFeed()
    store, writer = await written(1, ReadsLogged())
    hub = hub_on(store, feed=feed)
    stream = Stream(hub)
    await stream.snapshot()
    pull = await store.waiting_live(stream)
    other_replica = Writer(store.replica(), lease=writer.lease)

    local = await writer.call()  # seq 2, published by this store's listener
    feed.read(KEY, [local])  # ...and read back from the log by the feed
    remote = await other_replica.call()  # seq 3, written through another replica
    feed.read(KEY, [local, remote])  # the feed's read overlaps what it delivered

    assert (await pull) == local
    assert await stream.seqs(1) == [3]
    await writer.call()
    assert await stream.seqs(1) == [4], "2 and 3 were not queued twice"
    await stream.close()


async def test_a_slow_watcher_overflows_with_its_cursor_and_the_other_watcher_goes_on() -> None:
    store, writer = await written(1)
    hub = hub_on(store, buffer=3)
    slow, fast = Stream(hub), Stream(hub)
    await slow.snapshot()
    await fast.snapshot()

    await writer.call()
    assert await slow.seqs(1) == [2]
    fast_seqs = await fast.seqs(1)
    for _ in range(4):  # 3-6: more than the slow watcher's buffer holds, while it reads nothing
        await writer.call()
        fast_seqs += await fast.seqs(1)

    with pytest.raises(WatchOverflow) as overflow:
        await slow.next()
    assert overflow.value.cursor == 2, "it resumes after the last event it was given"
    assert "after_seq=2" in str(overflow.value)
    assert hub.watchers == 1

    await writer.call()
    fast_seqs += await fast.seqs(1)
    assert fast_seqs == [2, 3, 4, 5, 6, 7]
    resumed = Stream(hub, after_seq=overflow.value.cursor)
    assert await resumed.seqs(5) == [3, 4, 5, 6, 7], "the log has what the buffer dropped"
    await fast.close()
    await resumed.close()
    assert hub.watchers == 0


@pytest.mark.parametrize(
    ("after_seq", "resync"),
    [
        pytest.param(2, True, id="older-than-retention"),
        pytest.param(3, False, id="oldest-retained"),
        pytest.param(5, False, id="at-the-head"),
        pytest.param(6, True, id="beyond-the-head"),
        pytest.param(1_000_000, True, id="far-beyond-the-head"),
    ],
)
async def test_i9_a_cursor_older_than_retention_or_beyond_the_head_gets_a_resync_snapshot(
    after_seq: int, resync: bool
) -> None:
    store, writer = await written(5)
    head = await store.load(KEY)
    feed = FakeFeed()
    stream = Stream(hub_on(store, retention=2, feed=feed), after_seq=after_seq)
    first = asyncio.create_task(stream.next())
    await feed.tracking.wait()  # the stream has read the head it judges the cursor by
    await writer.call()  # 6, committed once the stream is subscribed

    if resync:
        assert await first == Snapshot(head, T0, resync=True)
        assert await stream.seqs(1) == [6]
    else:
        item = await first
        assert isinstance(item, Event), "a cursor the log still holds resumes without a snapshot"
        assert [item.seq, *await stream.seqs(5 - after_seq)] == list(range(after_seq + 1, 7))
    await stream.close()


@pytest.mark.parametrize(
    ("pruned_up_to", "after_seq"),
    [
        pytest.param(3, 1, id="the-next-events-pruned"),
        pytest.param(5, 2, id="every-event-pruned"),
    ],
)
async def test_i9_a_cursor_whose_next_events_history_retention_pruned_gets_a_resync_snapshot_not_a_gap(
    pruned_up_to: int, after_seq: int
) -> None:
    store, writer = await written(5)
    head = await store.load(KEY)
    store.data.trimmed[KEY] = pruned_up_to  # the log keeps what is after it (pruned as the ledger is)
    stream = Stream(hub_on(store), after_seq=after_seq)

    assert await stream.next() == Snapshot(head, T0, resync=True)
    await writer.call()
    assert await stream.seqs(1) == [6]
    await stream.close()


async def test_i9_a_cursor_at_or_after_what_history_retention_pruned_resumes_without_a_snapshot() -> None:
    store, writer = await written(5)
    store.data.trimmed[KEY] = 3
    stream = Stream(hub_on(store), after_seq=3)

    assert await stream.seqs(2) == [4, 5]
    await writer.call()
    assert await stream.seqs(1) == [6]
    await stream.close()


async def test_i9_a_replay_that_meets_a_hole_history_retention_left_resyncs_at_the_hole() -> None:
    store, writer = await written(5)
    row = store.data.rows[KEY]
    # Seq 3 pruned, its neighbours kept (they name a turn still running).
    store.data.rows[KEY] = replace(row, events=tuple(e for e in row.events if e.seq != 3))
    stream = Stream(hub_on(store), after_seq=1)

    assert await stream.seqs(1) == [2]
    assert await stream.next() == Snapshot(await store.load(KEY), T0, resync=True)
    await writer.call()
    assert await stream.seqs(1) == [6]
    await stream.close()


async def test_close_ends_every_stream_with_its_cursor_and_refuses_new_ones() -> None:
    feed = FakeFeed()
    store, writer = await written(2, ReadsLogged())
    hub = hub_on(store, feed=feed)
    live, replaying, other = Stream(hub), Stream(hub, after_seq=1), Stream(hub, OTHER)
    await live.snapshot()
    waiting = await store.waiting_live(live)
    assert await replaying.seqs(1) == [2]
    await other.snapshot()
    assert hub.watchers == 3

    hub.close()

    with pytest.raises(WatchClosed) as live_closed:
        await waiting
    assert live_closed.value.cursor == 2
    with pytest.raises(WatchClosed) as replaying_closed:
        await replaying.next()
    assert replaying_closed.value.cursor == 2
    with pytest.raises(WatchClosed) as other_closed:
        await other.next()
    assert other_closed.value.cursor == 0
    assert "after_seq=2" in str(live_closed.value)
    with pytest.raises(WatchClosed) as refused:
        await Stream(hub, after_seq=7).next()
    assert refused.value.cursor == 7
    assert hub.watchers == 0
    assert [key for call, key, _ in feed.calls if call == "untrack"] == [KEY, OTHER]
    await writer.call()  # a commit after close reaches no one and fails nothing


async def test_events_committed_before_close_are_delivered_before_watch_closed() -> None:
    store, writer = await written(1, ReadsLogged())
    hub = hub_on(store)
    stream = Stream(hub)
    await stream.snapshot()
    waiting = await store.waiting_live(stream)
    await writer.calls(2)
    hub.close()

    assert isinstance(item := await waiting, Event)
    assert item.seq == 2
    assert await stream.seqs(1) == [3]
    with pytest.raises(WatchClosed) as closed:
        await stream.next()
    assert closed.value.cursor == 3


async def test_the_feed_tracks_each_watched_session_from_its_head_and_untracks_it_with_its_last_watcher() -> (
    None
):
    feed = FakeFeed()
    store, _ = await written(3)
    hub = hub_on(store, feed=feed)
    first, second, other = Stream(hub), Stream(hub, after_seq=2), Stream(hub, OTHER)
    await first.snapshot()
    assert await second.seqs(1) == [3]
    await other.snapshot()
    assert hub.watchers == 3

    await first.close()
    assert hub.watchers == 2
    await second.close()
    assert hub.watchers == 1
    await other.close()

    assert feed.calls == [
        ("track", KEY, 3),
        ("track", KEY, 3),
        ("track", OTHER, 0),
        ("untrack", KEY, None),
        ("untrack", OTHER, None),
    ]
    assert hub.watchers == 0


async def test_unchanged_decisions_publish_nothing_and_other_sessions_are_not_delivered() -> None:
    store, writer = await written(1)
    _, other_writer = await written(1, store, OTHER)
    hub = hub_on(store)
    stream = Stream(hub)
    await stream.snapshot()

    await store.apply(KEY, admit("t1"))  # a replayed admission changes nothing
    await other_writer.calls(2)
    await writer.call()

    assert await stream.seqs(1) == [2]
    await stream.close()


# --- a session the store lost and started again (a new epoch) ---------------------------------


async def lost_and_written_again(store: MemoryStore, n: int) -> Writer:
    """The store loses the session (as a Redis without persistence would), which is written again
    later: `n` events of a new epoch, from seq 1."""
    del store.data.rows[KEY]
    store.clock.advance(SECOND)
    _, writer = await written(n, store)
    return writer


@pytest.mark.parametrize("after_seq", [3, 5], ids=["behind-the-new-head", "at-the-new-head"])
async def test_a_cursor_of_a_lost_epoch_gets_a_resync_snapshot_though_the_new_log_reaches_it(
    after_seq: int,
) -> None:
    store, _ = await written(5)
    lost = (await store.load(KEY)).epoch
    writer = await lost_and_written_again(store, 6)
    now = await store.load(KEY)
    assert now.epoch > lost

    stream = Stream(hub_on(store), after_seq=after_seq, epoch=lost)

    assert await stream.snapshot() == Snapshot(now, store.clock.now, resync=True)
    await writer.call()
    assert await stream.seqs(1) == [7]
    await stream.close()


async def test_a_cursor_of_the_current_epoch_or_of_none_resumes() -> None:
    """NO_EPOCH: a client of 0.1.0, which does not send the epoch, resumes as it always did."""
    store, _ = await written(2)
    await lost_and_written_again(store, 4)
    epoch = (await store.load(KEY)).epoch

    for named in (epoch, NO_EPOCH):
        stream = Stream(hub_on(store), after_seq=2, epoch=named)
        assert await stream.seqs(2) == [3, 4]
        await stream.close()


async def test_a_live_stream_whose_session_starts_again_gets_a_resync_snapshot_then_the_new_log() -> None:
    store, writer = await written(3)
    stream = Stream(hub_on(store))
    assert (await stream.snapshot()).state.head == 3
    await writer.call()
    assert await stream.seqs(1) == [4]

    again = await lost_and_written_again(store, 2)  # seqs 1 and 2 of the new epoch, published here

    snapshot = await stream.snapshot()
    assert snapshot == Snapshot(await store.load(KEY), store.clock.now, resync=True)
    assert (snapshot.state.epoch, snapshot.state.head) == ((await store.load(KEY)).epoch, 2)
    await again.call()
    assert await stream.seqs(1) == [3], "the new log's events follow its snapshot, none before it"
    await stream.close()


async def test_a_late_event_of_a_log_the_stream_has_left_is_dropped() -> None:
    feed = FakeFeed()
    store, _ = await written(3, ReadsLogged())
    old = await store.events_after(KEY, 0, 10)
    stream = Stream(hub_on(store, feed=feed), after_seq=3, epoch=(await store.load(KEY)).epoch)
    again = await lost_and_written_again(store, 1)
    assert (await stream.snapshot()).resync
    pull = await store.waiting_live(stream)

    feed.read(KEY, old[-1:])  # the feed's read of the old log, handed over late
    await again.call()

    item = await pull
    assert isinstance(item, Event), "no second snapshot"
    assert item.seq == 2, "nothing of the old log"
    await stream.close()


async def test_a_stream_of_a_session_never_written_follows_its_first_log_without_a_resync() -> None:
    store = MemoryStore()
    stream = Stream(hub_on(store))
    assert await stream.snapshot() == Snapshot(Session(), T0, resync=False)

    await Writer(store).admit()

    assert await stream.seqs(1) == [1]
    await stream.close()
