"""Reads through the SDK (what an operator's tools show), and bad input as a typed error."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from tests.support.backoff import FAST
from tests.support.calls import admit, complete
from tests.support.servers import Client as Raw
from turngate.client import Client, InvalidRequest, NotFound, SessionPhase, TurnOutcome
from turngate.client.sync import Client as SyncClient
from turngate.v1 import turngate_pb2 as pb


async def test_reads_show_the_session_its_turns_page_by_page_and_the_busy_sessions(
    client: Client, raw: Raw, ref: pb.SessionRef
) -> None:
    for turn_id in ("t1", "t2"):
        await complete(raw, (await admit(raw, ref, turn_id)).lease)
    await admit(raw, ref, "t3")

    current = await client.get_session(ref.session_id)
    assert current.active is not None
    assert current.last_settled is not None
    assert (current.phase, current.active.turn_id, current.last_settled.turn_id) == (
        SessionPhase.RUNNING,
        "t3",
        "t2",
    )
    assert (await client.get_turn(ref.session_id, "t1")).outcome == TurnOutcome.COMPLETED
    assert [t.turn_id async for t in client.list_turns(ref.session_id, page_size=2)] == ["t3", "t2", "t1"]
    assert ref.session_id in [s.session.session_id async for s in client.active_sessions(page_size=1)]
    with pytest.raises(NotFound):
        await client.get_turn(ref.session_id, "never")


async def test_list_sessions_pages_the_projects_sessions_newest_activity_first_and_list_projects_names_it(
    target: str, raw: Raw
) -> None:
    project = f"p-sdk-list-{uuid.uuid4().hex[:8]}"
    for name in ("older", "newer"):
        await complete(raw, (await admit(raw, pb.SessionRef(project_id=project, session_id=name))).lease)
    await admit(raw, pb.SessionRef(project_id=project, session_id="busy"))

    async with Client(target, project, backoff=FAST) as client:
        listed = [summary async for summary in client.list_sessions(page_size=1)]
        projects = [p async for p in client.list_projects(page_size=500)]

    assert [s.snapshot.session.session_id for s in listed] == ["busy", "newer", "older"]
    assert [s.snapshot.phase for s in listed] == [SessionPhase.RUNNING, SessionPhase.IDLE, SessionPhase.IDLE]
    last = listed[1].snapshot.last_settled
    assert last is not None
    assert (last.turn_id, last.outcome) == ("t1", TurnOutcome.COMPLETED)
    assert listed[0].last_activity_at > listed[1].last_activity_at > listed[2].last_activity_at
    assert listed[0].raw is not None
    [ours] = [p for p in projects if p.project_id == project]
    assert ours.last_activity_at == listed[0].last_activity_at


def listed_synchronously(target: str, project: str) -> tuple[list[str], list[str]]:
    with SyncClient(target, project, backoff=FAST) as client:
        sessions = [s.snapshot.session.session_id for s in client.list_sessions(page_size=1)]
        return sessions, [p.project_id for p in client.list_projects(page_size=500)]


async def test_the_sync_client_lists_sessions_and_projects_as_the_async_one(target: str, raw: Raw) -> None:
    project = f"p-sdk-sync-{uuid.uuid4().hex[:8]}"
    for name in ("a", "b"):
        await complete(raw, (await admit(raw, pb.SessionRef(project_id=project, session_id=name))).lease)

    sessions, projects = await asyncio.to_thread(listed_synchronously, target, project)

    assert sessions == ["b", "a"]
    assert project in projects


async def test_bad_input_raises_invalid_request_naming_the_field(client: Client) -> None:
    with pytest.raises(InvalidRequest) as bad:
        async with client.runner("r1").turn("not a valid id", "t1"):
            pytest.fail("admitted")
    assert [field for field, _ in bad.value.violations] == ["session.session_id"]
