"""The watch hub: per-session subscriptions fed by the store's commits, and the stream algorithm.

A watcher subscribes first, then replays from the store's event log, then follows live events,
de-duplicated by seq. Events may be published out of commit order (each writer publishes after
its own commit), so a gap in the live feed is filled from the log: the stream is gapless (I9).
A watcher whose buffer fills is cut off (WatchOverflow) instead of slowing writers or others:
delivering only appends to each stream's buffer and wakes it, and never waits.

A stream follows one epoch of the session's log. A cursor of another epoch gets a resync
snapshot instead of a replay; so does a stream that meets an event of another epoch while the
session's document says its epoch changed (the store lost the session and started it again):
the new log's events never follow the old one's as if they were its next. So does a stream whose
log lacks events it should send next (history retention pruned them): never a silent gap.

Events reach the hub from this process's commits (the store's listener) and, when the store is
shared by several replicas, from a `Feed` that follows the logs of the sessions watched here.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass

from turngate.service.core import NO_EPOCH, Decision, Event, Session, SessionKey
from turngate.service.ports.feed import Feed
from turngate.service.ports.store import Store

_REPLAY_PAGE = 500


class WatchOverflow(Exception):
    """The watcher fell `buffer` events behind; it resumes with its cursor."""

    def __init__(self, cursor: int, buffer: int) -> None:
        super().__init__(f"watcher fell more than {buffer} events behind; resume with after_seq={cursor}")
        self.cursor = cursor


class WatchClosed(Exception):
    """The hub is shutting down; the watcher resumes elsewhere with its cursor."""

    def __init__(self, cursor: int) -> None:
        super().__init__(f"server is shutting down; resume with after_seq={cursor}")
        self.cursor = cursor


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The session's state as of its head (the first item of a fresh or resynced stream)."""

    state: Session
    time: int
    resync: bool


class _Watched:
    """One session's streams in this process, and the last event offered to them (by epoch and
    seq): the same event may arrive from this process's commit and from the feed, and is offered
    once, to every stream at once. An event of another epoch is always offered (its log starts
    again at seq 1). A later stream misses nothing by joining after the mark: what was offered
    before it subscribed is in the log it replays."""

    __slots__ = ("epoch", "offered", "subscriptions")

    def __init__(self) -> None:
        self.subscriptions: set[_Subscription] = set()
        self.epoch = NO_EPOCH
        self.offered = 0

    def fresh(self, events: Sequence[Event]) -> list[Event]:
        fresh = []
        for event in events:
            if event.epoch != self.epoch:
                self.epoch, self.offered = event.epoch, 0
            if event.seq > self.offered:
                self.offered = event.seq
                fresh.append(event)
        return fresh


class _Subscription:
    """One stream's buffer of events offered and not yet taken, and the stream's wait for more.
    Light on purpose (a list, and a future only while the stream waits): there is one per open
    stream, and most streams wait."""

    __slots__ = ("_capacity", "_events", "_waiter", "closed", "overflowed")

    def __init__(self, capacity: int) -> None:
        self._events: list[Event] = []
        self._capacity = capacity
        self._waiter: asyncio.Future[None] | None = None
        self.overflowed = False
        self.closed = False

    def offer(self, fresh: Sequence[Event]) -> None:
        if self.overflowed:
            return
        if len(self._events) + len(fresh) > self._capacity:
            self.overflowed = True
            self._events = []
        else:
            self._events.extend(fresh)
        self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def take(self) -> list[Event]:
        """The events queued so far, waiting for at least one; [] once cut off or closed."""
        while not self._events:
            if self.closed or self.overflowed:
                return []
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        taken, self._events = self._events, []
        return taken


class _LogStartedAgain(Exception):
    """An event of another epoch than the stream's: the session's log may have started again."""


class _Gap(Exception):
    """The log lacks events the stream should send next (history retention pruned them)."""


