"""Finding sessions (ListSessions, ListProjects) on SQLite and PostgreSQL: `record()` keeps each
session's last activity and last settled turn, monotonically however often or late a batch is
recorded; a project's sessions page newest first, exactly, and without a duplicate while new
activity arrives; the projects that have sessions page in id order, a token's own list too; history
retention takes a session out of the listing once its history is gone and nothing in it is live;
and every read seeks through an index. (The Redis store's projector writes the same rows:
test_projector.py compares every ledger table with what the SQL store records.)"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text, tuple_
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql import ClauseElement

from tests.support.commands import admit, enqueue, stop
from tests.support.plans import plan
from turngate.service.core import (
    Admit,
    Admitted,
    Complete,
    Event,
    Session,
    SessionKey,
    TurnOutcome,
    decide,
)
from turngate.service.ledger.directory import Directory, newest_of, next_projects, page_of_sessions
from turngate.service.ledger.prune import activity_deletion, oldest_activity, prune
from turngate.service.ledger.record import record
from turngate.service.sql.engine import make_engine
from turngate.service.sql.tables import session_activity
from turngate.service.store.sql import SqlStore

PROJECT = "listed"
SECOND = 1_000_000
# A store-clock instant, for the sessions written with times of the test's choosing.
AT = 1_764_000_000 * SECOND


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = make_engine(database_url)
    yield engine
    await engine.dispose()


def key(name: str, project: str = PROJECT) -> SessionKey:
    return SessionKey(project, name)


async def completed(store: SqlStore, at: SessionKey, turn_id: str) -> int:
    """A turn admitted and completed; its generation."""
    generation = (await admit(store, at, turn_id)).generation
    await store.apply(at, Complete(turn_id, generation, TurnOutcome.COMPLETED))
    return generation


async def newest_event(store: SqlStore, at: SessionKey) -> int:
    events = await store.events_after(at, 0, 1_000)
    return events[-1].time


async def listing(directory: Directory, project: str, size: int) -> list[list[SessionKey]]:
    """Every page of the project's sessions, `size` at a time."""
    pages: list[list[SessionKey]] = []
    before: tuple[int, str] | None = None
    while True:
        page = await directory.sessions(project, before, size)
        if page:
            pages.append([activity.key for activity in page])
        if len(page) < size:
            return pages
        before = (page[-1].last_activity_at, page[-1].key.session_id)


def a_turn_at(at: int, turn_id: str = "t1") -> list[Event]:
    """Turn `turn_id` admitted and completed at store-clock instant `at`: its events."""
    admitted = decide(Session(), Admit(turn_id, "runner", 20 * SECOND), at)
    assert isinstance(admitted.reply, Admitted)
    done = decide(admitted.state, Complete(turn_id, admitted.reply.generation, TurnOutcome.COMPLETED), at)
    return [*admitted.events, *done.events]


async def test_list_sessions_pages_a_projects_sessions_newest_activity_first_each_exactly_once(
    store: SqlStore,
) -> None:
    names = [f"s{index:02}" for index in range(23)]
    for name in names:
        await completed(store, key(name), "t1")
    await completed(store, key("elsewhere", "other-project"), "t1")
    newest = {name: await newest_event(store, key(name)) for name in names}

    pages = await listing(store.directory, PROJECT, 5)

    expected = sorted(names, key=lambda name: (newest[name], name), reverse=True)
    assert [len(page) for page in pages] == [5, 5, 5, 5, 3]
    assert [listed.session_id for page in pages for listed in page] == expected


async def test_sessions_as_active_at_once_are_listed_by_session_id_last_first_across_pages(
    engine: AsyncEngine,
) -> None:
    async with engine.begin() as conn:
        for name in ("b", "d", "a", "c"):
            await record(conn, key(name), a_turn_at(AT))
        await record(conn, key("newer"), a_turn_at(AT + 1))
        await record(conn, key("older"), a_turn_at(AT - 1))

    pages = await listing(Directory(engine), PROJECT, 2)

    assert [[listed.session_id for listed in page] for page in pages] == [
        ["newer", "d"],
        ["c", "b"],
        ["a", "older"],
    ]


