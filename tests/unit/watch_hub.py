"""The watch hub's unit tests' harness (watch.py over the in-memory store): a feed the test
delivers for, streams pulled one item at a time, a store that tells when a stream has read the
log, and turn t1's runner writing one event per call."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import TypeVar, overload

from tests.support.memory_store import MemoryStore
from turngate.service.core import NO_EPOCH, Admitted, Event, SessionKey
from turngate.service.ports.store import Store
from turngate.service.watch import Snapshot, WatchHub

from .helpers import Lease, admit, tool_call

KEY = SessionKey("p1", "s1")
OTHER = SessionKey("p1", "s2")
# How long a pull may wait for what the test has already written: reached only when a test fails.
PULL_TIMEOUT_S = 2.0

Item = Snapshot | Event
_CALL_IDS = itertools.count(1)
NOT_ADMITTED = Lease("t1", 0)
Deliver = Callable[[SessionKey, Sequence[Event]], None]


class FakeFeed:
    """A `Feed` (watch.py) that reads nothing by itself: the test delivers what it "read"."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, SessionKey, int | None]] = []
        self.tracking = asyncio.Event()  # set once a stream has asked to follow a session
        self._deliver: Deliver | None = None

    def deliver_to(self, deliver: Deliver) -> None:
        self._deliver = deliver

    def track(self, key: SessionKey, after_seq: int, epoch: int = NO_EPOCH) -> None:
        self.calls.append(("track", key, after_seq))
        self.tracking.set()

    def untrack(self, key: SessionKey) -> None:
        self.calls.append(("untrack", key, None))

    def read(self, key: SessionKey, events: Sequence[Event]) -> None:
        """Hands the hub events as if read from the store's log of another replica's writes."""
        assert self._deliver is not None, "the hub registers where the feed delivers"
        self._deliver(key, events)


class Stream:
    """One watcher's stream (`WatchHub.follow`), pulled one item at a time."""

    def __init__(
        self, hub: WatchHub, key: SessionKey = KEY, after_seq: int = 0, epoch: int = NO_EPOCH
    ) -> None:
        self.items: AsyncGenerator[Item, None] = hub.follow(key, after_seq, epoch)

    async def next(self) -> Item:
        async with asyncio.timeout(PULL_TIMEOUT_S):
            return await anext(self.items)

    async def event(self) -> Event:
        item = await self.next()
        assert isinstance(item, Event), item
        return item

    async def snapshot(self) -> Snapshot:
        item = await self.next()
        assert isinstance(item, Snapshot), item
        return item

    async def seqs(self, n: int) -> list[int]:
        """The seqs of the next `n` items, all events."""
        return [(await self.event()).seq for _ in range(n)]

    async def close(self) -> None:
        """The client goes away (the gRPC handler closes the generator)."""
        await self.items.aclose()


class ReadsLogged(MemoryStore):
    """A memory store that tells when a stream has read the log: a stream whose replay found
    nothing then waits for live events (nothing in between suspends)."""

    def __init__(self) -> None:
        super().__init__()
        self.log_read = asyncio.Event()

    async def events_after(self, key: SessionKey, after_seq: int, limit: int) -> list[Event]:
        events = await super().events_after(key, after_seq, limit)
        self.log_read.set()
        return events

    async def waiting_live(self, stream: Stream) -> asyncio.Task[Item]:
        """The stream's next pull, once it waits for live events (its replay must be empty)."""
        self.log_read.clear()
        pull = asyncio.create_task(stream.next())
        await self.log_read.wait()
        assert not pull.done(), "the replay found something: the stream is not waiting live"
        return pull


class Writer:
    """Turn t1's runner, writing through `store`: each call opens a new tool call, one event."""

    def __init__(self, store: Store, key: SessionKey = KEY, lease: Lease = NOT_ADMITTED) -> None:
        self.store, self.key, self.lease = store, key, lease

    async def admit(self) -> Event:
        decision = await self.store.apply(self.key, admit("t1"))
        assert isinstance(decision.reply, Admitted), decision.reply
        self.lease = Lease("t1", decision.reply.generation)
        [event] = decision.events
        return event

    async def call(self) -> Event:
        [event] = (await self.store.apply(self.key, tool_call(self.lease, f"c{next(_CALL_IDS)}"))).events
        return event

    async def calls(self, n: int) -> list[Event]:
        return [await self.call() for _ in range(n)]


_Store = TypeVar("_Store", bound=MemoryStore)


@overload
async def written(n: int) -> tuple[MemoryStore, Writer]: ...
@overload
async def written(n: int, store: _Store, key: SessionKey = KEY) -> tuple[_Store, Writer]: ...
async def written(
    n: int, store: MemoryStore | None = None, key: SessionKey = KEY
) -> tuple[MemoryStore, Writer]:
    """A memory store (or `store`) whose session `key` has `n` events: an admission, then calls."""
    memory = MemoryStore() if store is None else store
    writer = Writer(memory, key)
    await writer.admit()
    await writer.calls(n - 1)
    return memory, writer


def hub_on(
    store: Store, *, buffer: int = 64, retention: int = 1_000, feed: FakeFeed | None = None
) -> WatchHub:
    return WatchHub(store, buffer=buffer, retention=retention, feed=feed)
