"""The ledger on every SQL backend: its rows say what the events say, and recording is idempotent."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from tests.support.commands import QUEUE_HISTORY, STEERED_TURNS, play_a_queue, play_steers
from turngate.service.core import (
    Admit,
    Admitted,
    Cancel,
    Command,
    Complete,
    Event,
    Expire,
    Heartbeat,
    HeartbeatReply,
    InteractionStatus,
    QueueReordered,
    RecordInteraction,
    RecordToolCall,
    ResolveInteraction,
    SessionKey,
    SettledBy,
    SteerEnded,
    SteerStatus,
    SteerTurn,
    ToolCallStatus,
    TurnAdmitted,
    TurnDequeued,
    TurnOutcome,
    TurnPhase,
    TurnQueued,
    TurnSettled,
    TurnSteered,
)
from turngate.service.core.replies import Cancelled, Refusal
from turngate.service.ledger.reads import Ledger
from turngate.service.ledger.record import record, record_sessions
from turngate.service.ledger.replay import replay
from turngate.service.ports.history import InteractionView, SteerView, ToolCallView, TurnView
from turngate.service.sql.engine import make_engine
from turngate.service.sql.tables import metadata, session_events, steers
from turngate.service.store.sql import SqlStore

SECOND = 1_000_000
KEY = SessionKey("project", "session")
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


async def admit(store: SqlStore, turn_id: str, lease: int = 20 * SECOND) -> Admitted:
    reply = (await store.apply(KEY, Admit(turn_id, "runner", lease, TRACEPARENT))).reply
    assert isinstance(reply, Admitted)
    return reply


async def time_of(store: SqlStore, command: Command) -> int:
    """Applies `command` and returns the store-clock time its events were written at."""
    decision = await store.apply(KEY, command)
    assert decision.events, f"{command} changed nothing"
    return decision.events[0].time


async def ledger_rows(engine: AsyncEngine) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every ledger table, in primary-key order."""
    async with engine.connect() as conn:
        return {
            name: [tuple(row) for row in await conn.execute(select(table).order_by(*table.primary_key))]
            for name, table in metadata.tables.items()
            if name != "sessions"
        }


async def run_a_stopped_turn(store: SqlStore) -> tuple[Admitted, dict[str, int]]:
    """A turn with every kind of tool call and interaction, stopped by a user, ended by its runner."""
    admitted = await store.apply(KEY, Admit("t1", "runner", 20 * SECOND, TRACEPARENT))
    lease = admitted.reply
    assert isinstance(lease, Admitted)
    gen = lease.generation
    times = {
        "admitted": admitted.events[0].time,
        "open": await time_of(store, RecordToolCall("t1", gen, "c-open", "search", ToolCallStatus.OPEN)),
        "ok-opened": await time_of(store, RecordToolCall("t1", gen, "c-ok", "read", ToolCallStatus.OPEN)),
        "ok-closed": await time_of(
            store, RecordToolCall("t1", gen, "c-ok", "read", ToolCallStatus.SUCCEEDED)
        ),
        "bad": await time_of(
            store, RecordToolCall("t1", gen, "c-bad", "write", ToolCallStatus.FAILED, "disk full")
        ),
        "asked": await time_of(store, RecordInteraction("t1", gen, "i-answered", "approval")),
        "answered": await time_of(store, ResolveInteraction("i-answered", "yes")),
        "pending": await time_of(store, RecordInteraction("t1", gen, "i-pending", "question")),
        "stop": await time_of(store, Cancel("t1", "user pressed stop", False, "", 30 * SECOND, 600 * SECOND)),
        "settled": await time_of(store, Complete("t1", gen, TurnOutcome.CANCELLED)),
    }
    return lease, times


