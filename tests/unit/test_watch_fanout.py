"""WatchHub (watch.py) fanning out to many streams of one session: a stream that never takes
what it is offered fills only its own buffer (delivery never waits for a stream), and an event
offered once per session is offered once to a stream that joined after it.

As in test_watch_hub.py (the harness of both is watch_hub.py), streams are pulled one item at a
time, and every interleaving is forced by what the test writes between pulls, never by timing.
"""

from __future__ import annotations

import pytest

from turngate.service.core import Event
from turngate.service.watch import WatchOverflow

from .watch_hub import KEY, FakeFeed, ReadsLogged, Stream, hub_on, written

STREAMS = 100


async def test_i9_a_stream_that_never_takes_slows_none_of_a_hundred_others() -> None:
    buffer, events = 8, 20
    store, writer = await written(1)
    hub = hub_on(store, buffer=buffer)
    slow, *steady = [Stream(hub) for _ in range(STREAMS)]
    for stream in (slow, *steady):
        await stream.snapshot()
    await writer.call()
    for stream in (slow, *steady):  # every stream past its replay, following live events
        assert await stream.seqs(1) == [2]

    for seq in range(3, 3 + events):  # more than the slow stream's buffer holds
        # The write returns while the slow stream takes nothing: delivery only appends and wakes.
        await writer.call()
        for stream in steady:
            assert await stream.seqs(1) == [seq]

    with pytest.raises(WatchOverflow) as overflow:
        await slow.next()
    assert overflow.value.cursor == 2, "it resumes after the last event it was given"
    assert hub.watchers == STREAMS - 1
    await writer.call()
    for stream in steady:
        assert await stream.seqs(1) == [3 + events]
        await stream.close()
    assert hub.watchers == 0


async def test_i9_an_event_offered_before_a_stream_joined_and_read_again_by_the_feed_reaches_it_once() -> (
    None
):
    feed = FakeFeed()
    store, writer = await written(1, ReadsLogged())
    hub = hub_on(store, feed=feed)
    early = Stream(hub)
    await early.snapshot()

    second = await writer.call()  # offered to the early stream
    late = Stream(hub)
    assert (await late.snapshot()).state.head == 2, "the late stream's snapshot has it"
    pull = await store.waiting_live(late)
    feed.read(KEY, [second])  # the feed reads it back from the log: offered to no one again
    await writer.call()

    third = await pull
    assert isinstance(third, Event)
    assert third.seq == 3
    assert await early.seqs(2) == [2, 3]
    await writer.call()
    assert await late.seqs(1) == await early.seqs(1) == [4]
    await early.close()
    await late.close()
