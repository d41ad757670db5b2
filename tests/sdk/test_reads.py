"""Reads through the SDK (what an operator's tools show), and bad input as a typed error."""

from __future__ import annotations

import pytest

from tests.support.calls import admit, complete
from tests.support.servers import Client as Raw
from turngate.client import Client, InvalidRequest, NotFound, SessionPhase, TurnOutcome
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


async def test_bad_input_raises_invalid_request_naming_the_field(client: Client) -> None:
    with pytest.raises(InvalidRequest) as bad:
        async with client.runner("r1").turn("not a valid id", "t1"):
            pytest.fail("admitted")
    assert [field for field, _ in bad.value.violations] == ["session.session_id"]