async def test_paging_while_new_activity_arrives_lists_no_session_twice_and_every_untouched_one_once(
    store: SqlStore,
) -> None:
    names = [f"s{index}" for index in range(10)]
    for name in names:
        await completed(store, key(name), "t1")
    first = await store.directory.sessions(PROJECT, None, 4)
    assert [a.key.session_id for a in first] == ["s9", "s8", "s7", "s6"]

    # New activity on a session already listed, and on one the next pages would have listed.
    await completed(store, key("s8"), "t2")
    await completed(store, key("s2"), "t2")
    cursor = (first[-1].last_activity_at, first[-1].key.session_id)
    rest: list[str] = []
    while page := await store.directory.sessions(PROJECT, cursor, 4):
        rest += [a.key.session_id for a in page]
        cursor = (page[-1].last_activity_at, page[-1].key.session_id)

    listed = [a.key.session_id for a in first] + rest
    assert len(listed) == len(set(listed)), "a session listed twice"
    assert rest == ["s5", "s4", "s3", "s1", "s0"], "s2 moved ahead of the cursor: a new listing shows it"
    fresh = await store.directory.sessions(PROJECT, None, 3)
    assert [a.key.session_id for a in fresh] == ["s2", "s8", "s9"]


async def test_the_last_settled_turn_is_the_last_that_ran_never_a_queued_turn_that_left_the_queue(
    store: SqlStore,
) -> None:
    at = key("queued")
    ran = await admit(store, at, "t1")
    await store.apply(at, enqueue("t2"))
    await store.apply(at, stop("t2"))  # t2 leaves the queue CANCELLED: a settled row, newer than t1's
    [before] = await store.directory.sessions(PROJECT, None, 10)
    assert before.last_settled is None, "no turn that ran has settled"

    await store.apply(at, Complete("t1", ran.generation, TurnOutcome.COMPLETED))

    [after] = await store.directory.sessions(PROJECT, None, 10)
    assert after.last_settled is not None
    assert (after.last_settled.turn_id, after.last_settled.outcome) == ("t1", TurnOutcome.COMPLETED)
    assert after.last_activity_at == await newest_event(store, at) > before.last_activity_at


async def test_recording_a_batch_again_or_an_older_one_late_never_moves_a_sessions_activity_back(
    engine: AsyncEngine,
) -> None:
    old, new = a_turn_at(AT, "t1"), a_turn_at(AT + 10 * SECOND, "t2")
    async with engine.begin() as conn:
        await record(conn, key("s"), new)
    directory = Directory(engine)
    [recorded] = await directory.sessions(PROJECT, None, 10)

    async with engine.begin() as conn:
        await record(conn, key("s"), new)
        await record(conn, key("s"), old)

    assert await directory.sessions(PROJECT, None, 10) == [recorded]
    assert recorded.last_activity_at == new[-1].time
    assert recorded.last_settled is not None
    assert recorded.last_settled.turn_id == "t2"


async def test_list_projects_pages_the_projects_that_have_sessions_in_id_order_and_only_those_asked_for(
    store: SqlStore,
) -> None:
    projects = ["p-c", "p-a", "p-e", "p-b", "p-d"]
    for project in projects:
        for index in range(3):
            await completed(store, key(f"s{index}", project), "t1")
    newest = {p: await newest_event(store, key("s2", p)) for p in projects}
    directory = store.directory

    first = await directory.projects(None, 2, None)
    second = await directory.projects(first[-1].project_id, 2, None)
    third = await directory.projects(second[-1].project_id, 2, None)

    assert [[p.project_id for p in page] for page in (first, second, third)] == [
        ["p-a", "p-b"],
        ["p-c", "p-d"],
        ["p-e"],
    ]
    assert all(p.last_activity_at == newest[p.project_id] for p in (*first, *second, *third))
    among = frozenset({"p-e", "p-b", "p-never", "p-a"})
    assert [p.project_id for p in await directory.projects(None, 10, among)] == ["p-a", "p-b", "p-e"]
    assert [p.project_id for p in await directory.projects("p-a", 1, among)] == ["p-b"]
    assert await directory.projects(None, 10, frozenset()) == []