class WatchHub:
    """Fans committed events out to this process's watchers, per session."""

    def __init__(self, store: Store, *, buffer: int, retention: int, feed: Feed | None = None) -> None:
        self._store = store
        self._buffer = buffer
        self._retention = retention
        self._feed = feed
        self._watched: dict[SessionKey, _Watched] = {}
        self._watchers = 0
        self._closed = False
        store.add_listener(self.publish)
        if feed is not None:
            feed.deliver_to(self.deliver)

    @property
    def watchers(self) -> int:
        """Streams open now (an int kept up to date, which any thread may read)."""
        return self._watchers

    def publish(self, key: SessionKey, decision: Decision) -> None:
        self.deliver(key, decision.events)

    def deliver(self, key: SessionKey, events: Sequence[Event]) -> None:
        watched = self._watched.get(key)
        if watched is None or not events:
            return
        fresh = watched.fresh(events)
        if fresh:
            for subscription in watched.subscriptions:
                subscription.offer(fresh)

    def close(self) -> None:
        """Ends every stream (WatchClosed) and refuses new ones."""
        self._closed = True
        for watched in self._watched.values():
            for subscription in watched.subscriptions:
                subscription.close()

    async def follow(
        self, key: SessionKey, after_seq: int, epoch: int = NO_EPOCH
    ) -> AsyncGenerator[Snapshot | Event, None]:
        """The session's stream after `after_seq` (0: from a snapshot of the head) of the log of
        `epoch` (NO_EPOCH: the cursor is taken to be of the session's current log): the log
        replayed from the cursor, then live events; a snapshot (resync) when the log started again."""
        subscription = _Subscription(self._buffer)
        if self._closed:
            raise WatchClosed(after_seq)
        watched = self._watched.get(key)
        if watched is None:
            self._watched[key] = watched = _Watched()
        watched.subscriptions.add(subscription)
        self._watchers += 1
        try:
            state = await self._store.load(key)
            if self._feed is not None:
                self._feed.track(key, state.head, state.epoch)
            at = _Cursor(after_seq, state.epoch)
            if after_seq == 0 or not self._resumable(state, after_seq, epoch):
                yield Snapshot(state, await self._store.now(), resync=after_seq != 0)
                at.seq = state.head
            # The replay must reach the head the document had: events up to it were committed.
            head = state.head
            del state  # a waiting stream keeps no document (memory per open stream)
            while True:
                try:
                    async for event in self._replayed(key, at):
                        yield event
                    if at.seq < head:
                        raise _Gap
                    async for event in self._live(key, subscription, at):
                        yield event
                except _LogStartedAgain:
                    state = await self._store.load(key)
                    # Otherwise the event was a late one of a log this stream has already left.
                    if state.epoch != at.epoch:
                        yield await self._resynced(state, at)
                    head = at.seq
                    del state
                except _Gap:
                    state = await self._store.load(key)
                    yield await self._resynced(state, at)
                    head = at.seq
                    del state
        finally:
            self._watchers -= 1
            watched.subscriptions.discard(subscription)
            if not watched.subscriptions and self._watched.get(key) is watched:
                del self._watched[key]
                if self._feed is not None:
                    self._feed.untrack(key)

    async def _resynced(self, state: Session, at: _Cursor) -> Snapshot:
        """A resync snapshot of `state`, the stream's cursor moved to its head."""
        at.seq, at.epoch = state.head, state.epoch
        return Snapshot(state, await self._store.now(), resync=True)

    async def _replayed(self, key: SessionKey, at: _Cursor) -> AsyncGenerator[Event, None]:
        """The log after `at`, a page at a time, moving `at` along."""
        while True:
            page = await self._store.events_after(key, at.seq, _REPLAY_PAGE)
            for event in page:
                yield at.passing(event)
            if len(page) < _REPLAY_PAGE:
                return

    async def _live(
        self, key: SessionKey, subscription: _Subscription, at: _Cursor
    ) -> AsyncGenerator[Event, None]:
        """The events offered to `subscription` after `at`, moving `at` along; a gap (events
        published out of commit order) is filled from the log. Ends the stream with WatchOverflow
        or WatchClosed."""
        while True:
            live = await subscription.take()
            if not live:
                if subscription.overflowed:
                    raise WatchOverflow(at.seq, self._buffer)
                raise WatchClosed(at.seq)
            for event in live:
                at.epoch = _in_log(at.epoch, event)
                if event.seq <= at.seq:
                    continue
                if event.seq > at.seq + 1:
                    for missed in await self._store.events_after(key, at.seq, event.seq - at.seq - 1):
                        yield at.passing(missed)
                yield at.passing(event)

    def _resumable(self, state: Session, after_seq: int, epoch: int) -> bool:
        """Whether a stream can replay after `after_seq`: a cursor of the session's log (or of a
        log not named), within what it retains."""
        of_this_log = epoch in (NO_EPOCH, state.epoch)
        return of_this_log and state.head - self._retention <= after_seq <= state.head


@dataclass(slots=True)
class _Cursor:
    """Where a stream is: the seq of the last event it sent, in the log of `epoch`."""

    seq: int
    epoch: int

    def passing(self, event: Event) -> Event:
        """`event`, as the stream's next: it moves the cursor (_LogStartedAgain if of another log,
        _Gap if the log lacks the events before it)."""
        self.epoch = _in_log(self.epoch, event)
        if event.seq != self.seq + 1:
            raise _Gap
        self.seq = event.seq
        return event


def _in_log(following: int, event: Event) -> int:
    """The epoch a stream follows once `event` is in it; _LogStartedAgain for an event of another
    log than the one it follows (a stream of a session never written follows the first it meets)."""
    if following not in (NO_EPOCH, event.epoch):
        raise _LogStartedAgain
    return event.epoch
