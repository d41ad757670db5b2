"""ListActiveSessions: what an operator looks at first — busy sessions, earliest deadline first."""

from __future__ import annotations

import uuid

from tests.support.calls import admit, stop
from tests.support.servers import Client
from turngate.v1 import turngate_pb2 as pb


async def test_list_active_sessions_pages_busy_sessions_earliest_deadline_first(client: Client) -> None:
    project = f"ops-{uuid.uuid4().hex[:8]}"
    for name, lease in (("late", 300), ("early", 100), ("middle", 200)):
        await admit(client, pb.SessionRef(project_id=project, session_id=name), lease_ttl=lease)
    idle = pb.SessionRef(project_id=project, session_id="idle")
    await admit(client, idle)
    await stop(client, idle, "t1", force=True)

    def page(token: str = "") -> pb.ListActiveSessionsRequest:
        return pb.ListActiveSessionsRequest(project_id=project, page_size=2, page_token=token)

    first = await client.sessions.ListActiveSessions(page())
    rest = await client.sessions.ListActiveSessions(page(first.next_page_token))

    listed = [*first.sessions, *rest.sessions]
    assert [s.session.session_id for s in listed] == ["early", "middle", "late"]
    assert all(s.phase == pb.SESSION_PHASE_RUNNING and s.active.turn_id == "t1" for s in listed)
    assert first.next_page_token
    assert not rest.next_page_token