async def test_ledger_rows_match_the_events_of_a_stopped_turn(store: SqlStore) -> None:
    lease, t = await run_a_stopped_turn(store)

    assert await store.ledger.get_turn(KEY, "t1") == TurnView(
        turn_id="t1",
        runner_id="runner",
        generation=lease.generation,
        phase=TurnPhase.SETTLED,
        outcome=TurnOutcome.CANCELLED,
        settled_by=SettledBy.RUNNER,
        stop_requested=True,
        stop_reason="user pressed stop",
        stop_requested_at=t["stop"],
        stop_deadline=t["stop"] + 30 * SECOND,
        admitted_at=t["admitted"],
        settled_at=t["settled"],
        lease_expires_at=lease.lease_expires_at,
        error="",
        traceparent=TRACEPARENT,
        tool_calls=(
            ToolCallView("c-open", "search", ToolCallStatus.INTERRUPTED, "", t["open"], t["settled"]),
            ToolCallView("c-ok", "read", ToolCallStatus.SUCCEEDED, "", t["ok-opened"], t["ok-closed"]),
            ToolCallView("c-bad", "write", ToolCallStatus.FAILED, "disk full", t["bad"], t["bad"]),
        ),
        interactions=(
            InteractionView(
                "i-answered", "approval", InteractionStatus.RESOLVED, "yes", t["asked"], t["answered"]
            ),
            InteractionView(
                "i-pending", "question", InteractionStatus.CANCELLED, "", t["pending"], t["stop"]
            ),
        ),
    )


async def test_ledger_shows_a_stopping_turn_before_it_settles(store: SqlStore) -> None:
    lease = await admit(store, "t1")
    stopped = await store.apply(KEY, Cancel("t1", "user pressed stop", False, "", 30 * SECOND, 600 * SECOND))
    assert isinstance(stopped.reply, Cancelled)

    turn = await store.ledger.get_turn(KEY, "t1")

    assert turn is not None
    assert (turn.phase, turn.outcome, turn.settled_at) == (TurnPhase.STOPPING, None, None)
    assert (turn.stop_requested, turn.stop_deadline) == (True, stopped.reply.stop_deadline)
    assert turn.lease_expires_at == lease.lease_expires_at


async def test_i7_settlement_by_the_clock_closes_calls_and_interactions_in_the_ledger(
    store: SqlStore, pass_store_time: Callable[[int], Awaitable[None]]
) -> None:
    gen = (await admit(store, "t1")).generation
    await store.apply(KEY, RecordToolCall("t1", gen, "c1", "search", ToolCallStatus.OPEN))
    await store.apply(KEY, RecordInteraction("t1", gen, "i1", "approval"))
    beat = (await store.apply(KEY, Heartbeat("t1", gen, lease_ttl=1))).reply
    assert isinstance(beat, HeartbeatReply)
    assert beat.lease_expires_at is not None
    await pass_store_time(beat.lease_expires_at)

    swept = await store.apply(KEY, Expire())

    settled = swept.events[-1].body
    assert isinstance(settled, TurnSettled)
    turn = await store.ledger.get_turn(KEY, "t1")
    assert turn is not None
    assert (turn.phase, turn.outcome, turn.settled_by) == (
        TurnPhase.SETTLED,
        TurnOutcome.LOST,
        SettledBy.WATCHDOG,
    )
    assert [(c.call_id, c.status, c.error, c.closed_at) for c in turn.tool_calls] == [
        ("c1", ToolCallStatus.INTERRUPTED, "", settled.turn.settled_at)
    ]
    assert [(i.interaction_id, i.status, i.closed_at) for i in turn.interactions] == [
        ("i1", InteractionStatus.CANCELLED, settled.turn.settled_at)
    ]


async def test_i4_stop_before_start_is_logged_but_makes_no_turn_row(store: SqlStore) -> None:
    stopped = await store.apply(KEY, Cancel("t9", "too late", False, "", 30 * SECOND, 600 * SECOND))
    refused = await store.apply(KEY, Admit("t9", "runner", 20 * SECOND))

    assert isinstance(stopped.reply, Cancelled)
    assert stopped.reply.before_start
    assert isinstance(refused.reply, Refusal)
    assert [e.body.kind for e in await store.events_after(KEY, 0, 10)] == ["stop_requested"]
    assert await store.ledger.get_turn(KEY, "t9") is None
    assert await store.ledger.list_turns(KEY, None, 10) == []


