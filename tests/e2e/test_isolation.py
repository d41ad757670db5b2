"""I11 tenant isolation through real gRPC calls: one session_id in two projects is two sessions."""

from __future__ import annotations

import grpc
import pytest

from tests.support.calls import (
    admit,
    assert_reason,
    complete,
    events_after,
    get_turn,
    heartbeat,
    record_call,
    record_interaction,
    refused,
    resolve,
    snapshot,
    state_of,
    stop,
)
from tests.support.servers import Client
from turngate.v1 import turngate_pb2 as pb


async def test_i11_the_same_session_id_in_two_projects_is_two_sessions_neither_sees_the_other(
    client: Client, session: pb.SessionRef
) -> None:
    ours = pb.SessionRef(project_id="p-ours", session_id=session.session_id)
    theirs = pb.SessionRef(project_id="p-theirs", session_id=session.session_id)
    lease = (await admit(client, ours, "t1", "r1")).lease
    await record_call(client, lease, "c1")
    await record_interaction(client, lease, "i1")
    await stop(client, ours, "t-tombstoned")
    ours_before = await state_of(client, ours, "t1")

    # Nothing of ours is readable from their project.
    empty = await snapshot(client, theirs)
    assert (empty.seq, empty.phase, empty.HasField("active")) == (0, pb.SESSION_PHASE_IDLE, False)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await get_turn(client, theirs, "t1")
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert not (await client.sessions.ListTurns(pb.ListTurnsRequest(session=theirs))).turns
    # Nothing of ours can be changed from their project.
    assert (await stop(client, theirs)).WhichOneof("outcome") == "idle"
    assert_reason(await refused(resolve(client, theirs, "i1")), "INTERACTION_NOT_PENDING")
    our_lease_their_session = pb.TurnLease(session=theirs, turn_id="t1", generation=lease.generation)
    assert (await heartbeat(client, our_lease_their_session)).directive == pb.DIRECTIVE_ABANDON
    assert_reason(await refused(record_call(client, our_lease_their_session, "c2")), "TURN_NOT_ACTIVE")
    # Their turns live beside ours: same turn ids, another runner, our tombstone does not apply.
    await admit(client, theirs, "t1", "r2")
    await stop(client, theirs, "t1", force=True)
    await complete(client, (await admit(client, theirs, "t-tombstoned", "r2")).lease)

    assert await state_of(client, ours, "t1") == ours_before  # our log did not move either
    assert (await get_turn(client, theirs, "t1")).runner_id == "r2"
    their_events = await events_after(client, theirs, 1)
    assert {e.session.project_id for e in their_events} == {"p-theirs"}
    assert their_events[-1].turn_settled.turn.turn_id == "t-tombstoned"
