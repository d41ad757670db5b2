"""The embedded store group-commits the commands queued together (store/sqlite.py): a `turngate
serve` killed by SIGKILL while many callers write, so while batches are being written and
committed, loses no acknowledged write, and leaves every session whole (its document, its events
and its ledger rows all there, or none of them).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc

from tests.support.processes import database, spawn_server, sqlite_file
from tests.support.servers import Client
from tests.support.waiting import eventually
from turngate.v1 import turngate_pb2 as pb

PROJECT = "p-crash"
CALLERS = 32
# Admissions acknowledged before the kill: enough that batches of many commands are in flight.
ACKNOWLEDGED_BEFORE_KILL = 400


async def admit_until_the_server_dies(client: Client, caller: int, acknowledged: dict[str, int]) -> None:
    """Admits a turn on a new session after another; records each acknowledged lease's generation."""
    n = 0
    while True:
        ref = pb.SessionRef(project_id=PROJECT, session_id=f"c{caller}-{n}")
        try:
            reply = await client.admission.AdmitTurn(
                pb.AdmitTurnRequest(session=ref, turn_id="t1", runner_id="runner")
            )
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            return
        acknowledged[ref.session_id] = reply.lease.generation
        n += 1


async def test_sigkill_while_batches_commit_loses_no_acknowledged_write_and_leaves_every_session_whole(
    tmp_path: Path,
) -> None:
    acknowledged: dict[str, int] = {}
    async with spawn_server(tmp_path) as server:
        callers = [
            asyncio.create_task(admit_until_the_server_dies(server.client, caller, acknowledged))
            for caller in range(CALLERS)
        ]
        await eventually(lambda: len(acknowledged) >= ACKNOWLEDGED_BEFORE_KILL)
        await server.kill()
        await asyncio.gather(*callers)

    with sqlite_file(database(tmp_path)) as conn:
        documents = dict(
            conn.execute(
                "SELECT session_id, version FROM sessions WHERE project_id = ?", (PROJECT,)
            ).fetchall()
        )
        events = dict(
            conn.execute(
                "SELECT session_id, count(*) FROM session_events WHERE project_id = ? GROUP BY session_id",
                (PROJECT,),
            ).fetchall()
        )
        turns = dict(
            conn.execute(
                "SELECT session_id, generation FROM turns WHERE project_id = ? AND turn_id = 't1'", (PROJECT,)
            ).fetchall()
        )
    assert set(acknowledged) <= set(documents), "every acknowledged admission was committed"
    # Whole: each written session has its one write's document, event and turn row, no more, no less.
    assert set(documents) == set(events) == set(turns)
    assert set(documents.values()) == {1}
    assert set(events.values()) == {1}
    assert {session: turns[session] for session in acknowledged} == acknowledged

    async with spawn_server(tmp_path) as restarted:
        for session_id, generation in acknowledged.items():
            reply = await restarted.client.sessions.GetSession(
                pb.GetSessionRequest(session=pb.SessionRef(project_id=PROJECT, session_id=session_id))
            )
            active = reply.snapshot.active
            assert (active.turn_id, active.generation, active.phase) == (
                "t1",
                generation,
                pb.TURN_PHASE_RUNNING,
            )
