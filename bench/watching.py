"""Push latency through WatchSession: Stop accepted → runner notified, and fan-out to many watchers.

Each stream is read by a task of its own that stamps every event with `time.perf_counter()` the
moment the stream yields it, so a latency is "call sent → event in the watcher's hands".
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections import defaultdict
from collections.abc import AsyncIterable, Awaitable, Callable, Mapping, Sequence

from turngate.v1 import turngate_pb2 as pb

from measure import CpuMeter, Latency, cpu_now, cpu_used
from rpcs import Stubs, admit_lease, cancel, complete, open_tool_call, session

OnEvent = Callable[[float, pb.SessionEvent], None]
# How long any awaited event may take: reached only when something is broken.
EVENT_TIMEOUT_S = 20.0


def kind(event: pb.SessionEvent) -> str:
    return event.WhichOneof("kind") or ""


class Watcher:
    """One stream of WatchSessionResponse (turngate's WatchSession, over gRPC or over HTTP, or the
    fan-out floor's `Watch`) handing each event and its arrival to `on_event`."""

    def __init__(self, responses: AsyncIterable[pb.WatchSessionResponse], on_event: OnEvent) -> None:
        self._task = asyncio.create_task(self._read(responses, on_event))

    @classmethod
    def of_session(cls, stubs: Stubs, ref: pb.SessionRef, on_event: OnEvent) -> Watcher:
        """A WatchSession stream from a snapshot."""
        return cls(stubs.sessions.WatchSession(pb.WatchSessionRequest(session=ref)), on_event)

    @staticmethod
    async def _read(responses: AsyncIterable[pb.WatchSessionResponse], on_event: OnEvent) -> None:
        async for response in responses:
            on_event(time.perf_counter(), response.event)

    async def close(self) -> None:
        """Cancelling the read ends the stream: grpc.aio cancels its call, an HTTP client drops
        its response."""
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def close_all(watchers: Sequence[Watcher]) -> None:
    await asyncio.gather(*(watcher.close() for watcher in watchers))


class Inbox:
    """One watcher's events in arrival order, for a single reader waiting for kinds of event."""

    def __init__(self) -> None:
        self._events: asyncio.Queue[tuple[float, pb.SessionEvent]] = asyncio.Queue()

    def put(self, arrived: float, event: pb.SessionEvent) -> None:
        self._events.put_nowait((arrived, event))

    async def next(self, wanted: str) -> float:
        """When the next event of kind `wanted` arrived (earlier events of other kinds are dropped)."""
        arrived, _ = await self.next_event(wanted)
        return arrived

    async def next_event(
        self, wanted: str, where: Callable[[pb.SessionEvent], bool] = lambda _: True
    ) -> tuple[float, pb.SessionEvent]:
        """The next event of kind `wanted` that `where` accepts, and when it arrived (earlier
        events are dropped)."""
        async with asyncio.timeout(EVENT_TIMEOUT_S):
            while True:
                arrived, event = await self._events.get()
                if kind(event) == wanted and where(event):
                    return arrived, event


async def _one_stop(runner: Stubs, gateway: Stubs, ref: pb.SessionRef, inbox: Inbox, turn_id: str) -> float:
    """Admits a turn, waits until its watcher saw it, stops it: seconds from sending the Stop
    until the watcher holds stop_requested. The runner then settles the turn."""
    lease = await admit_lease(runner, ref, turn_id)
    await inbox.next("turn_admitted")
    sent = time.perf_counter()
    stop = asyncio.create_task(cancel(gateway, lease))
    notified = await inbox.next("stop_requested")
    await stop
    await complete(runner, lease)
    await inbox.next("turn_settled")
    return notified - sent


async def stop_to_notified(
    runner: Stubs, gateway: Stubs, watched_on: Stubs, *, name: str, sessions: int, stops: int, warmup: int
) -> Latency:
    """Stops one at a time, round-robin over `sessions` sessions, each watched (as the SDK will)
    through `watched_on` while the Stop goes through `gateway`."""
    refs = [session(f"{name}-{i}") for i in range(sessions)]
    inboxes = [Inbox() for _ in refs]
    watchers = [
        Watcher.of_session(watched_on, ref, inbox.put) for ref, inbox in zip(refs, inboxes, strict=True)
    ]
    try:
        for inbox in inboxes:
            await inbox.next("snapshot")
        rounds = zip(range(warmup + stops), itertools.cycle(zip(refs, inboxes, strict=True)), strict=False)
        samples = [await _one_stop(runner, gateway, ref, inbox, f"turn-{i}") for i, (ref, inbox) in rounds]
    finally:
        await close_all(watchers)
    return Latency(samples[warmup:])


class Tally:
    """Arrivals of each event across `expected` watchers of one session, by name: a tool call's
    id, or "" for the snapshot every stream starts with; and the first of each event to arrive."""

    def __init__(self, expected: int) -> None:
        self._expected = expected
        self.arrivals: defaultdict[str, list[float]] = defaultdict(list)
        self.first: dict[str, pb.SessionEvent] = {}
        self._all_in: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)

    def on_event(self, arrived: float, event: pb.SessionEvent) -> None:
        match kind(event):
            case "snapshot":
                self._arrive("", arrived, event)
            case "tool_call":
                self._arrive(event.tool_call.tool_call.call_id, arrived, event)

    def _arrive(self, name: str, arrived: float, event: pb.SessionEvent) -> None:
        arrivals = self.arrivals[name]
        arrivals.append(arrived)
        if len(arrivals) == 1:
            self.first[name] = event
        if len(arrivals) == self._expected:
            self._all_in[name].set()

    async def everyone_has(self, name: str) -> None:
        """Waits until every watcher has event `name`."""
        async with asyncio.timeout(EVENT_TIMEOUT_S):
            await self._all_in[name].wait()


