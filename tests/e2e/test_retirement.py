"""Retirement end to end (docs/design.md §8), on the embedded store and in redis mode (with its
projector and ledger): a session idle for TURNGATE_IDLE_RETENTION leaves the store; its history
still answers GetSession, GetTurn, ListTurns and a Stop (R2); a watcher resuming across the
removal gets a resync snapshot; the session comes back at a new epoch with a greater generation
(I2)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from tests.support.calls import admit, complete, get_turn, record_call, snapshot, stop
from tests.support.served import serving_on
from tests.support.servers import Client
from tests.support.waiting import eventually
from tests.support.watching import collect
from turngate.service.server import TurngateServer
from turngate.v1 import turngate_pb2 as pb

# Seconds: short enough to wait for, as the issue asks ("retention of a few seconds").
IDLE_RETENTION = 1.0
SESSION = pb.SessionRef(project_id="p-retire", session_id="s1")
# Long enough for the projector to record the log (redis mode) and the retirement pass to come.
LEAVES_WITHIN_S = 20.0


@asynccontextmanager
async def retiring_server(store_url: str | None, root: Path) -> AsyncIterator[tuple[TurngateServer, Client]]:
    async for pair in serving_on(store_url, root, idle_retention=IDLE_RETENTION):
        yield pair


async def left_the_store(client: Client, session: pb.SessionRef) -> bool:
    """A session the store no longer holds reads as never written: epoch 0."""
    return (await snapshot(client, session)).epoch == 0


async def test_r1_r2_i2_an_idle_session_leaves_its_history_answers_and_it_comes_back_afresh(
    store_url: str | None, tmp_path: Path
) -> None:
    async with retiring_server(store_url, tmp_path) as (_, client):
        first = await admit(client, SESSION, "t1")
        await record_call(client, first.lease, "c1")
        await complete(client, first.lease)
        before = await snapshot(client, SESSION)

        await eventually(lambda: left_the_store(client, SESSION), timeout_s=LEAVES_WITHIN_S)

        gone = await snapshot(client, SESSION)
        assert (gone.seq, gone.phase) == (0, pb.SESSION_PHASE_IDLE)
        assert gone.last_settled.turn_id == "t1", "GetSession: the last turn, from history"
        assert gone.last_settled.outcome == pb.TURN_OUTCOME_COMPLETED
        turn = await get_turn(client, SESSION, "t1")
        assert [call.call_id for call in turn.tool_calls] == ["c1"]
        listed = await client.sessions.ListTurns(pb.ListTurnsRequest(session=SESSION))
        assert [t.turn_id for t in listed.turns] == ["t1"]
        stopped = await stop(client, SESSION, "t1")
        assert stopped.WhichOneof("outcome") == "idle"
        assert (stopped.idle.last_turn_id, stopped.idle.expected_outcome) == ("t1", pb.TURN_OUTCOME_COMPLETED)

        resumed = client.sessions.WatchSession(
            pb.WatchSessionRequest(session=SESSION, after_seq=before.seq, epoch=before.epoch)
        )
        [resync] = await collect(resumed, 1)
        assert resync.snapshot.resync, "never a silent gap"
        resumed.cancel()

        again = await admit(client, SESSION, "t2")
        assert again.lease.generation > first.lease.generation
        back = await snapshot(client, SESSION)
        assert back.epoch > before.epoch
        assert back.seq == 1


async def test_r2_list_sessions_still_lists_a_session_that_left_the_store_with_its_last_turn_from_history(
    store_url: str | None, tmp_path: Path
) -> None:
    session = pb.SessionRef(project_id="p-retire-list", session_id="s1")
    async with retiring_server(store_url, tmp_path) as (_, client):
        await complete(client, (await admit(client, session, "t1")).lease)
        await eventually(lambda: left_the_store(client, session), timeout_s=LEAVES_WITHIN_S)

        page = await client.sessions.ListSessions(pb.ListSessionsRequest(project_id=session.project_id))

        [listed] = page.sessions
        assert listed.snapshot == await snapshot(client, session), "as GetSession shows it"
        assert (listed.snapshot.epoch, listed.snapshot.phase) == (0, pb.SESSION_PHASE_IDLE)
        assert (listed.snapshot.last_settled.turn_id, listed.snapshot.last_settled.outcome) == (
            "t1",
            pb.TURN_OUTCOME_COMPLETED,
        )
        assert listed.last_activity_at == listed.snapshot.last_settled.settled_at


async def test_r1_a_session_a_turn_holds_never_leaves(store_url: str | None, tmp_path: Path) -> None:
    async with retiring_server(store_url, tmp_path) as (server, client):
        held = await admit(client, SESSION, "t1", lease_ttl=60.0)
        await asyncio.sleep(4 * IDLE_RETENTION)  # several retirement passes (one per half retention)

        state = await snapshot(client, SESSION)
        assert state.active.turn_id == "t1"
        assert state.active.generation == held.lease.generation
        assert server.supervisor.restarts().get("retirement", 0) == 0, "its loop never failed"
