"""Restart and failure behaviour (docs/design.md §5) with a real `turngate serve` process killed by
SIGKILL: nothing acknowledged is lost, the watchdog settles what expired exactly once, runners
carry on within their lease, and a start with nothing due writes nothing.
"""

from __future__ import annotations

from pathlib import Path

from google.protobuf.duration_pb2 import Duration

from tests.support.calls import (
    admit,
    complete,
    events_after,
    get_turn,
    heartbeat,
    record_call,
    settlements,
    sleep_past,
    snapshot,
    state_of,
    wait_for_phase,
)
from tests.support.processes import database, dump, spawn_server
from tests.support.servers import Client
from tests.support.watching import collect, collect_until, settles, watch
from turngate.v1 import turngate_pb2 as pb

SESSION = pb.SessionRef(project_id="p-restart", session_id="s1")
# A lease (seconds) that outlasts killing a server and starting another, also on a busy machine
# (3 s, and later 6 s, once ran out while the second server started).
OUTLASTING_A_RESTART = "15"
# What a runner's last heartbeat leaves of its lease, for it to end while the test watches.
LAST_HEARTBEAT_TTL = Duration(seconds=1)


async def recorded_history(client: Client, session: pb.SessionRef, *turn_ids: str) -> list[bytes]:
    """What a client can read of the session: its snapshot, its turns, and its event log."""
    listed = await client.sessions.ListTurns(pb.ListTurnsRequest(session=session))
    log = await events_after(client, session, 1)
    serialized = [m.SerializeToString(deterministic=True) for m in (listed, *log)]
    return [*await state_of(client, session, *turn_ids), *serialized]


async def test_restart_mid_turn_keeps_the_lease_then_settles_lost_once_and_later_starts_write_nothing(
    tmp_path: Path,
) -> None:
    async with spawn_server(tmp_path, "--lease-ttl", OUTLASTING_A_RESTART) as first:
        admitted = await admit(first.client, SESSION, "t1")
        await record_call(first.client, admitted.lease, "c1")
        await first.kill()

    async with spawn_server(tmp_path, "--lease-ttl", OUTLASTING_A_RESTART) as second:
        active = (await snapshot(second.client, SESSION)).active
        assert (active.turn_id, active.generation, active.phase) == (
            "t1",
            admitted.lease.generation,
            pb.TURN_PHASE_RUNNING,
        )
        assert active.lease_expires_at == admitted.lease_expires_at
        assert [c.status for c in (await get_turn(second.client, SESSION, "t1")).tool_calls] == [
            pb.TOOL_CALL_STATUS_OPEN
        ]

        stream = watch(second.client, SESSION)
        await collect(stream, 1)
        last = pb.HeartbeatRequest(lease=admitted.lease, lease_ttl=LAST_HEARTBEAT_TTL)
        await second.client.admission.Heartbeat(last)
        settled = (await collect_until(stream, settles("t1")))[-1].turn_settled
        assert (settled.turn.outcome, settled.turn.settled_by) == (
            pb.TURN_OUTCOME_LOST,
            pb.SETTLED_BY_WATCHDOG,
        )
        assert list(settled.interrupted_tool_call_ids) == ["c1"]
        assert len(settlements(await events_after(second.client, SESSION, 1))) == 1
        calls = (await get_turn(second.client, SESSION, "t1")).tool_calls
        assert [(c.call_id, c.status, c.error) for c in calls] == [
            ("c1", pb.TOOL_CALL_STATUS_INTERRUPTED, "")
        ]
        history = await recorded_history(second.client, SESSION, "t1")
        stream.cancel()
    stored = dump(database(tmp_path))

    for _ in range(2):
        async with spawn_server(tmp_path, "--lease-ttl", OUTLASTING_A_RESTART) as again:
            assert await recorded_history(again.client, SESSION, "t1") == history
        assert dump(database(tmp_path)) == stored


async def test_restart_runner_heartbeat_within_the_lease_continues_its_turn(tmp_path: Path) -> None:
    async with spawn_server(tmp_path, "--lease-ttl", OUTLASTING_A_RESTART) as first:
        admitted = await admit(first.client, SESSION, "t1")
        await first.kill()

    async with spawn_server(tmp_path, "--lease-ttl", OUTLASTING_A_RESTART) as second:
        beat = await heartbeat(second.client, admitted.lease)
        assert beat.directive == pb.DIRECTIVE_CONTINUE
        assert beat.lease_expires_at.ToMicroseconds() > admitted.lease_expires_at.ToMicroseconds()
        done = await complete(second.client, admitted.lease)
        assert done.recorded
        assert (done.turn.outcome, done.turn.settled_by) == (pb.TURN_OUTCOME_COMPLETED, pb.SETTLED_BY_RUNNER)


async def test_restart_settles_a_turn_whose_lease_expired_while_the_server_was_down(tmp_path: Path) -> None:
    async with spawn_server(tmp_path, "--lease-ttl", "1") as first:
        admitted = await admit(first.client, SESSION, "t1")
        await record_call(first.client, admitted.lease, "c1")
        await first.kill()
    await sleep_past(admitted.lease_expires_at)

    async with spawn_server(tmp_path, "--lease-ttl", "1") as second:
        # GetSession only reads: the watchdog's reconciliation on start is what settles the turn.
        last = (await wait_for_phase(second.client, SESSION, pb.SESSION_PHASE_IDLE)).last_settled
        assert (last.turn_id, last.outcome, last.settled_by) == (
            "t1",
            pb.TURN_OUTCOME_LOST,
            pb.SETTLED_BY_WATCHDOG,
        )
        calls = (await get_turn(second.client, SESSION, "t1")).tool_calls
        assert [c.status for c in calls] == [pb.TOOL_CALL_STATUS_INTERRUPTED]
