"""The in-memory store, beyond the store contract it keeps with the real stores (tests/contract runs
it as a backend of `any_store`): a conflict through its replicas, writers interleaved at its seam,
what it tells observers, its fake clock, its deadline index and counts as exact values, and
StoreUnavailable while it is down or closed."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.support.memory_store import FakeClock, MemoryStore
from turngate.service.core import (
    Admitted,
    Command,
    Decision,
    Expire,
    SessionKey,
    SettledBy,
    TurnOutcome,
    TurnSettled,
)
from turngate.service.ports.store import Applied, Store, StoreUnavailable

from .helpers import LEASE_TTL, SECOND, T0, Lease, admit, cancel, complete, enqueue, tool_call

KEY = SessionKey("p1", "s1")


async def admitted(store: Store, key: SessionKey = KEY, turn_id: str = "t1", ttl: int = LEASE_TTL) -> Lease:
    reply = (await store.apply(key, admit(turn_id, lease_ttl=ttl))).reply
    assert isinstance(reply, Admitted), reply
    return Lease(turn_id, reply.generation)


async def test_cas_conflict_injected_through_before_write_is_retried_without_lost_update() -> None:
    store = MemoryStore()
    other_replica = store.replica()
    lease = await admitted(store)
    writes: list[Command] = []

    async def overtaken_once(_key: SessionKey, command: Command) -> None:
        writes.append(command)
        if len(writes) == 1:
            await other_replica.apply(KEY, tool_call(lease, "theirs"))

    store.before_write = overtaken_once
    decision = await store.apply(KEY, tool_call(lease, "ours"))

    assert len(writes) == 2, "decided, lost the race, decided again"
    assert [e.seq for e in decision.events] == [3]
    state = await store.load(KEY)
    assert state.active is not None
    assert list(state.active.tool_calls) == ["theirs", "ours"]
    assert [e.seq for e in await store.events_after(KEY, 0, 100)] == [1, 2, 3]
    assert store.data.version(KEY) == 3


async def test_i9_concurrent_writers_interleaved_at_the_seam_lose_no_update_and_leave_no_gap() -> None:
    store = MemoryStore()
    lease = await admitted(store)

    async def let_the_others_decide(_key: SessionKey, _command: Command) -> None:
        await asyncio.sleep(0)

    store.before_write = let_the_others_decide
    decisions = await asyncio.gather(*(store.apply(KEY, tool_call(lease, f"c{i}")) for i in range(20)))

    state = await store.load(KEY)
    assert state.active is not None
    assert set(state.active.tool_calls) == {f"c{i}" for i in range(20)}
    assert sorted(e.seq for d in decisions for e in d.events) == list(range(2, 22))
    assert [e.seq for e in await store.events_after(KEY, 0, 1000)] == list(range(1, 22))
    assert state.head == 21


async def test_unchanged_decisions_write_nothing_and_reach_observers_but_not_listeners() -> None:
    store = MemoryStore()
    committed: list[Decision] = []
    observed: list[Applied] = []
    store.add_listener(lambda _key, decision: committed.append(decision))
    store.add_observer(lambda _key, applied: observed.append(applied))
    first = await store.apply(KEY, admit("t1"))
    writes: list[Command] = []

    async def count(_key: SessionKey, command: Command) -> None:
        writes.append(command)

    store.before_write = count
    replay = await store.apply(KEY, admit("t1"))

    assert isinstance(replay.reply, Admitted)
    assert replay.reply.replayed
    assert (replay.changed, writes, committed) == (False, [], [first])
    assert [applied.decision for applied in observed] == [first, replay]
    assert [applied.now for applied in observed] == [T0, T0]
    assert store.data.version(KEY) == 1


async def test_i10_the_fake_clock_is_the_store_clock_and_decides_expiry() -> None:
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    assert await store.now() == T0
    assert store.replica().clock is clock
    lease = await admitted(store, ttl=10 * SECOND)
    expires = T0 + 10 * SECOND

    assert (await store.apply(KEY, Expire())).changed is False
    clock.now = expires + 1
    assert await store.now() == expires + 1
    swept = await store.apply(KEY, Expire())

    [settled] = [e.body for e in swept.events if isinstance(e.body, TurnSettled)]
    assert (settled.turn.generation, settled.turn.outcome, settled.turn.settled_by) == (
        lease.generation,
        TurnOutcome.LOST,
        SettledBy.WATCHDOG,
    )


async def test_deadline_index_due_next_deadline_active_and_count() -> None:
    store = MemoryStore()
    assert await store.next_deadline() is None
    assert await store.count_active() == 0
    for name, seconds in (("late", 30), ("early", 10), ("middle", 20)):
        await admitted(store, SessionKey("ops", name), ttl=seconds * SECOND)
    await admitted(store, SessionKey("other", "early"), ttl=5 * SECOND)
    await admitted(store, SessionKey("ops", "stopped"))
    await store.apply(SessionKey("ops", "stopped"), cancel("t1", force=True))
    early, middle, late = (T0 + s * SECOND for s in (10, 20, 30))

    assert await store.next_deadline() == T0 + 5 * SECOND
    assert await store.count_active() == 4
    assert await store.due(T0 + 5 * SECOND - 1, 10) == []
    assert await store.due(middle, 10) == [
        SessionKey("other", "early"),
        SessionKey("ops", "early"),
        SessionKey("ops", "middle"),
    ]
    assert await store.due(late, 1) == [SessionKey("other", "early")]
    first = await store.active("ops", None, 2)
    rest = await store.active("ops", (first[-1][1], first[-1][0].session_id), 2)
    assert [(key.session_id, deadline) for key, deadline in first + rest] == [
        ("early", early),
        ("middle", middle),
        ("late", late),
    ]
    assert await store.active("nobody", None, 10) == []


async def test_a_store_that_is_down_or_closed_raises_store_unavailable_and_keeps_its_data() -> None:
    store = MemoryStore()
    await admitted(store)
    before = dict(store.data.rows)
    calls: list[Callable[[], Awaitable[Any]]] = [
        lambda: store.apply(KEY, admit("t2")),
        lambda: store.load(KEY),
        lambda: store.events_after(KEY, 0, 10),
        store.now,
        store.ping,
        store.next_deadline,
        lambda: store.due(0, 10),
        lambda: store.active("p1", None, 10),
        lambda: store.count_active_in_project("p1", 10),
        store.count_active,
    ]
    store.data.down = True
    for call in calls:
        with pytest.raises(StoreUnavailable):
            await call()
    assert store.data.rows == before

    store.data.down = False
    await store.ping()
    await store.close()
    for call in calls:
        with pytest.raises(StoreUnavailable):
            await call()


async def test_a_cancelled_callers_attempt_that_then_fails_is_consumed_never_left_never_retrieved(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A caller cancelled (its deadline passed) while its write waits; the write then fails: its
    exception is logged at DEBUG, and asyncio never reports "Task exception was never retrieved"."""
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    handler = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        store = MemoryStore()
        decided, release = asyncio.Event(), asyncio.Event()

        async def hold(_key: SessionKey, _command: Command) -> None:
            decided.set()
            await release.wait()

        store.before_write = hold
        caller = asyncio.create_task(store.apply(KEY, admit("t1")))
        await decided.wait()
        # Named by its coroutine: the session-wide loop may run other tests' background tasks too.
        [attempt] = [t for t in asyncio.all_tasks() if t.get_coro().__name__ == "_until_applied"]  # type: ignore[union-attr]
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        store.data.down = True  # the write the attempt goes on with fails
        with caplog.at_level(logging.DEBUG, logger="turngate.service.store.cas"):
            release.set()
            # Waited for without retrieving its outcome, as nobody else is left to.
            await asyncio.wait([attempt])
            del attempt
            gc.collect()
    finally:
        loop.set_exception_handler(handler)

    assert [context["message"] for context in reported] == []
    [consumed] = [r for r in caplog.records if r.name == "turngate.service.store.cas"]
    assert (consumed.levelno, "caller was cancelled" in consumed.getMessage()) == (logging.DEBUG, True)
    assert store.data.rows == {}


async def test_a_session_whose_queue_alone_waits_is_listed_but_not_counted_among_active_ones() -> None:
    store = MemoryStore()
    paused = SessionKey("ops", "paused")
    lease = await admitted(store, paused)
    await store.apply(paused, enqueue("t2"))
    await store.apply(paused, complete(lease, TurnOutcome.FAILED))  # idle, its queue paused
    await admitted(store, SessionKey("ops", "running"))

    assert [key.session_id for key, _ in await store.active("ops", None, 10)] == ["running", "paused"]
    assert await store.count_active() == 1
    assert await store.count_active_in_project("ops", 10) == 1
    assert await store.count_active_in_project("ops", 0) == 0
