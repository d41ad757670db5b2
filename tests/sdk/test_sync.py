"""The synchronous wrapper, driven from a thread as non-async code would: the same turn, Stop,
outcomes, watch and reads as the async SDK."""

from __future__ import annotations

import asyncio
from itertools import islice

import pytest

from tests.sdk.conftest import PROJECT
from tests.support.backoff import FAST
from tests.support.calls import events_after, get_turn, kinds
from tests.support.servers import Client as Raw
from turngate.client import Cancelled, TurnOutcome
from turngate.client.sync import Client
from turngate.v1 import turngate_pb2 as pb


class Boom(Exception):
    pass


def stopped_turn(target: str, session_id: str) -> tuple[TurnOutcome | None, str]:
    with Client(target, PROJECT, backoff=FAST) as client:
        with client.runner("r1").turn(session_id, "t1") as turn:
            with turn.tool_call("c1", "search"):
                pass
            answer = client.gateway().stop(session_id, expected_turn_id="t1", reason="user")
            assert isinstance(answer, Cancelled)
            assert turn.stop_requested.wait(5)
        return turn.outcome, turn.stop_reason


def failed_turn(target: str, session_id: str) -> TurnOutcome | None:
    with Client(target, PROJECT, backoff=FAST) as client:
        with pytest.raises(Boom), client.runner("r1").turn(session_id, "t2") as turn:
            raise Boom("sync")
        return turn.outcome


def watched(target: str, session_id: str) -> tuple[list[str], list[str]]:
    with Client(target, PROJECT, backoff=FAST) as client, client.watch(session_id, after_seq=1) as events:
        seen = [e.kind for e in islice(events, 4)]
        return seen, [t.turn_id for t in client.list_turns(session_id, page_size=1)]


async def test_sync_turn_records_its_tool_call_sees_the_stop_and_settles_cancelled(
    target: str, raw: Raw, ref: pb.SessionRef
) -> None:
    outcome, reason = await asyncio.to_thread(stopped_turn, target, ref.session_id)
    assert (outcome, reason) == (TurnOutcome.CANCELLED, "user")
    calls = (await get_turn(raw, ref, "t1")).tool_calls
    assert [(c.call_id, c.status) for c in calls] == [("c1", pb.TOOL_CALL_STATUS_SUCCEEDED)]

    assert await asyncio.to_thread(failed_turn, target, ref.session_id) == TurnOutcome.FAILED
    assert (await get_turn(raw, ref, "t2")).error == "Boom: sync"

    seen, listed = await asyncio.to_thread(watched, target, ref.session_id)
    assert seen == kinds(await events_after(raw, ref, 1))[:4]
    assert listed == ["t2", "t1"]
