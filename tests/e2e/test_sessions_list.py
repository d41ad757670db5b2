"""Finding sessions end to end (ListSessions, ListProjects), on every store: the embedded SQLite
store, PostgreSQL, and Redis (one server, a Cluster, behind Sentinel) with its projector. A
project's sessions, busy and idle, page newest activity first with their state as GetSession shows
it; paging lists no session twice and every session without new activity once while new activity
arrives; the projects that have sessions page in id order. In redis mode the order follows the
ledger, which the projector writes a moment after each commit: the tests wait for it."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import pytest

from tests.support.calls import admit, complete, get_turn, stop
from tests.support.postgres import postgres_database, postgres_url
from tests.support.servers import Client, running, settings_for
from tests.support.waiting import eventually
from turngate.service.api import page_tokens
from turngate.v1 import turngate_pb2 as pb

# The projector records within milliseconds; a loaded machine may take longer.
RECORDED_WITHIN_S = 20.0
Scenario = Callable[[Client], Awaitable[None]]


def new_project() -> str:
    return f"p-list-{uuid.uuid4().hex[:10]}"


def ref(project: str, session_id: str) -> pb.SessionRef:
    return pb.SessionRef(project_id=project, session_id=session_id)


async def every_page(client: Client, project: str, size: int) -> list[pb.ListSessionsResponse]:
    pages = []
    token = ""
    while True:
        page = await client.sessions.ListSessions(
            pb.ListSessionsRequest(project_id=project, page_size=size, page_token=token)
        )
        pages.append(page)
        if not (token := page.next_page_token):
            return pages


async def listed_ids(client: Client, project: str, size: int = 50) -> list[str]:
    pages = await every_page(client, project, size)
    return [s.snapshot.session.session_id for page in pages for s in page.sessions]


async def recorded(check: Callable[[], Awaitable[bool]]) -> None:
    """Waits until `check` passes: in redis mode, once the ledger has what it lists (a ledger the
    server is still migrating answers UNAVAILABLE meanwhile)."""

    async def passes() -> bool:
        try:
            return await check()
        except grpc.aio.AioRpcError as error:
            if error.code() is not grpc.StatusCode.UNAVAILABLE:
                raise
            return False

    await eventually(passes, timeout_s=RECORDED_WITHIN_S)


async def listed_as(client: Client, project: str, expected: list[str]) -> None:
    """Waits until the project's listing is `expected`."""

    async def shown() -> bool:
        return await listed_ids(client, project) == expected

    await recorded(shown)


async def done_turn(client: Client, session: pb.SessionRef, turn_id: str = "t1") -> None:
    await complete(client, (await admit(client, session, turn_id)).lease)


async def busy_and_idle_sessions_page_newest_activity_first_with_their_state(client: Client) -> None:
    project = new_project()
    await done_turn(client, ref(project, "s0"))
    await admit(client, ref(project, "s1"))
    await stop(client, ref(project, "s1"), "t1", force=True)
    await admit(client, ref(project, "s2"), lease_ttl=300)
    failed = (await admit(client, ref(project, "s3"))).lease
    await complete(client, failed, pb.TURN_OUTCOME_FAILED, "boom")
    await done_turn(client, ref(project, "s4"))
    await admit(client, ref(project, "s4"), "t2", lease_ttl=300)
    await done_turn(client, ref(project, "s5"))

    await listed_as(client, project, ["s5", "s4", "s3", "s2", "s1", "s0"])
    pages = await every_page(client, project, 4)

    assert [len(page.sessions) for page in pages] == [4, 2]
    assert [bool(page.next_page_token) for page in pages] == [True, False]
    summaries = {s.snapshot.session.session_id: s for page in pages for s in page.sessions}
    times = [s.last_activity_at.ToMicroseconds() for page in pages for s in page.sessions]
    assert times == sorted(times, reverse=True)
    shown = {
        name: (
            s.snapshot.phase,
            s.snapshot.active.turn_id,
            s.snapshot.last_settled.turn_id,
            s.snapshot.last_settled.outcome,
        )
        for name, s in summaries.items()
    }
    assert shown == {
        "s5": (pb.SESSION_PHASE_IDLE, "", "t1", pb.TURN_OUTCOME_COMPLETED),
        "s4": (pb.SESSION_PHASE_RUNNING, "t2", "t1", pb.TURN_OUTCOME_COMPLETED),
        "s3": (pb.SESSION_PHASE_IDLE, "", "t1", pb.TURN_OUTCOME_FAILED),
        "s2": (pb.SESSION_PHASE_RUNNING, "t1", "", pb.TURN_OUTCOME_UNSPECIFIED),
        "s1": (pb.SESSION_PHASE_IDLE, "", "t1", pb.TURN_OUTCOME_CANCELLED),
        "s0": (pb.SESSION_PHASE_IDLE, "", "t1", pb.TURN_OUTCOME_COMPLETED),
    }
    for name, summary in summaries.items():
        got = await client.sessions.GetSession(pb.GetSessionRequest(session=ref(project, name)))
        assert summary.snapshot == got.snapshot, f"{name}: the listing shows what GetSession does"

    await done_turn(client, ref(project, "s0"), "t2")
    await listed_as(client, project, ["s0", "s5", "s4", "s3", "s2", "s1"])


