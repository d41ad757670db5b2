"""LiveHistory (history.py): GetTurn and ListTurns answered from the ledger, with the events it has
not recorded yet replayed onto it (ledger/replay.py), and from the session's log alone while the
ledger is down. A read never shows less than an acknowledged write.

The document and the log come from the in-memory store, which says which events the ledger may
lack (those after its mark, as the Redis store does); the ledger is a fake `TurnHistory` holding
what a projector has recorded so far: the test projects up to a seq, as the projector would.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.support.memory_store import MemoryStore
from turngate.service.core import (
    AcknowledgeSteer,
    Admitted,
    Event,
    Expire,
    InteractionStatus,
    SessionKey,
    SettledBy,
    SteerStatus,
    SteerTurn,
    ToolCallStatus,
    TurnOutcome,
    TurnPhase,
)
from turngate.service.history import LiveHistory
from turngate.service.ledger.replay import replay
from turngate.service.ports.history import TurnView
from turngate.service.ports.store import StoreUnavailable

from .helpers import (
    SECOND,
    Lease,
    admit,
    cancel,
    complete,
    enqueue,
    heartbeat,
    interaction,
    resolve,
    tool_call,
)

KEY = SessionKey("p1", "s1")


class FakeLedger:
    """A `TurnHistory` over rows the test records; `down` fails every read as a database would."""

    def __init__(self) -> None:
        self.rows: dict[SessionKey, list[TurnView]] = {}
        self.down = False
        self.pages: list[tuple[int | None, int]] = []

    async def get_turn(self, key: SessionKey, turn_id: str) -> TurnView | None:
        self._reach()
        found = [view for view in self.rows.get(key, []) if view.turn_id == turn_id]
        return max(found, key=lambda view: view.generation, default=None)

    async def list_turns(self, key: SessionKey, before_generation: int | None, limit: int) -> list[TurnView]:
        self._reach()
        self.pages.append((before_generation, limit))
        older = [
            replace(view, tool_calls=(), interactions=(), steers=())
            for view in self.rows.get(key, [])
            if before_generation is None or view.generation < before_generation
        ]
        return sorted(older, key=lambda view: view.generation, reverse=True)[:limit]

    def _reach(self) -> None:
        if self.down:
            raise StoreUnavailable("the ledger database is down")


class Session:
    """One session written through the memory store, turn after turn, and its lagging ledger."""

    def __init__(self) -> None:
        self.store = MemoryStore()
        self.ledger = FakeLedger()
        self.history = LiveHistory(self.ledger, self.store)

    async def admit(self, turn_id: str) -> Lease:
        self.store.clock.advance(SECOND)
        reply = (await self.store.apply(KEY, admit(turn_id))).reply
        assert isinstance(reply, Admitted), reply
        return Lease(turn_id, reply.generation)

    async def project(self, up_to: int | None = None) -> None:
        """The projector records the events up to seq `up_to` (all by default) and raises the mark."""
        events = await self.store.events_after(KEY, 0, 100_000)
        up_to = events[-1].seq if up_to is None else up_to
        self.ledger.rows[KEY] = list(replay(KEY, (), [e for e in events if e.seq <= up_to]).values())
        self.store.data.recorded[KEY] = up_to

    def trim(self) -> None:
        """The log forgets what the ledger recorded (as the Redis store does past its retention)."""
        self.store.data.trimmed[KEY] = self.store.data.recorded.get(KEY, 0)

    async def eventful(self, turn_id: str) -> Lease:
        """Turn `turn_id` with everything a turn can hold, settled FAILED with an error: c1
        succeeded, c2 failed with an error, c3 left open (so interrupted), i1 resolved with a text,
        i2 left pending (so cancelled)."""
        lease = await self.admit(turn_id)
        for call_id in ("c1", "c2", "c3"):
            await self.store.apply(KEY, tool_call(lease, call_id))
        await self.store.apply(KEY, tool_call(lease, "c1", ToolCallStatus.SUCCEEDED))
        await self.store.apply(KEY, tool_call(lease, "c2", ToolCallStatus.FAILED, error="disk full"))
        await self.store.apply(KEY, interaction(lease, "i1"))
        await self.store.apply(KEY, resolve("i1", "approved"))
        await self.store.apply(KEY, interaction(lease, "i2"))
        await self.store.apply(KEY, complete(lease, TurnOutcome.FAILED, error="model crashed"))
        return lease

    async def settled(self, turn_id: str, *, recorded: bool) -> TurnView:
        """Turn `turn_id` with one tool call, completed (the call interrupted, I7), projected or
        not; returns it as the ledger holds it once projected."""
        lease = await self.admit(turn_id)
        await self.store.apply(KEY, tool_call(lease, "c1"))
        await self.store.apply(KEY, complete(lease))
        if recorded:
            await self.project()
        return _as_recorded(await self.store.events_after(KEY, 0, 100_000), lease.generation)


def _as_recorded(events: list[Event], generation: int) -> TurnView:
    """The turn as the ledger holds it once it has recorded `events`."""
    return replay(KEY, (), events)[generation]


def assert_eventful(view: TurnView | None) -> None:
    """What `Session.eventful` wrote, all of it: end states, error texts and resolutions."""
    assert view is not None
    assert (view.phase, view.outcome, view.settled_by, view.error) == (
        TurnPhase.SETTLED,
        TurnOutcome.FAILED,
        SettledBy.RUNNER,
        "model crashed",
    )
    assert [(c.call_id, c.status, c.error) for c in view.tool_calls] == [
        ("c1", ToolCallStatus.SUCCEEDED, ""),
        ("c2", ToolCallStatus.FAILED, "disk full"),
        ("c3", ToolCallStatus.INTERRUPTED, ""),
    ]
    assert [(i.interaction_id, i.status, i.resolution) for i in view.interactions] == [
        ("i1", InteractionStatus.RESOLVED, "approved"),
        ("i2", InteractionStatus.CANCELLED, ""),
    ]


async def test_a_settled_turn_the_ledger_has_not_recorded_keeps_its_calls_interactions_and_texts() -> None:
    s = Session()
    await s.eventful("t1")

    before = await s.history.get_turn(KEY, "t1")
    listed_before = await s.history.list_turns(KEY, None, 10)
    await s.project()
    after = await s.history.get_turn(KEY, "t1")

    assert_eventful(before)
    assert before == after, "the same before and after the ledger recorded it"
    assert after is not None
    assert listed_before == [replace(after, tool_calls=(), interactions=())]
    assert listed_before == await s.history.list_turns(KEY, None, 10)


async def test_a_turn_the_ledger_recorded_in_part_is_completed_by_the_events_after_its_mark() -> None:
    s = Session()
    lease = await s.admit("t1")
    await s.store.apply(KEY, tool_call(lease, "c1"))
    await s.store.apply(KEY, interaction(lease, "i1"))
    await s.project()  # the admission, c1 OPEN and i1 PENDING are recorded; what follows is not
    await s.store.apply(KEY, tool_call(lease, "c1", ToolCallStatus.FAILED, error="disk full"))
    await s.store.apply(KEY, resolve("i1", "approved"))
    await s.store.apply(KEY, tool_call(lease, "c2"))
    await s.store.apply(KEY, cancel("t1", force=True, reason="user left"))

    got = await s.history.get_turn(KEY, "t1")
    await s.project()

    assert got == await s.history.get_turn(KEY, "t1")
    assert got is not None
    assert (got.outcome, got.settled_by, got.stop_reason) == (
        TurnOutcome.CANCELLED,
        SettledBy.GATEWAY,
        "user left",
    )
    assert [(c.call_id, c.status, c.error) for c in got.tool_calls] == [
        ("c1", ToolCallStatus.FAILED, "disk full"),
        ("c2", ToolCallStatus.INTERRUPTED, ""),
    ]
    assert [(i.interaction_id, i.status, i.resolution) for i in got.interactions] == [
        ("i1", InteractionStatus.RESOLVED, "approved")
    ]


async def test_the_active_turn_has_the_documents_lease_and_every_text_its_events_carried() -> None:
    s = Session()
    lease = await s.admit("t1")
    await s.store.apply(KEY, tool_call(lease, "c1"))
    await s.store.apply(KEY, tool_call(lease, "c1", ToolCallStatus.FAILED, error="disk full"))
    await s.store.apply(KEY, tool_call(lease, "c2"))
    await s.store.apply(KEY, interaction(lease, "i1"))
    await s.project()
    await s.store.apply(KEY, resolve("i1", "approved"))
    await s.store.apply(KEY, interaction(lease, "i2"))
    recorded = await s.ledger.get_turn(KEY, "t1")
    # Then the document moves on without the ledger: a heartbeat (no event) and a Stop.
    s.store.clock.advance(5 * SECOND)
    await s.store.apply(KEY, heartbeat(lease))
    stopped = await s.store.apply(KEY, cancel("t1", reason="user pressed stop"))
    active = stopped.state.active
    assert active is not None
    assert active.stop is not None

    got = await s.history.get_turn(KEY, "t1")

    assert got is not None
    assert recorded is not None
    assert (got.phase, got.stop_requested, got.stop_reason) == (TurnPhase.STOPPING, True, "user pressed stop")
    assert (got.lease_expires_at, got.stop_deadline) == (active.lease_expires_at, active.stop.deadline)
    assert got.lease_expires_at > recorded.lease_expires_at, "the heartbeat's lease, which no event carries"
    assert [(c.call_id, c.status, c.error) for c in got.tool_calls] == [
        ("c1", ToolCallStatus.FAILED, "disk full"),
        ("c2", ToolCallStatus.OPEN, ""),
    ]
    assert [(i.interaction_id, i.status, i.resolution) for i in got.interactions] == [
        ("i1", InteractionStatus.RESOLVED, "approved"),
        ("i2", InteractionStatus.CANCELLED, ""),  # the Stop cancelled it (I5)
    ]
    [listed] = await s.history.list_turns(KEY, None, 10)
    # ListTurns answers without calls (api/sessions.py): the rest is the same merge.
    assert listed == replace(got, tool_calls=(), interactions=())


async def test_s2_get_turn_lists_the_steers_the_ledger_has_not_recorded_yet_and_list_turns_none() -> None:
    s = Session()
    lease = await s.admit("t1")
    await s.store.apply(KEY, SteerTurn("t1", "a", "go left"))
    await s.project()
    await s.store.apply(KEY, AcknowledgeSteer("t1", lease.generation, "a", SteerStatus.DECLINED))
    await s.store.apply(KEY, SteerTurn("t1", "b", "go right"))

    got = await s.history.get_turn(KEY, "t1")

    assert got is not None
    assert [(v.steer_id, v.status, v.content, v.ended_at is None) for v in got.steers] == [
        ("a", SteerStatus.DECLINED, "go left", False),
        ("b", SteerStatus.PENDING, "go right", True),
    ]
    [listed] = await s.history.list_turns(KEY, None, 10)
    assert listed == replace(got, steers=())


async def test_while_the_ledger_is_down_a_turn_the_log_keeps_whole_is_answered_whole() -> None:
    s = Session()
    recorded = await s.settled("t1", recorded=True)
    await s.eventful("t2")
    lease = await s.admit("t3")
    await s.store.apply(KEY, tool_call(lease, "c1", ToolCallStatus.FAILED, error="timeout"))
    s.ledger.down = True

    live = await s.history.get_turn(KEY, "t3")
    assert live is not None
    assert (live.turn_id, live.generation, live.phase) == ("t3", lease.generation, TurnPhase.RUNNING)
    assert [(c.call_id, c.error) for c in live.tool_calls] == [("c1", "timeout")]
    assert_eventful(await s.history.get_turn(KEY, "t2"))
    assert await s.history.get_turn(KEY, "t1") == recorded
    assert await s.history.get_turn(KEY, "never-admitted") is None, "the log is whole: it was never admitted"


async def test_while_the_ledger_is_down_a_turn_the_log_no_longer_keeps_whole_is_unavailable() -> None:
    s = Session()
    await s.settled("t1", recorded=True)
    lease = await s.admit("t2")
    await s.store.apply(KEY, tool_call(lease, "c1"))
    await s.project()  # t1 and the start of t2 are recorded, and then forgotten by the log
    s.trim()
    await s.store.apply(KEY, complete(lease))
    await s.eventful("t3")
    s.ledger.down = True

    assert_eventful(await s.history.get_turn(KEY, "t3"))
    for unknown_to_the_log in ("t1", "t2", "never-admitted"):
        with pytest.raises(StoreUnavailable):
            await s.history.get_turn(KEY, unknown_to_the_log)
    [listed] = await s.history.list_turns(KEY, None, 1)
    assert listed.turn_id == "t3"
    with pytest.raises(StoreUnavailable):
        await s.history.list_turns(KEY, None, 2)
    with pytest.raises(StoreUnavailable):
        await s.history.list_turns(KEY, listed.generation, 1)


async def test_while_the_ledger_is_down_a_whole_log_lists_every_turn_as_the_ledger_will() -> None:
    s = Session()
    await s.settled("t1", recorded=True)
    await s.eventful("t2")
    await s.admit("t3")
    s.ledger.down = True

    down = await s.history.list_turns(KEY, None, 10)
    s.ledger.down = False
    await s.project()

    assert [v.turn_id for v in down] == ["t3", "t2", "t1"]
    assert down == await s.history.list_turns(KEY, None, 10)


async def test_list_turns_pages_newest_first_across_ledger_and_unrecorded_events() -> None:
    s = Session()
    in_ledger = [await s.settled(f"t{i}", recorded=True) for i in (1, 2, 3)]
    unrecorded = [await s.settled(f"t{i}", recorded=False) for i in (4, 5)]
    active = await s.admit("t6")
    g = {view.turn_id: view.generation for view in [*in_ledger, *unrecorded]} | {"t6": active.generation}

    first = await s.history.list_turns(KEY, None, 3)
    second = await s.history.list_turns(KEY, first[-1].generation, 3)
    third = await s.history.list_turns(KEY, second[-1].generation, 3)

    assert [v.turn_id for v in first] == ["t6", "t5", "t4"]
    assert [v.turn_id for v in second] == ["t3", "t2", "t1"]
    assert third == []
    assert [v.generation for v in first + second] == sorted(g.values(), reverse=True)
    assert first[1:] == [replace(v, tool_calls=()) for v in reversed(unrecorded)], "replayed, without calls"
    assert second == [replace(v, tool_calls=()) for v in reversed(in_ledger)], "ledger rows, without calls"
    assert s.ledger.pages == [(None, 3), (g["t4"], 3), (g["t1"], 3)]
    assert [v.turn_id for v in await s.history.list_turns(KEY, g["t5"], 2)] == ["t4", "t3"]
    assert [v.turn_id for v in await s.history.list_turns(KEY, None, 1)] == ["t6"]


async def test_a_turn_id_admitted_again_answers_its_latest_generation_recorded_or_not() -> None:
    s = Session()
    first = await s.settled("t1", recorded=True)
    for i in range(32):  # the document remembers the last 32 settled turns: t1 is forgotten
        await s.settled(f"t-{i}", recorded=True)
    again = await s.settled("t1", recorded=False)

    got = await s.history.get_turn(KEY, "t1")

    assert got == again
    assert got is not None
    assert got.generation > first.generation


async def test_get_turn_answers_only_the_turn_asked_for() -> None:
    s = Session()
    await s.settled("t1", recorded=True)
    lagging = await s.settled("t2", recorded=False)
    await s.admit("t3")

    assert await s.history.get_turn(KEY, "t2") == lagging
    got = await s.history.get_turn(KEY, "t1")
    assert got is not None
    assert got.turn_id == "t1"
    assert await s.history.get_turn(SessionKey("p1", "another-session"), "t3") is None
    assert await s.history.get_turn(SessionKey("p2", "s1"), "t3") is None  # I11: another project's


# Turns that waited in the queue (docs/design.md §7).


async def test_a_turn_still_waiting_in_the_queue_is_answered_queued_from_the_document_and_not_listed() -> (
    None
):
    s = Session()
    await s.admit("t1")
    s.store.clock.advance(SECOND)
    queued = await s.store.apply(KEY, enqueue("t2", "r2"))
    [waiting] = queued.state.queue

    for ledger_down in (False, True):
        s.ledger.down = ledger_down
        got = await s.history.get_turn(KEY, "t2")
        assert got == TurnView(
            turn_id="t2",
            runner_id="r2",
            generation=0,
            phase=TurnPhase.QUEUED,
            outcome=None,
            settled_by=None,
            stop_requested=False,
            stop_reason="",
            stop_requested_at=None,
            stop_deadline=None,
            admitted_at=0,
            settled_at=None,
            lease_expires_at=0,
            error="",
            traceparent="00-t2-trace",
            queued_at=waiting.queued_at,
        )
        assert got.waited is None, "still waiting"
        assert [view.turn_id for view in await s.history.list_turns(KEY, None, 10)] == ["t1"]


async def test_turns_that_left_the_queue_are_answered_with_how_long_they_waited_recorded_or_not() -> None:
    """t2 is promoted when t1 completes, t3 is cancelled by a Stop while it waits, t4 expires."""
    s = Session()
    first = await s.admit("t1")
    for turn_id, wait in (("t2", 60 * SECOND), ("t3", 60 * SECOND), ("t4", 10 * SECOND)):
        s.store.clock.advance(SECOND)
        await s.store.apply(KEY, enqueue(turn_id, wait=wait))
    queued_at = {q.turn_id: q.queued_at for q in (await s.store.load(KEY)).queue}
    s.store.clock.advance(2 * SECOND)
    await s.store.apply(KEY, complete(first))
    s.store.clock.advance(SECOND)
    await s.store.apply(KEY, cancel("t3"))
    s.store.clock.advance(7 * SECOND)  # t4's expiry: it was queued 10 s ago
    await s.store.apply(KEY, Expire())

    unrecorded = {turn_id: await s.history.get_turn(KEY, turn_id) for turn_id in ("t2", "t3", "t4")}
    await s.project()
    recorded = {turn_id: await s.history.get_turn(KEY, turn_id) for turn_id in ("t2", "t3", "t4")}

    assert unrecorded == recorded
    promoted, cancelled, expired = (recorded[turn_id] for turn_id in ("t2", "t3", "t4"))
    assert promoted is not None
    assert (promoted.phase, promoted.queued_at, promoted.waited) == (
        TurnPhase.RUNNING,
        queued_at["t2"],
        4 * SECOND,
    )
    assert cancelled is not None
    assert (cancelled.outcome, cancelled.settled_by, cancelled.admitted_at, cancelled.waited) == (
        TurnOutcome.CANCELLED,
        SettledBy.GATEWAY,
        0,
        4 * SECOND,
    )
    assert expired is not None
    assert (expired.outcome, expired.settled_by, expired.admitted_at, expired.waited) == (
        TurnOutcome.EXPIRED,
        SettledBy.WATCHDOG,
        0,
        10 * SECOND,
    )
    listed = await s.history.list_turns(KEY, None, 10)
    assert [view.turn_id for view in listed] == ["t4", "t3", "t2", "t1"], "by the generation each took"
