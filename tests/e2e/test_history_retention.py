"""History retention end to end: a server with a retention forgets a settled turn once it is older
(GetTurn NOT_FOUND, ListTurns without it, a watcher resuming from a pruned cursor resynced), while
a session whose turn still runs keeps that turn's history, however old, and goes on; in redis
mode, the ledger the projector writes is pruned the same."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import pytest

from tests.support.calls import admit, complete, get_turn, head_of, heartbeat, record_call
from tests.support.servers import Client, pruning_often, running, settings_for
from tests.support.shared_redis import REDIS_SERVER, prefix_on_shared_redis
from tests.support.waiting import eventually
from tests.support.watching import collect, collect_until, settles, watch
from turngate.service.server import TurngateServer
from turngate.v1 import turngate_pb2 as pb

RETENTION_S = 1.0


@pytest.fixture
async def pruning(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[TurngateServer, Client]]:
    """A server of the test's own whose history retention prunes every 50 ms."""
    settings = settings_for(str(tmp_path_factory.mktemp("retention")))
    async for pair in running(pruning_often(settings, RETENTION_S, monkeypatch)):
        yield pair


async def turns_of(client: Client, session: pb.SessionRef) -> list[str]:
    listed = await client.sessions.ListTurns(pb.ListTurnsRequest(session=session))
    return [turn.turn_id for turn in listed.turns]


async def forgotten(client: Client, session: pb.SessionRef) -> bool:
    return await turns_of(client, session) == []


async def test_a_settled_turn_older_than_the_retention_is_forgotten_while_a_running_turn_goes_on(
    pruning: tuple[TurngateServer, Client], caplog: pytest.LogCaptureFixture
) -> None:
    server, client = pruning
    live = pb.SessionRef(project_id="p-e2e", session_id="live")
    done = pb.SessionRef(project_id="p-e2e", session_id="done")
    running_lease = (await admit(client, live, "long", lease_ttl=60)).lease
    await record_call(client, running_lease, "early")
    watcher = watch(client, live)
    assert (await collect(watcher, 1))[0].HasField("snapshot")

    finished = (await admit(client, done, "t1")).lease
    await record_call(client, finished, "c1")
    await complete(client, finished)
    assert await turns_of(client, done) == ["t1"]

    with caplog.at_level(logging.INFO, logger="turngate.retention"):
        # Once it has aged past the retention and a prune has run since; the pass logs once it has
        # ended, after its deletes are visible.
        await eventually(lambda: forgotten(client, done), timeout_s=RETENTION_S + 10.0)
        await eventually(
            lambda: any("history retention pruned 1 turns" in r.getMessage() for r in caplog.records)
        )

    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await get_turn(client, done, "t1")
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    resumed = watch(client, done, after_seq=1)
    [resync] = await collect(resumed, 1)
    assert resync.snapshot.resync
    assert resync.seq == resync.snapshot.seq == await head_of(client, done)
    resumed.cancel()
    assert server.backend.retention is not None
    assert server.backend.retention.pruned.turns >= 1

    # The running turn, admitted before the pruned one, kept everything and goes on.
    assert (await heartbeat(client, running_lease)).directive == pb.DIRECTIVE_CONTINUE
    await record_call(client, running_lease, "late")
    await complete(client, running_lease)
    followed = await collect_until(watcher, settles("long"))
    assert not any(event.HasField("snapshot") for event in followed)
    turn = await get_turn(client, live, "long")
    assert turn.outcome == pb.TURN_OUTCOME_COMPLETED
    assert [call.call_id for call in turn.tool_calls] == ["early", "late"]
    watcher.cancel()


async def listed(client: Client, project: str) -> list[str]:
    page = await client.sessions.ListSessions(pb.ListSessionsRequest(project_id=project))
    return [summary.snapshot.session.session_id for summary in page.sessions]


async def projects(client: Client) -> list[str]:
    page = await client.sessions.ListProjects(pb.ListProjectsRequest())
    return [project.project_id for project in page.projects]


async def test_a_session_whose_history_is_pruned_leaves_list_sessions_one_whose_turn_runs_stays(
    pruning: tuple[TurngateServer, Client],
) -> None:
    _, client = pruning
    live = pb.SessionRef(project_id="p-listed", session_id="live")
    done = pb.SessionRef(project_id="p-listed", session_id="done")
    gone = pb.SessionRef(project_id="p-gone", session_id="done")
    running_lease = (await admit(client, live, "long", lease_ttl=60)).lease
    for session in (done, gone):
        await complete(client, (await admit(client, session, "t1")).lease)
    assert await listed(client, "p-listed") == ["done", "live"]
    assert await projects(client) == ["p-gone", "p-listed"]

    async def pruned() -> bool:
        return await listed(client, "p-listed") == ["live"] and await listed(client, "p-gone") == []

    await eventually(pruned, timeout_s=RETENTION_S + 10.0)

    assert await projects(client) == ["p-listed"]
    await complete(client, running_lease)
    assert await listed(client, "p-listed") == ["live"], "its new event keeps it"


@pytest.mark.redis
async def test_in_redis_mode_the_ledger_forgets_a_settled_turn_older_than_the_retention(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = pb.SessionRef(project_id="p-e2e", session_id="done")
    async with prefix_on_shared_redis() as prefix:
        ledger = f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}"
        settings = settings_for(str(tmp_path), store=REDIS_SERVER, ledger=ledger, redis_prefix=prefix)
        serving = asynccontextmanager(running)(pruning_often(settings, RETENTION_S, monkeypatch))
        async with serving as (server, client):
            lease = (await admit(client, session, "t1")).lease
            await complete(client, lease)
            assert await turns_of(client, session) == ["t1"]

            await eventually(lambda: forgotten(client, session), timeout_s=RETENTION_S + 10.0)

            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await get_turn(client, session, "t1")
            assert caught.value.code() == grpc.StatusCode.NOT_FOUND
            retention = server.backend.retention
            assert retention is not None
            # The pass counts what it deleted once its deletes are visible.
            await eventually(lambda: (retention.pruned.turns, retention.pruned.session_activity) == (1, 1))
            assert await listed(client, session.project_id) == []
