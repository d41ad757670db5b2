"""The runner SDK against a real server: admission refusals as typed errors, Stop delivered by
push, exactly one outcome, tool calls closed or interrupted, and a lease that is lost is let go
of without a retried write."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.sdk.conftest import PROJECT
from tests.sdk.wire import Wire
from tests.support.backoff import FAST
from tests.support.calls import (
    admit,
    complete,
    events_after,
    get_turn,
    kinds,
    settlements,
    stop,
    wait_for_phase,
)
from tests.support.servers import Client as Raw
from tests.support.servers import OwnServer
from tests.support.waiting import eventually
from turngate.client import (
    AdmissionRefused,
    Client,
    InteractionCancelled,
    SessionBusy,
    SettledBy,
    TurnAlreadySettled,
    TurnCancelled,
    TurnEnded,
    TurnOutcome,
    TurnOwnedByOtherRunner,
    TurnPhase,
)
from turngate.v1 import turngate_pb2 as pb

# Stop must reach the runner by push, long before the first heartbeat (lease 30 s: every 10 s).
PUSH_LEASE_S = 30.0
# The issue asks for 50 ms; measured here at ~5 ms (CancelTurn's round trip included). The bound
# is 5x the issue's, for slow CI machines, and still 40x shorter than the first heartbeat: what
# proves the push path is that no heartbeat was sent at all.
PUSH_BOUND_S = 0.25


class Boom(Exception):
    pass


async def asked(raw: Raw, ref: pb.SessionRef, interaction_id: str) -> None:
    """Waits until the service holds the interaction PENDING."""

    async def pending() -> bool:
        interactions = (await get_turn(raw, ref, "t1")).interactions
        return any(
            (i.interaction_id, i.status) == (interaction_id, pb.INTERACTION_STATUS_PENDING)
            for i in interactions
        )

    await eventually(pending)


async def test_busy_session_refuses_admission_with_session_busy_naming_the_active_turn(
    client: Client, raw: Raw, ref: pb.SessionRef, session_id: str
) -> None:
    async with client.runner("r1").turn(session_id, "t1", lease_ttl=PUSH_LEASE_S):
        with pytest.raises(SessionBusy) as refused:
            async with client.runner("r2").turn(session_id, "t2"):
                pytest.fail("a second turn was admitted")
        busy = refused.value
        assert isinstance(busy, AdmissionRefused)
        assert (busy.reason, busy.active_turn_id, busy.active_phase) == (
            "SESSION_TURN_IN_USE",
            "t1",
            TurnPhase.RUNNING,
        )
        assert not busy.stopping
        assert PUSH_LEASE_S - 2 < busy.retry_after <= PUSH_LEASE_S
        assert busy.active_lease_expires_at is not None
        assert (await get_turn(raw, ref, "t1")).phase == pb.TURN_PHASE_RUNNING


async def test_refusals_of_a_cancelled_settled_or_foreign_turn_are_typed(
    client: Client, raw: Raw, ref: pb.SessionRef, session_id: str
) -> None:
    await stop(raw, ref, "early")
    with pytest.raises(TurnCancelled):
        async with client.runner("r1").turn(session_id, "early"):
            pytest.fail("a tombstoned turn was admitted")

    async with client.runner("r1").turn(session_id, "t1"):
        with pytest.raises(TurnOwnedByOtherRunner) as foreign:
            async with client.runner("r2").turn(session_id, "t1"):
                pytest.fail("another runner took the turn")
        assert foreign.value.active_turn_id == "t1"

    with pytest.raises(TurnAlreadySettled) as settled:
        async with client.runner("r1").turn(session_id, "t1"):
            pytest.fail("a settled turn ran again")
    assert settled.value.outcome == TurnOutcome.COMPLETED


async def test_stop_reaches_stop_requested_by_push_before_any_heartbeat(
    client: Client, wire: Wire, session_id: str
) -> None:
    async with client.runner("r1").turn(session_id, "t1", lease_ttl=PUSH_LEASE_S) as turn:
        assert turn.heartbeat_interval == pytest.approx(PUSH_LEASE_S / 3)
        started = time.perf_counter()
        await client.gateway().stop(session_id, expected_turn_id="t1", reason="user pressed stop")
        await turn.stop_requested.wait()
        latency = time.perf_counter() - started
        assert wire.sent["Heartbeat"] == 0
        assert latency < PUSH_BOUND_S, f"Stop took {latency * 1000:.1f} ms to reach the runner"
        assert turn.stop_reason == "user pressed stop"
        print(f"Stop -> turn.stop_requested: {latency * 1000:.1f} ms")


async def test_leaving_after_stop_records_cancelled_exactly_once(
    client: Client, raw: Raw, ref: pb.SessionRef, session_id: str, wire: Wire
) -> None:
    async with client.runner("r1").turn(session_id, "t1") as turn:
        await client.gateway().stop(session_id, expected_turn_id="t1")
        await turn.stop_requested.wait()

    assert turn.outcome == TurnOutcome.CANCELLED
    assert turn.settled is not None
    assert turn.settled.settled_by == SettledBy.RUNNER
    assert wire.sent["CompleteTurn"] == 1
    [settled] = settlements(await events_after(raw, ref, 1))
    assert (settled.turn.outcome, settled.turn.stop_requested) == (pb.TURN_OUTCOME_CANCELLED, True)


async def test_leaving_normally_records_completed(client: Client, raw: Raw, ref: pb.SessionRef) -> None:
    async with client.runner("r1").turn(ref.session_id, "t1") as turn:
        pass
    assert turn.outcome == TurnOutcome.COMPLETED
    assert (await get_turn(raw, ref, "t1")).outcome == pb.TURN_OUTCOME_COMPLETED


async def test_an_exception_inside_records_failed_with_its_text_and_is_reraised(
    client: Client, raw: Raw, ref: pb.SessionRef
) -> None:
    with pytest.raises(Boom):
        async with client.runner("r1").turn(ref.session_id, "t1") as turn:
            raise Boom("the model said no" + "!" * 2000)

    recorded = await get_turn(raw, ref, "t1")
    assert (turn.outcome, recorded.outcome) == (TurnOutcome.FAILED, pb.TURN_OUTCOME_FAILED)
    assert recorded.error.startswith("Boom: the model said no!")
    assert len(recorded.error.encode()) == 1024


async def test_tool_calls_record_open_then_succeeded_or_failed_with_the_error(
    client: Client, raw: Raw, ref: pb.SessionRef
) -> None:
    async with client.runner("r1").turn(ref.session_id, "t1") as turn:
        async with turn.tool_call("c1", "search"):
            calls = (await get_turn(raw, ref, "t1")).tool_calls
            assert [(c.call_id, c.status) for c in calls] == [("c1", pb.TOOL_CALL_STATUS_OPEN)]
        with pytest.raises(Boom):
            async with turn.tool_call("c2", "fetch"):
                raise Boom("404")

    calls = (await get_turn(raw, ref, "t1")).tool_calls
    assert [(c.call_id, c.name, c.status, c.error) for c in calls] == [
        ("c1", "search", pb.TOOL_CALL_STATUS_SUCCEEDED, ""),
        ("c2", "fetch", pb.TOOL_CALL_STATUS_FAILED, "Boom: 404"),
    ]


async def test_a_tool_call_open_at_stop_is_closed_interrupted_by_the_settlement(
    client: Client, raw: Raw, ref: pb.SessionRef
) -> None:
    async with client.runner("r1").turn(ref.session_id, "t1") as turn:
        opened = asyncio.Event()

        async def slow_tool() -> None:
            async with turn.tool_call("c1", "search"):
                opened.set()
                await asyncio.sleep(60)

        tool = asyncio.create_task(slow_tool())
        await opened.wait()
        await client.gateway().stop(ref.session_id, expected_turn_id="t1")
        await turn.stop_requested.wait()
        tool.cancel()  # the agent honours the Stop: its tool is cancelled, not failed

    [settled] = settlements(await events_after(raw, ref, 1))
    assert list(settled.interrupted_tool_call_ids) == ["c1"]
    calls = (await get_turn(raw, ref, "t1")).tool_calls
    assert [(c.call_id, c.status, c.error) for c in calls] == [("c1", pb.TOOL_CALL_STATUS_INTERRUPTED, "")]


async def test_interaction_returns_the_resolution_pushed_by_the_watch(
    client: Client, raw: Raw, ref: pb.SessionRef
) -> None:
    async with client.runner("r1").turn(ref.session_id, "t1") as turn:
        asking = asyncio.create_task(turn.interaction("i1", "approval"))
        await asked(raw, ref, "i1")
        await client.gateway().resolve_interaction(ref.session_id, "i1", "approved")
        assert await asyncio.wait_for(asking, 5) == "approved"


async def test_interaction_withdrawn_by_stop_raises_interaction_cancelled(
    client: Client, raw: Raw, ref: pb.SessionRef
) -> None:
    async with client.runner("r1").turn(ref.session_id, "t1") as turn:
        asking = asyncio.create_task(turn.interaction("i1", "approval"))
        await asked(raw, ref, "i1")
        await client.gateway().stop(ref.session_id, expected_turn_id="t1")
        with pytest.raises(InteractionCancelled):
            await asyncio.wait_for(asking, 5)
    assert turn.outcome == TurnOutcome.CANCELLED


async def test_network_blips_are_retried_and_a_resent_write_records_once(
    client: Client, raw: Raw, ref: pb.SessionRef, wire: Wire
) -> None:
    async with client.runner("r1").turn(ref.session_id, "t1") as turn:
        wire.lose("RecordToolCall", 2)
        wire.lose("RecordToolCall", 1, after_sending=True)
        async with turn.tool_call("c1", "search"):
            pass

    assert wire.sent["RecordToolCall"] == 5  # OPEN: 2 lost, 1 reply lost, 1 answered; SUCCEEDED
    assert kinds(await events_after(raw, ref, 1)) == ["tool_call", "tool_call", "turn_settled"]


async def test_a_stop_directive_reaches_the_turn_when_the_push_path_is_quiet(
    client: Client, wire: Wire, ref: pb.SessionRef
) -> None:
    wire.mute_watch = True
    async with client.runner("r1").turn(ref.session_id, "t1", lease_ttl=1.0) as turn:
        await client.gateway().stop(ref.session_id, expected_turn_id="t1", reason="by heartbeat")
        await asyncio.wait_for(turn.stop_requested.wait(), 2)
        assert wire.sent["Heartbeat"] >= 1
        assert turn.stop_reason == "by heartbeat"
    assert turn.outcome == TurnOutcome.CANCELLED


async def test_heartbeats_keep_a_short_lease_alive_past_its_length(
    client: Client, wire: Wire, ref: pb.SessionRef
) -> None:
    async with client.runner("r1").turn(ref.session_id, "t1", lease_ttl=1.0) as turn:
        await asyncio.sleep(2.0)
        assert not turn.abandoned.is_set()
    assert turn.outcome == TurnOutcome.COMPLETED
    assert wire.sent["Heartbeat"] >= 5


async def test_a_lease_taken_by_the_watchdog_abandons_the_turn_and_nothing_more_is_written(
    client: Client, raw: Raw, ref: pb.SessionRef, wire: Wire
) -> None:
    wire.hold("Heartbeat")  # the runner is stuck: its heartbeats never leave
    async with client.runner("r1").turn(ref.session_id, "t1", lease_ttl=1.0) as turn:
        await asyncio.wait_for(turn.abandoned.wait(), 5)  # the watchdog's settlement, pushed
        assert turn.stop_requested.is_set()
        assert turn.outcome == TurnOutcome.LOST
        async with turn.tool_call("c1", "search"):
            pass
        with pytest.raises(TurnEnded):
            await turn.interaction("i1", "approval")

    assert (wire.sent["RecordToolCall"], wire.sent["RecordInteraction"], wire.sent["CompleteTurn"]) == (
        0,
        0,
        0,
    )
    [settled] = settlements(await events_after(raw, ref, 1))
    assert (settled.turn.outcome, settled.turn.settled_by) == (pb.TURN_OUTCOME_LOST, pb.SETTLED_BY_WATCHDOG)


async def test_a_fenced_write_is_sent_once_never_retried_and_abandons_the_turn(
    client: Client, raw: Raw, ref: pb.SessionRef, wire: Wire
) -> None:
    wire.hold("Heartbeat")
    wire.mute_watch = True  # nothing tells the runner: it learns from its next write
    async with client.runner("r1").turn(ref.session_id, "t1", lease_ttl=1.0) as turn:
        await wait_for_phase(raw, ref, pb.SESSION_PHASE_IDLE)
        assert not turn.abandoned.is_set()
        async with turn.tool_call("c1", "search"):  # refused TURN_NOT_ACTIVE
            assert turn.abandoned.is_set()

    assert (wire.sent["RecordToolCall"], wire.sent["CompleteTurn"]) == (1, 0)
    assert turn.outcome is None
    assert kinds(await events_after(raw, ref, 1)) == ["turn_settled"]


async def test_a_heartbeat_answered_abandon_lets_go_of_a_force_stopped_turn(
    client: Client, raw: Raw, ref: pb.SessionRef, wire: Wire
) -> None:
    wire.mute_watch = True
    async with client.runner("r1").turn(ref.session_id, "t1", lease_ttl=1.0) as turn:
        await stop(raw, ref, "t1", force=True)
        await asyncio.wait_for(turn.abandoned.wait(), 2)
        assert turn.outcome == TurnOutcome.CANCELLED
    assert wire.sent["CompleteTurn"] == 0


async def test_a_replayed_admission_renews_the_lease_at_once(
    client: Client, raw: Raw, ref: pb.SessionRef, wire: Wire
) -> None:
    first = await admit(raw, ref, "t1", "r1")
    async with client.runner("r1").turn(ref.session_id, "t1") as turn:
        assert (turn.replayed, turn.generation) == (True, first.lease.generation)
        await eventually(lambda: wire.sent["Heartbeat"] > 0)
    assert (await complete(raw, first.lease)).recorded is False


async def test_cancelling_the_runners_task_records_cancelled_and_ends_heartbeats_and_watch(
    ref: pb.SessionRef, own_server: OwnServer
) -> None:
    """On a server of its own: its count of open watch streams is this test's alone (on the
    shared one, a stream another test closed may still be ending)."""
    async with (
        own_server() as (server, raw),
        Client(f"127.0.0.1:{server.port}", PROJECT, backoff=FAST, call_timeout=2.0) as client,
    ):
        hub = server.hub
        entered = asyncio.Event()

        async def agent() -> None:
            async with client.runner("r1").turn(ref.session_id, "t1"):
                entered.set()
                await asyncio.sleep(60)

        def background() -> list[str]:
            names = [str(getattr(t.get_coro(), "__qualname__", "")) for t in asyncio.all_tasks()]
            return [name for name in names if name.startswith("Turn.")]

        task = asyncio.create_task(agent())
        await entered.wait()
        assert (sorted(background()), hub.watchers) == (["Turn._follow", "Turn._heartbeats"], 1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

        assert (await get_turn(raw, ref, "t1")).outcome == pb.TURN_OUTCOME_CANCELLED
        assert background() == []
        await eventually(lambda: hub.watchers == 0)