async def test_ledger_record_is_idempotent(store: SqlStore, database_url: str) -> None:
    await run_a_stopped_turn(store)
    await play_steers(store, KEY)
    events = await store.events_after(KEY, 0, 100)
    engine = make_engine(database_url)
    before = await ledger_rows(engine)

    async with engine.begin() as conn:
        await record(conn, KEY, events)
        # A projector redelivering an older batch after newer ones must not move anything back.
        await record(conn, KEY, events[: len(events) // 2])
        for event in events:
            await record(conn, KEY, [event])

    assert await ledger_rows(engine) == before
    await engine.dispose()


async def test_get_turn_reads_the_latest_generation_and_list_turns_pages_newest_first(
    store: SqlStore, database_url: str
) -> None:
    generations = []
    for i in range(5):
        lease = await admit(store, f"t{i}")
        await store.apply(KEY, Complete(f"t{i}", lease.generation, TurnOutcome.COMPLETED))
        generations.append(lease.generation)
    newest_first = generations[::-1]

    first = await store.ledger.list_turns(KEY, None, 2)
    second = await store.ledger.list_turns(KEY, first[-1].generation, 2)
    third = await store.ledger.list_turns(KEY, second[-1].generation, 2)

    assert [t.generation for t in first + second + third] == newest_first
    assert await store.ledger.list_turns(KEY, third[-1].generation, 2) == []
    assert all(t.outcome is TurnOutcome.COMPLETED and t.tool_calls == () for t in first + second + third)

    # The same turn id admitted again later (e.g. after its session document was lost).
    again = generations[-1] + 1
    engine = make_engine(database_url)
    async with engine.begin() as conn:
        await record(conn, KEY, [Event(100, again, TurnAdmitted("t2", "runner-2", again, again, again + 1))])
    await engine.dispose()
    latest = await store.ledger.get_turn(KEY, "t2")
    assert latest is not None
    assert (latest.generation, latest.runner_id, latest.phase) == (again, "runner-2", TurnPhase.RUNNING)
    assert await store.ledger.get_turn(KEY, "never-admitted") is None


async def test_recording_many_sessions_at_once_writes_what_recording_each_commit_writes(
    store: SqlStore, database_url: str
) -> None:
    """The projector records its batches with writes grouped by kind across sessions (turns
    admitted and turns that left the queue share the admit statement)."""
    await run_a_stopped_turn(store)
    # A second turn, so that one session's batch holds writes of every kind more than once.
    await play_a_turn_to_completion(store, "t2")
    await play_a_queue(store, KEY)
    await play_steers(store, KEY)
    events = await store.events_after(KEY, 0, 100)
    engine = make_engine(database_url)
    copies = [SessionKey("batched", "a"), SessionKey("batched", "b")]

    async with engine.begin() as conn:
        await record_sessions(conn, [(copy, events) for copy in copies])

    per_commit = await ledger_rows_of(engine, KEY)
    assert [await ledger_rows_of(engine, copy) for copy in copies] == [per_commit, per_commit]
    await engine.dispose()


async def play_a_turn_to_completion(store: SqlStore, turn_id: str) -> None:
    lease = await admit(store, turn_id)
    await store.apply(KEY, RecordToolCall(turn_id, lease.generation, "c1", "read", ToolCallStatus.OPEN))
    await store.apply(KEY, RecordInteraction(turn_id, lease.generation, "i1", "approval"))
    await store.apply(KEY, Complete(turn_id, lease.generation, TurnOutcome.COMPLETED))


async def ledger_rows_of(engine: AsyncEngine, key: SessionKey) -> dict[str, list[tuple[object, ...]]]:
    """The session's rows of every ledger table, without the session's key."""
    async with engine.connect() as conn:
        return {
            name: [
                tuple(row)[2:]
                for row in await conn.execute(
                    select(table)
                    .where(table.c.project_id == key.project_id, table.c.session_id == key.session_id)
                    .order_by(*table.primary_key)
                )
            ]
            for name, table in metadata.tables.items()
            if name not in ("sessions", "ledger_cursors")
        }


async def test_a_turn_replayed_from_events_equals_the_ledgers_once_it_has_recorded_them(
    store: SqlStore, database_url: str
) -> None:
    """What GetTurn answers while the ledger lags (history.py) is what it answers afterwards: for
    every point the ledger may have recorded up to, its turns with the rest replayed onto them
    (from any earlier event on) equal its turns once it has recorded everything."""
    await run_a_stopped_turn(store)
    await play_a_turn_to_completion(store, "t2")
    forced = await admit(store, "t3")
    await store.apply(KEY, RecordToolCall("t3", forced.generation, "c1", "read", ToolCallStatus.OPEN))
    await store.apply(KEY, Cancel("t3", "first", False, "", 30 * SECOND, 600 * SECOND))
    await store.apply(KEY, Cancel("t3", "then forced", True, "", 30 * SECOND, 600 * SECOND))
    await play_a_queue(store, KEY, TRACEPARENT)
    await play_steers(store, KEY)
    steered = (await store.load(KEY)).active
    assert steered is not None
    await store.apply(KEY, Complete(steered.turn_id, steered.generation, TurnOutcome.COMPLETED))
    running = await admit(store, "t4")
    await store.apply(
        KEY, RecordToolCall("t4", running.generation, "c1", "read", ToolCallStatus.FAILED, "gone")
    )
    await store.apply(KEY, RecordInteraction("t4", running.generation, "i1", "approval"))
    running_steer = await store.apply(KEY, SteerTurn("t4", "g", "say g"))
    assert running_steer.events
    events = await store.events_after(KEY, 0, 200)
    turn_ids = ("t1", "t2", "t3", *QUEUE_HISTORY, *STEERED_TURNS, "t4")
    whole = {turn_id: await store.ledger.get_turn(KEY, turn_id) for turn_id in turn_ids}
    listed = await store.ledger.list_turns(KEY, None, 20)
    assert {view.turn_id: view for view in replay(KEY, (), events).values()} == whole
    engine = make_engine(database_url)
    ledger = Ledger(engine)

    for recorded in range(len(events) + 1):
        lagging = SessionKey("lagging", f"up-to-{recorded}")
        async with engine.begin() as conn:
            await record(conn, lagging, events[:recorded])
        replayed_from = max(0, recorded - 3)  # some of what it recorded comes again
        for turn_id in turn_ids:
            row = await ledger.get_turn(lagging, turn_id)
            turns = replay(lagging, () if row is None else (row,), events[replayed_from:])
            assert [view for view in turns.values() if view.turn_id == turn_id] == [whole[turn_id]], (
                f"{turn_id} recorded up to event {recorded}"
            )
        page = replay(lagging, await ledger.list_turns(lagging, None, 20), events[replayed_from:])
        newest_first = sorted(page.values(), key=lambda view: view.generation, reverse=True)
        assert [replace(view, tool_calls=(), interactions=(), steers=()) for view in newest_first] == listed
    await engine.dispose()


async def test_the_rows_of_turns_that_waited_say_how_each_left_the_queue_and_how_long_it_waited(
    store: SqlStore,
) -> None:
    await play_a_queue(store, KEY, TRACEPARENT)
    events = await store.events_after(KEY, 0, 100)
    queued_at = {e.body.turn_id: e.time for e in events if isinstance(e.body, TurnQueued)}
    left = {e.body.turn_id: e for e in events if isinstance(e.body, TurnDequeued | TurnAdmitted)}
    rows = {turn_id: await store.ledger.get_turn(KEY, turn_id) for turn_id in QUEUE_HISTORY}

    never_waited = rows["q1"]
    assert never_waited is not None
    assert (never_waited.queued_at, never_waited.waited) == (None, None)
    promoted, promotion = rows["q2"], left["q2"].body
    assert isinstance(promotion, TurnAdmitted)
    assert promoted is not None
    assert (promoted.generation, promoted.admitted_at, promoted.queued_at, promoted.waited) == (
        promotion.generation,
        left["q2"].time,
        queued_at["q2"],
        promotion.waited,
    )
    assert promoted.traceparent == TRACEPARENT, "its admission's, kept while it waited"
    assert (promoted.outcome, promoted.settled_by, promoted.stop_requested) == (
        TurnOutcome.CANCELLED,
        SettledBy.RUNNER,
        True,
    )
    for turn_id, outcome, settled_by in (
        ("q3", TurnOutcome.CANCELLED, SettledBy.GATEWAY),
        ("q4", TurnOutcome.EXPIRED, SettledBy.WATCHDOG),
        ("q5", TurnOutcome.CANCELLED, SettledBy.GATEWAY),
    ):
        row, dequeued = rows[turn_id], left[turn_id]
        assert isinstance(dequeued.body, TurnDequeued)
        assert row == TurnView(
            turn_id=turn_id,
            runner_id="runner",
            generation=dequeued.body.generation,
            phase=TurnPhase.SETTLED,
            outcome=outcome,
            settled_by=settled_by,
            stop_requested=outcome is TurnOutcome.CANCELLED,
            stop_reason="user pressed stop" if outcome is TurnOutcome.CANCELLED else "",
            stop_requested_at=None,
            stop_deadline=None,
            admitted_at=0,
            settled_at=dequeued.time,
            lease_expires_at=dequeued.time,
            error="",
            traceparent="",
            queued_at=queued_at[turn_id],
        ), turn_id
        assert row.waited == dequeued.time - queued_at[turn_id]
    assert [view.turn_id for view in await store.ledger.list_turns(KEY, None, 10)] == [
        "q5",
        "q2",
        "q4",
        "q3",
        "q1",
    ], "by generation: each turn took one as it left the queue (promoted, cancelled or expired)"


async def test_s2_each_steer_end_is_a_ledger_row_and_get_turn_lists_the_steers_in_the_order_they_came(
    store: SqlStore,
) -> None:
    """A steer is a row from the moment it is sent (PENDING, with its content), and its one end
    updates that row; the content stays: history is where it is kept once the steer ended."""
    await play_steers(store, KEY)
    events = await store.events_after(KEY, 0, 100)
    sent = {e.body.steer_id: e.time for e in events if isinstance(e.body, TurnSteered)}
    ended = {e.body.steer_id: e.time for e in events if isinstance(e.body, SteerEnded)}

    turns = {turn_id: await store.ledger.get_turn(KEY, turn_id) for turn_id in STEERED_TURNS}

    assert {turn_id: view.steers if view else None for turn_id, view in turns.items()} == {
        "s1": (
            SteerView("a", SteerStatus.CONSUMED, sent["a"], ended["a"], "say a", "text/plain", False),
            SteerView("b", SteerStatus.DECLINED, sent["b"], ended["b"], "say b", "text/plain", False),
            SteerView("c", SteerStatus.UNCONSUMED, sent["c"], ended["c"], "say c", "text/plain", True),
            SteerView("d", SteerStatus.UNCONSUMED, sent["d"], ended["d"], "say d", "text/plain", False),
        ),
        "c": (
            SteerView(
                "x", SteerStatus.EXPIRED, sent["x"], ended["x"], '{"say": "x"}', "application/json", False
            ),
        ),
        "e": (SteerView("f", SteerStatus.PENDING, sent["f"], None, "say f", "text/plain", False),),
    }, "a turn a steer became lists the steers sent to it, not the one it came from"
    assert all(view.steers == () for view in await store.ledger.list_turns(KEY, None, 10))


async def test_s2_record_writes_a_steer_pending_then_its_one_end_and_a_reorder_only_to_the_log(
    database_url: str,
) -> None:
    """record() itself, event by event: TurnSteered inserts the row, SteerEnded ends it once (a
    later end, or the steer sent again, changes nothing), QueueReordered is only a session event."""
    gen = 7
    engine = make_engine(database_url)
    async with engine.begin() as conn:
        await record(conn, KEY, [Event(1, 100, TurnAdmitted("t1", "runner", gen, 100, 900))])
        await record(conn, KEY, [Event(2, 200, TurnSteered("t1", gen, "s", "go left", "text/plain", 800))])
        pending = await steer_rows_in(conn)
        await record(conn, KEY, [Event(3, 300, SteerEnded("t1", gen, "s", SteerStatus.CONSUMED))])
        await record(
            conn,
            KEY,
            [
                Event(2, 200, TurnSteered("t1", gen, "s", "go left", "text/plain", 800)),
                Event(4, 400, SteerEnded("t1", gen, "s", SteerStatus.UNCONSUMED, requeued=True)),
                Event(5, 500, QueueReordered(("q2", "q1"), "q2")),
            ],
        )
        ended = await steer_rows_in(conn)
        kinds = [
            row.kind for row in await conn.execute(select(session_events).order_by(session_events.c.seq))
        ]
    await engine.dispose()

    assert pending == [(gen, "s", "t1", SteerStatus.PENDING, 200, None, "go left", "text/plain", False, 2)]
    assert ended == [(gen, "s", "t1", SteerStatus.CONSUMED, 200, 300, "go left", "text/plain", False, 2)]
    assert kinds == ["turn_admitted", "turn_steered", "steer_ended", "steer_ended", "queue_reordered"]


async def steer_rows_in(conn: AsyncConnection) -> list[tuple[object, ...]]:
    """The steers rows, without the session's key."""
    return [tuple(row)[2:] for row in await conn.execute(select(steers).order_by(*steers.primary_key))]