async def paging_lists_no_session_twice_and_each_untouched_one_once_while_new_activity_arrives(
    client: Client,
) -> None:
    project = new_project()
    names = [f"s{index:02}" for index in range(30)]
    for name in names:
        await done_turn(client, ref(project, name))
    newest_first = names[::-1]
    await listed_as(client, project, newest_first)

    first = await client.sessions.ListSessions(pb.ListSessionsRequest(project_id=project, page_size=7))
    seen = [s.snapshot.session.session_id for s in first.sessions]
    assert seen == newest_first[:7]
    # New activity on a session the first page listed, and on one a later page would have listed.
    await done_turn(client, ref(project, "s25"), "t2")
    await done_turn(client, ref(project, "s10"), "t2")
    token = first.next_page_token
    while token:
        page = await client.sessions.ListSessions(
            pb.ListSessionsRequest(project_id=project, page_size=7, page_token=token)
        )
        seen += [s.snapshot.session.session_id for s in page.sessions]
        token = page.next_page_token

    assert len(seen) == len(set(seen)), f"a session listed twice: {seen}"
    untouched = [name for name in newest_first if name not in ("s25", "s10")]
    assert [name for name in seen if name not in ("s25", "s10")] == untouched
    assert "s25" in seen
    # s10 moved ahead of the listing's cursor once recorded: the next listing starts with it.
    await listed_as(client, project, ["s10", "s25", *untouched])


async def projects_that_have_sessions_page_in_id_order_with_their_last_activity(client: Client) -> None:
    prefix = new_project()
    projects = [f"{prefix}-b", f"{prefix}-a", f"{prefix}-c"]
    for project in projects:
        await done_turn(client, ref(project, "s1"))
    await done_turn(client, ref(projects[0], "s2"))
    # Each project's last event: its last turn's settlement (s2's in the first project).
    last_sessions = {projects[0]: "s2", projects[1]: "s1", projects[2]: "s1"}
    last_settled = {
        project: (await get_turn(client, ref(project, session_id), "t1")).settled_at
        for project, session_id in last_sessions.items()
    }
    start = page_tokens.projects_page_token(prefix)  # just before this test's projects

    async def mine() -> list[pb.ProjectSummary]:
        found: list[pb.ProjectSummary] = []
        token = start
        while token:
            page = await client.sessions.ListProjects(pb.ListProjectsRequest(page_size=1, page_token=token))
            ours = [p for p in page.projects if p.project_id.startswith(prefix)]
            found += ours
            token = page.next_page_token if ours else ""
        return found

    async def all_recorded() -> bool:
        # The projector may record a turn's admission and its settlement in separate batches.
        summaries = await mine()
        return [p.project_id for p in summaries] == sorted(projects) and all(
            p.last_activity_at == last_settled[p.project_id] for p in summaries
        )

    await recorded(all_recorded)
    for summary in await mine():
        newest = await client.sessions.ListSessions(pb.ListSessionsRequest(project_id=summary.project_id))
        assert summary.last_activity_at == newest.sessions[0].last_activity_at
    everything = await client.sessions.ListProjects(pb.ListProjectsRequest(page_size=500))
    listed = [p.project_id for p in everything.projects]
    assert listed == sorted(listed)
    assert listed.count(projects[1]) == 1


async def a_project_without_sessions_lists_none(client: Client) -> None:
    project = new_project()

    async def empty() -> bool:
        page = await client.sessions.ListSessions(pb.ListSessionsRequest(project_id=project))
        return (list(page.sessions), page.next_page_token) == ([], "")

    await recorded(empty)


SCENARIOS = [
    busy_and_idle_sessions_page_newest_activity_first_with_their_state,
    paging_lists_no_session_twice_and_each_untouched_one_once_while_new_activity_arrives,
    projects_that_have_sessions_page_in_id_order_with_their_last_activity,
    a_project_without_sessions_lists_none,
]
NAMES = [scenario.__name__ for scenario in SCENARIOS]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=NAMES)
async def test_list_sessions_and_projects_on_the_shared_stores(client: Client, scenario: Scenario) -> None:
    await scenario(client)


@asynccontextmanager
async def on_postgresql(root: Path) -> AsyncIterator[Client]:
    async with postgres_database("turngate_list") as name:
        async for _, client in running(settings_for(str(root), store=postgres_url(name))):
            yield client


@pytest.fixture(scope="module")
async def postgresql_client(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Client]:
    """A server whose store (and history) is a PostgreSQL database of this module's own."""
    async with on_postgresql(tmp_path_factory.mktemp("list-postgresql")) as client:
        yield client


@pytest.mark.postgres
@pytest.mark.parametrize("scenario", SCENARIOS, ids=NAMES)
async def test_list_sessions_and_projects_on_postgresql(
    postgresql_client: Client, scenario: Scenario
) -> None:
    await scenario(postgresql_client)
