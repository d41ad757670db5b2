"""LiveHistory (history.py): GetTurn and ListTurns answered from the ledger, completed by the live
session document (docs/design.md §2.2: error texts and resolutions live only in the ledger).

The document comes from the in-memory store; the ledger is a fake `TurnHistory` holding whatever
rows the test says the ledger has recorded so far (in redis mode the projector may lag).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from turngate.service.core import (
    Admitted,
    InteractionStatus,
    SessionKey,
    SettledBy,
    ToolCallChanged,
    ToolCallStatus,
    TurnOutcome,
    TurnPhase,
)
from turngate.service.history import LiveHistory
from turngate.service.ports.history import TurnView, tool_call_view, turn_view
from turngate.service.ports.store import StoreUnavailable

from .helpers import SECOND, Lease, admit, cancel, complete, heartbeat, interaction, resolve, tool_call
from .memory_store import MemoryStore

KEY = SessionKey("p1", "s1")


class FakeLedger:
    """A `TurnHistory` over rows the test records; `down` fails every read as a database would."""

    def __init__(self) -> None:
        self.rows: dict[SessionKey, list[TurnView]] = {}
        self.down = False
        self.pages: list[tuple[int | None, int]] = []

    def record(self, view: TurnView, key: SessionKey = KEY) -> None:
        self.rows.setdefault(key, []).append(view)

    async def get_turn(self, key: SessionKey, turn_id: str) -> TurnView | None:
        self._reach()
        found = [view for view in self.rows.get(key, []) if view.turn_id == turn_id]
        return max(found, key=lambda view: view.generation, default=None)

    async def list_turns(self, key: SessionKey, before_generation: int | None, limit: int) -> list[TurnView]:
        self._reach()
        self.pages.append((before_generation, limit))
        older = [
            replace(view, tool_calls=(), interactions=())
            for view in self.rows.get(key, [])
            if before_generation is None or view.generation < before_generation
        ]
        return sorted(older, key=lambda view: view.generation, reverse=True)[:limit]

    def _reach(self) -> None:
        if self.down:
            raise StoreUnavailable("the ledger database is down")


class Session:
    """One session written through the memory store, turn after turn."""

    def __init__(self) -> None:
        self.store = MemoryStore()
        self.ledger = FakeLedger()
        self.history = LiveHistory(self.ledger, self.store)

    async def admit(self, turn_id: str) -> Lease:
        self.store.clock.advance(SECOND)
        reply = (await self.store.apply(KEY, admit(turn_id))).reply
        assert isinstance(reply, Admitted), reply
        return Lease(turn_id, reply.generation)

    async def settled(self, turn_id: str, *, recorded: bool) -> TurnView:
        """Turn `turn_id`, run with one tool call and completed (the call interrupted, I7).
        `recorded`: the ledger has its row, with the call; otherwise only the document has it, as
        `turn_view` shows it (without calls). Returns the one that has it."""
        lease = await self.admit(turn_id)
        await self.store.apply(KEY, tool_call(lease, "c1"))
        completed = await self.store.apply(KEY, complete(lease))
        turn = completed.state.settled(turn_id)
        assert turn is not None
        calls = [
            tool_call_view(e.body.call_id, e.body.call, e.body.error)
            for e in completed.events
            if isinstance(e.body, ToolCallChanged)
        ]
        assert [call.status for call in calls] == [ToolCallStatus.INTERRUPTED]
        if not recorded:
            return turn_view(turn)
        row = replace(turn_view(turn), tool_calls=tuple(calls))
        self.ledger.record(row)
        return row


async def test_the_active_turn_is_the_documents_with_error_texts_and_resolutions_from_its_ledger_row() -> (
    None
):
    s = Session()
    lease = await s.admit("t1")
    await s.store.apply(KEY, tool_call(lease, "c1"))
    await s.store.apply(KEY, tool_call(lease, "c1", ToolCallStatus.FAILED, error="disk full"))
    await s.store.apply(KEY, tool_call(lease, "c2"))
    await s.store.apply(KEY, interaction(lease, "i1"))
    await s.store.apply(KEY, resolve("i1", "approved"))
    await s.store.apply(KEY, interaction(lease, "i2"))
    as_recorded = await s.store.load(KEY)
    assert as_recorded.active is not None
    # The ledger's row: as of the last write it recorded, with the texts the events carried.
    ledger_row = turn_view(as_recorded.active)
    ledger_row = replace(
        ledger_row,
        tool_calls=(replace(ledger_row.tool_calls[0], error="disk full"), *ledger_row.tool_calls[1:]),
        interactions=(
            replace(ledger_row.interactions[0], resolution="approved"),
            *ledger_row.interactions[1:],
        ),
    )
    s.ledger.record(ledger_row)
    # Then the document moves on without a ledger write of this turn: a heartbeat and a Stop.
    s.store.clock.advance(5 * SECOND)
    await s.store.apply(KEY, heartbeat(lease))
    stopped = await s.store.apply(KEY, cancel("t1", reason="user pressed stop"))
    active = stopped.state.active
    assert active is not None
    assert active.stop is not None

    got = await s.history.get_turn(KEY, "t1")

    assert got == turn_view(active, ledger_row)
    assert got is not None
    assert (got.phase, got.stop_requested, got.stop_reason) == (TurnPhase.STOPPING, True, "user pressed stop")
    assert (got.lease_expires_at, got.stop_deadline) == (active.lease_expires_at, active.stop.deadline)
    assert got.lease_expires_at > ledger_row.lease_expires_at
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
    assert replace(listed, tool_calls=(), interactions=()) == replace(got, tool_calls=(), interactions=())


async def test_an_active_turn_the_ledger_has_not_recorded_comes_from_the_document_without_texts() -> None:
    s = Session()
    lease = await s.admit("t1")
    await s.store.apply(KEY, tool_call(lease, "c1", ToolCallStatus.OPEN))
    await s.store.apply(KEY, tool_call(lease, "c1", ToolCallStatus.FAILED, error="disk full"))

    got = await s.history.get_turn(KEY, "t1")

    assert got is not None
    assert (got.phase, got.generation) == (TurnPhase.RUNNING, lease.generation)
    assert [(c.call_id, c.status, c.error) for c in got.tool_calls] == [("c1", ToolCallStatus.FAILED, "")]


async def test_a_settled_turn_the_ledger_lacks_comes_from_the_document_and_one_it_has_from_the_ledger() -> (
    None
):
    s = Session()
    recorded = await s.settled("t1", recorded=True)
    lagging = await s.settled("t2", recorded=False)

    got_recorded = await s.history.get_turn(KEY, "t1")
    got_lagging = await s.history.get_turn(KEY, "t2")

    assert got_recorded == recorded
    assert got_recorded is not None
    assert [c.call_id for c in got_recorded.tool_calls] == ["c1"], "the ledger's row, with its calls"
    assert got_lagging == lagging
    assert got_lagging is not None
    assert (got_lagging.phase, got_lagging.outcome, got_lagging.settled_by) == (
        TurnPhase.SETTLED,
        TurnOutcome.COMPLETED,
        SettledBy.RUNNER,
    )
    assert got_lagging.tool_calls == (), "the document keeps no calls of a settled turn"
    assert await s.history.get_turn(KEY, "never-admitted") is None


async def test_while_the_ledger_is_down_a_turn_the_document_has_is_answered_any_other_is_unavailable() -> (
    None
):
    s = Session()
    await s.settled("t1", recorded=True)
    for i in range(32):  # the document remembers the last 32 settled turns: t1 is forgotten
        await s.settled(f"t-{i}", recorded=True)
    remembered = await s.settled("t2", recorded=False)
    lease = await s.admit("t3")
    s.ledger.down = True

    live = await s.history.get_turn(KEY, "t3")
    assert live is not None
    assert (live.turn_id, live.generation, live.phase) == ("t3", lease.generation, TurnPhase.RUNNING)
    assert await s.history.get_turn(KEY, "t2") == remembered
    for unknown_to_the_document in ("t1", "never-admitted"):
        with pytest.raises(StoreUnavailable):
            await s.history.get_turn(KEY, unknown_to_the_document)
    with pytest.raises(StoreUnavailable):
        await s.history.list_turns(KEY, None, 10)


async def test_list_turns_pages_newest_first_across_ledger_and_document_with_before_generation() -> None:
    s = Session()
    in_ledger = [await s.settled(f"t{i}", recorded=True) for i in (1, 2, 3)]
    in_document = [await s.settled(f"t{i}", recorded=False) for i in (4, 5)]
    active = await s.admit("t6")
    g = {view.turn_id: view.generation for view in [*in_ledger, *in_document]} | {"t6": active.generation}

    first = await s.history.list_turns(KEY, None, 3)
    second = await s.history.list_turns(KEY, first[-1].generation, 3)
    third = await s.history.list_turns(KEY, second[-1].generation, 3)

    assert [v.turn_id for v in first] == ["t6", "t5", "t4"]
    assert [v.turn_id for v in second] == ["t3", "t2", "t1"]
    assert third == []
    assert [v.generation for v in first + second] == sorted(g.values(), reverse=True)
    assert second == [replace(v, tool_calls=()) for v in reversed(in_ledger)], "ledger rows, without calls"
    assert s.ledger.pages == [(None, 3), (g["t4"], 3), (g["t1"], 3)]
    assert [v.turn_id for v in await s.history.list_turns(KEY, g["t5"], 2)] == ["t4", "t3"]
    assert [v.turn_id for v in await s.history.list_turns(KEY, None, 1)] == ["t6"]


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
