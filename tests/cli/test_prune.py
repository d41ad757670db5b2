"""`turngate prune --before WHEN` as an operator runs it, on a SQLite store and a PostgreSQL one:
it deletes the history settled (or written) before WHEN and prints what it deleted, a dry run only
counts it, and a WHEN too recent or unreadable, or a database without the schema, is refused."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import select, tuple_, update

from tests.cli.conftest import Turngate
from tests.support.postgres import postgres_database, postgres_url
from tests.support.processes import dump, sqlite_url
from turngate.service.core import (
    Admit,
    Admitted,
    Complete,
    RecordToolCall,
    SessionKey,
    ToolCallStatus,
    TurnOutcome,
)
from turngate.service.sql.engine import make_engine
from turngate.service.sql.migrate import migrate
from turngate.service.sql.tables import session_activity, session_events, turns
from turngate.service.store.sql import SqlStore, open_store

DAY = 24 * 3600 * 1_000_000
OLD, STUCK, NEW = SessionKey("p", "old"), SessionKey("p", "stuck"), SessionKey("p", "new")


async def admit(store: SqlStore, key: SessionKey, turn_id: str) -> int:
    reply = (await store.apply(key, Admit(turn_id, "runner", 60_000_000))).reply
    assert isinstance(reply, Admitted)
    return reply.generation


async def finish(store: SqlStore, key: SessionKey, turn_id: str) -> None:
    generation = await admit(store, key, turn_id)
    await store.apply(key, RecordToolCall(turn_id, generation, "c1", "search", ToolCallStatus.OPEN))
    await store.apply(key, Complete(turn_id, generation, TurnOutcome.COMPLETED))


async def aged(url: str, *turn_ids: str) -> None:
    """The history of `turn_ids` (each its session's only turn) made two days older, as if written
    then."""
    engine = make_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                update(turns)
                .where(turns.c.turn_id.in_(turn_ids))
                .values(admitted_at=turns.c.admitted_at - 2 * DAY, settled_at=turns.c.settled_at - 2 * DAY)
            )
            await conn.execute(
                update(session_events)
                .where(session_events.c.turn_id.in_(turn_ids))
                .values(time=session_events.c.time - 2 * DAY)
            )
            of_turns = select(turns.c.project_id, turns.c.session_id).where(turns.c.turn_id.in_(turn_ids))
            await conn.execute(
                update(session_activity)
                .where(tuple_(session_activity.c.project_id, session_activity.c.session_id).in_(of_turns))
                .values(last_activity_at=session_activity.c.last_activity_at - 2 * DAY)
            )
    finally:
        await engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
async def history(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A store's URL whose history holds, two days old, a settled turn and a turn still running,
    and a turn settled now."""

    async def written(url: str) -> str:
        await migrate(url)
        store = open_store(url)
        try:
            await finish(store, OLD, "old")
            await admit(store, STUCK, "stuck")
            await finish(store, NEW, "new")
        finally:
            await store.close()
        await aged(url, "old", "stuck")
        return url

    if request.param == "sqlite":
        yield await written(sqlite_url(tmp_path / "history.db"))
        return
    async with postgres_database("turngate_prune") as name:
        yield await written(postgres_url(name))


async def turn_ids(url: str) -> set[str]:
    store = open_store(url)
    try:
        return {
            view.turn_id for key in (OLD, STUCK, NEW) for view in await store.ledger.list_turns(key, None, 10)
        }
    finally:
        await store.close()


async def test_prune_deletes_the_history_settled_before_when_and_prints_what_it_deleted(
    turngate: Turngate, history: str
) -> None:
    ran = await turngate.run("prune", "--before", "1d", "--store", history)

    assert (ran.code, ran.err) == (0, "")
    [line] = ran.lines
    assert line.startswith(
        "pruned 1 turns, 1 tool calls, 0 interactions, 0 steers, 4 session events and 1 sessions "
        "settled or written before "
    )
    assert await turn_ids(history) == {"stuck", "new"}  # the running turn stays, however old

    again = await turngate.run("prune", "--before", "1d", "--store", history)
    assert again.lines[0].startswith(
        "pruned 0 turns, 0 tool calls, 0 interactions, 0 steers, 0 session events and 0 sessions"
    )


async def test_a_dry_run_prints_what_prune_would_delete_and_deletes_nothing(
    turngate: Turngate, tmp_path: Path
) -> None:
    url = sqlite_url(tmp_path / "history.db")
    await migrate(url)
    store = open_store(url)
    await finish(store, OLD, "old")
    await store.close()
    await aged(url, "old")
    before = dump(tmp_path / "history.db")

    ran = await turngate.run("prune", "--before", "36h", "--dry-run", "--store", url)

    assert ran.code == 0, ran.err
    assert ran.lines[0].startswith(
        "would prune 1 turns, 1 tool calls, 0 interactions, 0 steers, 4 session events and 1 sessions"
    )
    assert dump(tmp_path / "history.db") == before


async def test_prune_takes_an_iso_time_in_utc_and_names_it(turngate: Turngate, tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "history.db")
    await migrate(url)

    ran = await turngate.run("prune", "--before", "2020-01-31T12:00:00", "--store", url)

    assert ran.code == 0, ran.err
    assert ran.lines == [
        "pruned 0 turns, 0 tool calls, 0 interactions, 0 steers, 0 session events and 0 sessions "
        "settled or written before "
        "2020-01-31T12:00:00Z"
    ]


@pytest.mark.parametrize(
    ("when", "says"),
    [
        ("12h", "must be at least a day ago"),
        ("2999-01-01T00:00:00Z", "must be at least a day ago"),
        ("yesterday", "must be an ISO-8601 time"),
        ("3 days", "must be an ISO-8601 time"),
    ],
)
async def test_prune_refuses_a_when_less_than_a_day_ago_or_unreadable_with_exit_2(
    turngate: Turngate, tmp_path: Path, when: str, says: str
) -> None:
    ran = await turngate.run("prune", "--before", when, "--store", sqlite_url(tmp_path / "x.db"))

    assert ran.code == 2
    assert says in ran.err
    assert ran.out == ""
    assert not (tmp_path / "x.db").exists()


async def test_prune_of_no_store_or_one_without_the_schema_exits_1_in_one_line_creating_nothing(
    turngate: Turngate, tmp_path: Path
) -> None:
    missing = await turngate.run("prune", "--before", "30d", "--store", sqlite_url(tmp_path / "none.db"))
    sqlite3.connect(tmp_path / "blank.db").close()
    blank = await turngate.run("prune", "--before", "30d", "--store", sqlite_url(tmp_path / "blank.db"))

    assert (missing.code, missing.err) == (1, f"turngate: no SQLite store at {tmp_path / 'none.db'}\n")
    assert not (tmp_path / "none.db").exists()
    assert blank.code == 1
    assert blank.err.splitlines() == [
        "turngate: the database does not have this release's schema: run `turngate migrate` first"
    ]