async def test_prune_takes_a_session_out_of_the_listing_once_its_history_is_gone_never_while_a_turn_runs(
    store: SqlStore, engine: AsyncEngine
) -> None:
    await completed(store, key("gone"), "t1")
    running = await admit(store, key("running"), "t1")
    cutoff = await store.now()
    await completed(store, key("recent"), "t1")

    pruned = await prune(engine, cutoff)

    assert pruned.session_activity == 1
    assert [a.key.session_id for a in await store.directory.sessions(PROJECT, None, 10)] == [
        "recent",
        "running",
    ]
    await store.apply(key("running"), Complete("t1", running.generation, TurnOutcome.COMPLETED))
    assert (await prune(engine, cutoff)).session_activity == 0, "its turn settled after the cutoff"
    assert (await prune(engine, await store.now())).session_activity == 2
    assert await store.directory.sessions(PROJECT, None, 10) == []
    assert await store.directory.projects(None, 10, None) == []


async def test_a_session_with_an_event_recorded_after_the_prune_found_it_keeps_its_activity(
    store: SqlStore, engine: AsyncEngine
) -> None:
    await completed(store, key("s"), "t1")
    cutoff = await store.now()
    async with engine.connect() as conn:
        found = (await conn.execute(oldest_activity(cutoff, 10))).all()
    assert [row.session_id for row in found] == ["s"]

    await completed(store, key("s"), "t2")
    async with engine.begin() as conn:
        statement, params = activity_deletion(conn.dialect.name, found, cutoff)
        await conn.execute(statement, params)

    [kept] = await store.directory.sessions(PROJECT, None, 10)
    assert kept.last_settled is not None
    assert kept.last_settled.turn_id == "t2"


# A project with many sessions, beside many projects of a few: the tables a plan must not scan.
_FILL = (
    """INSERT INTO session_activity (project_id, session_id, last_activity_at, settled_generation)
    SELECT 'p' || (i % 200), 's' || i, i, 0 FROM generate_series(1, 40000) AS i""",
    """INSERT INTO session_activity (project_id, session_id, last_activity_at, settled_generation)
    SELECT 'big', 's' || i, i, i FROM generate_series(1, 40000) AS i""",
    """INSERT INTO turns (project_id, session_id, generation, turn_id, runner_id, phase, outcome,
    settled_by, stop_requested, stop_reason, admitted_at, settled_at, lease_expires_at, error,
    traceparent) SELECT 'big', 's' || i, i, 't', 'r', 3, 1, 1, false, '', i, i, i, '', ''
    FROM generate_series(1, 40000) AS i""",
    "ANALYZE",
)


async def test_every_listing_read_seeks_through_an_index_and_never_scans_a_table(
    store: SqlStore, engine: AsyncEngine
) -> None:
    if engine.dialect.name == "postgresql":
        async with engine.begin() as conn:
            for fill in _FILL:
                await conn.execute(text(fill))
    else:
        await completed(store, key("s", "big"), "t1")
    reads: dict[str, ClauseElement] = {
        "first page": page_of_sessions("big", 51),
        "next page": page_of_sessions("big", 51).where(
            tuple_(session_activity.c.last_activity_at, session_activity.c.session_id) < tuple_(20_000, "s1")
        ),
        "projects": next_projects("", 51),
        "projects of a token": newest_of(["big", "p7", "p-none"]),
        "prune": oldest_activity(100, 1_000),
    }

    plans = {name: await plan(engine, read) for name, read in reads.items()}

    if engine.dialect.name == "sqlite":
        assert not any("SCAN session_activity" in p or "SCAN turns" in p for p in plans.values()), plans
        assert all("USE TEMP B-TREE" not in plans[name] for name in ("first page", "next page")), plans
    else:
        assert not any("Seq Scan" in p for p in plans.values()), plans
        assert all("Sort" not in plans[name] for name in ("first page", "next page")), plans