# Makes the event named (a tool call id) reach every stream: a turngate write, or a floor publish.
Trigger = Callable[[str], Awaitable[object]]


class FanOut:
    """Streams that all receive every event a trigger makes: one sample per stream per event,
    from the trigger sent to that stream's receipt."""

    def __init__(
        self, count: int, open_streams: Callable[[OnEvent], Sequence[Watcher]], trigger: Trigger
    ) -> None:
        self.tally = Tally(count)
        self._streams = open_streams(self.tally.on_event)
        assert len(self._streams) == count, f"{len(self._streams)} streams opened, not {count}"
        self._trigger = trigger

    async def ready(self) -> None:
        """Waits until every stream has its first message (the snapshot)."""
        await self.tally.everyone_has("")

    async def deliver(self, name: str) -> list[float]:
        sent = time.perf_counter()
        await self._trigger(name)
        await self.tally.everyone_has(name)
        return [arrived - sent for arrived in self.tally.arrivals[name]]

    async def close(self) -> None:
        await close_all(self._streams)


async def turngate_fan_out(
    writer: Stubs, channels: Sequence[Stubs], *, watchers: int, name: str = "fan-out"
) -> FanOut:
    """`watchers` WatchSession streams on one session with a turn admitted, spread over
    `channels`; an event is a tool call opened through `writer`."""
    ref = session(name)
    lease = await admit_lease(writer, ref, "turn-1")

    def streams(on_event: OnEvent) -> list[Watcher]:
        return [
            Watcher.of_session(stubs, ref, on_event)
            for _, stubs in zip(range(watchers), itertools.cycle(channels))
        ]

    async def trigger(call_id: str) -> None:
        await open_tool_call(writer, lease, call_id)

    return FanOut(watchers, streams, trigger)


async def fan_out(
    writer: Stubs,
    channels: Sequence[Stubs],
    meters: Mapping[str, CpuMeter],
    *,
    watchers: int,
    events: int,
    warmup: int,
) -> Latency:
    """`watchers` streams on one session, spread over `channels`; then events written one at a
    time (a tool call opened), each once every watcher has the previous one. One sample per
    watcher per event: write sent → that watcher has it; CPU metered over the timed events."""
    fan = await turngate_fan_out(writer, channels, watchers=watchers)
    try:
        await fan.ready()
        for i in range(warmup):
            await fan.deliver(f"warmup-{i}")
        before = await cpu_now(meters)
        samples = [sample for i in range(events) for sample in await fan.deliver(f"call-{i}")]
        return Latency(samples, cpu_used(before, await cpu_now(meters)))
    finally:
        await fan.close()
