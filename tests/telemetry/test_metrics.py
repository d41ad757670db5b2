"""Each instrument moves as docs/telemetry.md says, after a scripted turn and a scripted queue; in
redis mode the projector's lag and dead letters are reported too."""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import pytest

from tests.support.calls import admit, complete, enqueue, heartbeat, record_call, refused, resume_queue, stop
from tests.support.loops import AT_ONCE, BreakableSweeps, server_restarting
from tests.support.servers import OwnServer, pruning_often, running, settings_for
from tests.support.shared_redis import REDIS_SERVER, delete_keyspace, unique_keyspace
from tests.support.waiting import eventually
from tests.support.watching import collect, watch
from tests.telemetry.recorded import Labels, Recorded, labels
from turngate.v1 import turngate_pb2 as pb

COUNTERS: dict[str, list[Labels]] = {
    "turngate.admissions": [
        labels(result="admitted"),
        labels(result="replayed"),
        labels(result="refused", refusal="SESSION_TURN_IN_USE"),
    ],
    "turngate.cancels": [
        labels(result="cancelled", settled=False),
        labels(result="cancelled", settled=True),
        labels(result="mismatch", settled=False),
        labels(result="idle", settled=False),
    ],
    "turngate.settlements": [
        labels(outcome="CANCELLED", settled_by="GATEWAY"),
        labels(outcome="COMPLETED", settled_by="RUNNER"),
    ],
}
HISTOGRAMS: dict[str, list[Labels]] = {
    "turngate.stop_to_settle": [labels(outcome="CANCELLED", settled_by="GATEWAY")],
    "turngate.lease.margin": [frozenset()],
}


def counts(recorded: Recorded) -> dict[tuple[str, Labels], float]:
    found = {(name, at): recorded.value(name, at) for name, ats in COUNTERS.items() for at in ats}
    found |= {(name, at): recorded.value(name, at, "count") for name, ats in HISTOGRAMS.items() for at in ats}
    return found


async def test_each_instrument_moves_as_documented_after_a_scripted_turn(
    installed: Recorded, own_server: OwnServer, session: pb.SessionRef
) -> None:
    async with own_server() as (_, client):
        before = counts(installed)
        margins_before = installed.value("turngate.lease.margin", of="sum")
        stream = watch(client, session)
        await collect(stream, 1)
        await eventually(lambda: installed.value("turngate.watchers") == 1)

        lease = (await admit(client, session, "t1")).lease  # admitted
        await heartbeat(client, lease)  # lease margin: almost all of the default 20 s lease
        await admit(client, session, "t1")  # replayed
        await refused(admit(client, session, "t2"))  # refused: SESSION_TURN_IN_USE
        await eventually(lambda: installed.value("turngate.turns.active") == 1)
        await stop(client, session, "t1")  # cancelled, not settled
        await stop(client, session, "t1", force=True)  # cancelled and settled: stop-to-settle
        await stop(client, session, "t1")  # idle
        lease = (await admit(client, session, "t3")).lease  # admitted
        await stop(client, session, "t1")  # mismatch
        await complete(client, lease)  # settled by the runner, never stopped
        await eventually(lambda: installed.value("turngate.turns.active") == 0)
        stream.cancel()
        await eventually(lambda: installed.value("turngate.watchers") == 0)

        after = counts(installed)
        moved = {key: after[key] - before[key] for key in after}
        assert moved == {
            **{(name, at): 1 for name, ats in {**COUNTERS, **HISTOGRAMS}.items() for at in ats},
            ("turngate.admissions", labels(result="admitted")): 2,
        }
        assert 19 < installed.value("turngate.lease.margin", of="sum") - margins_before <= 20
        assert installed.points("turngate.projector.lag") == {}  # a SQL store has no projector


@pytest.mark.redis
async def test_in_redis_mode_the_projector_reports_its_lag_and_dead_letters(
    installed: Recorded, own_server: OwnServer, tmp_path: Path, session: pb.SessionRef
) -> None:
    keys = unique_keyspace()
    ledger = f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}"
    redis_mode = {
        "store": REDIS_SERVER,
        "ledger": ledger,
        "redis_prefix": keys.prefix,
        "redis_buckets": keys.buckets,
    }
    try:
        async with own_server(**redis_mode) as (_, client):
            lease = (await admit(client, session)).lease
            await eventually(lambda: installed.value("turngate.turns.active") == 1)
            await complete(client, lease)
            await eventually(lambda: installed.value("turngate.turns.active") == 0)
            await eventually(lambda: installed.points("turngate.projector.lag").keys() == {frozenset()})
            await eventually(lambda: installed.value("turngate.projector.lag") == 0)
            assert installed.value("turngate.projector.dead_letters") == 0
            assert installed.value("turngate.projector.lost_histories") == 0
    finally:
        delete_keyspace(REDIS_SERVER, keys)


async def test_restarts_of_each_background_loop_are_counted_by_its_name(
    installed: Recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    BreakableSweeps(monkeypatch, failures=3)  # the watchdog's sweeps at start fail three times
    async with server_restarting(str(tmp_path), AT_ONCE):
        await eventually(lambda: installed.value("turngate.loop.restarts", labels(loop="watchdog")) == 3)
        restarts = {
            at: installed.value("turngate.loop.restarts", at)
            for at in installed.points("turngate.loop.restarts")
        }
        assert restarts == {
            labels(loop="watchdog"): 3,
            **{labels(loop=name): 0 for name in ("retirement", "health", "schema", "sampler")},
        }


async def test_rows_history_retention_pruned_are_counted_by_table(
    installed: Recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, session: pb.SessionRef
) -> None:
    settings = pruning_often(settings_for(str(tmp_path)), 0.5, monkeypatch)
    async with asynccontextmanager(running)(settings) as (_, client):
        lease = (await admit(client, session)).lease
        await record_call(client, lease, "c1")
        await complete(client, lease)

        pruned = "turngate.history.pruned"
        await eventually(lambda: installed.value(pruned, labels(table="turns")) == 1, timeout_s=10.0)
        assert {at: installed.value(pruned, at) for at in installed.points(pruned)} == {
            labels(table="turns"): 1,
            labels(table="tool_calls"): 1,
            labels(table="interactions"): 0,
            labels(table="steers"): 0,
            labels(table="session_events"): 4,
            labels(table="session_activity"): 1,
        }


QUEUE_COUNTERS: dict[str, list[Labels]] = {
    "turngate.admissions": [labels(result="admitted"), labels(result="queued")],
    "turngate.queue.promotions": [frozenset()],
    "turngate.queue.pauses": [labels(outcome="FAILED")],
    "turngate.queue.resumes": [frozenset()],
    "turngate.queue.expiries": [frozenset()],
    "turngate.queue.clears": [frozenset()],
}
QUEUE_HISTOGRAMS: dict[str, list[Labels]] = {
    "turngate.queue.depth": [labels(mode="ENQUEUE")],
    "turngate.queue.wait": [
        labels(result=result) for result in ("admitted", "cancelled", "cleared", "expired")
    ],
}


def queue_counts(recorded: Recorded) -> dict[tuple[str, Labels, str], float]:
    found = {
        (name, at, "value"): recorded.value(name, at) for name, ats in QUEUE_COUNTERS.items() for at in ats
    }
    for name, ats in QUEUE_HISTOGRAMS.items():
        found |= {(name, at, of): recorded.value(name, at, of) for at in ats for of in ("count", "sum")}
    return found


async def test_each_queue_instrument_moves_as_documented_and_active_turns_leave_waiting_turns_out(
    installed: Recorded, own_server: OwnServer, session: pb.SessionRef
) -> None:
    async with own_server() as (_, client):
        before = queue_counts(installed)
        first = (await admit(client, session, "t1")).lease  # admitted
        await enqueue(client, session, "t2", runner_id="r1")  # queued: depth 1
        await enqueue(client, session, "t3", runner_id="r1")  # queued: depth 2
        await complete(client, first)  # t2 promoted
        promoted = (await admit(client, session, "t2", runner_id="r1")).lease
        await complete(client, promoted, pb.TURN_OUTCOME_FAILED)  # the queue paused by a FAILED end
        await eventually(lambda: installed.value("turngate.turns.active") == 0)  # t3 waits: no turn
        await resume_queue(client, session)  # resumed: t3 promoted
        await enqueue(client, session, "t4", runner_id="r1")  # depth 1
        await enqueue(client, session, "t5", runner_id="r1")  # depth 2
        await stop(client, session, "t4", queue=pb.QUEUE_ACTION_PAUSE)  # t4 cancelled while it waits
        await stop(client, session, "t3", queue=pb.QUEUE_ACTION_CLEAR)  # t5 cleared
        third = (await admit(client, session, "t3", runner_id="r1")).lease
        await complete(client, third, pb.TURN_OUTCOME_CANCELLED)
        await admit(client, session, "t6")  # admitted
        await enqueue(
            client, session, "t7", runner_id="r1", max_queue_wait=1.0
        )  # depth 1, then expired by the watchdog
        await eventually(
            lambda: (
                installed.value("turngate.queue.expiries")
                > before[("turngate.queue.expiries", frozenset(), "value")]
            )
        )
        await eventually(lambda: installed.value("turngate.turns.active") == 1)

        after = queue_counts(installed)
        moved = {key: after[key] - before[key] for key in after if after[key] != before[key]}
        waited = {
            result: moved.pop(("turngate.queue.wait", labels(result=result), "sum"))
            for result in ("admitted", "cancelled", "cleared", "expired")
        }
        assert moved == {
            ("turngate.admissions", labels(result="admitted"), "value"): 2,
            ("turngate.admissions", labels(result="queued"), "value"): 5,
            ("turngate.queue.promotions", frozenset(), "value"): 2,
            ("turngate.queue.pauses", labels(outcome="FAILED"), "value"): 1,
            ("turngate.queue.resumes", frozenset(), "value"): 1,
            ("turngate.queue.expiries", frozenset(), "value"): 1,
            ("turngate.queue.clears", frozenset(), "value"): 1,
            ("turngate.queue.depth", labels(mode="ENQUEUE"), "count"): 5,
            ("turngate.queue.depth", labels(mode="ENQUEUE"), "sum"): 1 + 2 + 1 + 2 + 1,
            **{
                ("turngate.queue.wait", labels(result=result), "count"): 1
                for result in ("cancelled", "cleared", "expired")
            },
            ("turngate.queue.wait", labels(result="admitted"), "count"): 2,
        }
        assert waited["expired"] >= 1.0, "it waited its max_queue_wait"
        assert all(seconds > 0 for seconds in waited.values())


STEER_ENDS = [
    labels(status="CONSUMED", requeued=False),
    labels(status="DECLINED", requeued=False),
    labels(status="EXPIRED", requeued=False),
    labels(status="UNCONSUMED", requeued=True),
]
STEER_QUEUED = labels(mode="STEER")


def steer_counts(recorded: Recorded) -> dict[Labels, float]:
    found = {at: recorded.value("turngate.steers", at) for at in STEER_ENDS}
    found[STEER_QUEUED] = recorded.value("turngate.queue.depth", STEER_QUEUED, "count")
    return found


async def test_steers_are_counted_by_how_they_end_and_a_turn_a_steer_became_joins_the_queue_as_steer(
    installed: Recorded, own_server: OwnServer, session: pb.SessionRef
) -> None:
    async with own_server(steer_wait=1.0) as (_, client):
        before = steer_counts(installed)
        lease = (await admit(client, session, "t1")).lease

        async def steer(steer_id: str, *, requeue: bool = False) -> None:
            await client.control.SteerTurn(
                pb.SteerTurnRequest(
                    session=session,
                    expected_turn_id="t1",
                    steer_id=steer_id,
                    content="go",
                    requeue_unconsumed=requeue,
                )
            )

        async def acknowledge(steer_id: str, status: pb.SteerStatus.ValueType) -> None:
            await client.admission.AcknowledgeSteer(
                pb.AcknowledgeSteerRequest(lease=lease, steer_id=steer_id, status=status)
            )

        await steer("s-expires")  # expired by the watchdog after the 1 s steer wait
        expired = labels(status="EXPIRED", requeued=False)
        await eventually(lambda: installed.value("turngate.steers", expired) > before[expired])
        await steer("s-consumed")
        await acknowledge("s-consumed", pb.STEER_STATUS_CONSUMED)
        await steer("s-declined")
        await acknowledge("s-declined", pb.STEER_STATUS_DECLINED)
        await steer("s-requeued", requeue=True)
        await complete(client, lease)  # unconsumed, requeued: a turn that joins the queue

        after = steer_counts(installed)
        assert {at: after[at] - before[at] for at in after} == {
            **{at: 1 for at in STEER_ENDS},
            STEER_QUEUED: 1,
        }


def called(service: str, method: str, code: grpc.StatusCode) -> Labels:
    """The attributes of an RPC's `rpc.server.call.duration` points."""
    return frozenset(
        {
            ("rpc.system", "grpc"),
            ("rpc.service", f"turngate.v1.{service}"),
            ("rpc.method", method),
            ("rpc.grpc.status_code", code.value[0]),
        }
    )


async def test_rpc_durations_are_recorded_by_method_and_status_and_a_cancelled_watch_as_cancelled(
    installed: Recorded, own_server: OwnServer, session: pb.SessionRef
) -> None:
    duration = "rpc.server.call.duration"
    admitted = called("AdmissionService", "AdmitTurn", grpc.StatusCode.OK)
    aborted = called("AdmissionService", "AdmitTurn", grpc.StatusCode.ABORTED)
    cancelled = called("SessionService", "WatchSession", grpc.StatusCode.CANCELLED)
    before = {at: installed.value(duration, at, "count") for at in (admitted, aborted, cancelled)}
    async with own_server() as (_, client):
        await admit(client, session)
        await refused(admit(client, session, "t2"))
        stream = watch(client, session)
        await collect(stream, 1)
        stream.cancel()
        await eventually(lambda: installed.value(duration, cancelled, "count") == before[cancelled] + 1)
    assert installed.value(duration, admitted, "count") == before[admitted] + 1
    assert installed.value(duration, aborted, "count") == before[aborted] + 1
    assert not [at for at in installed.points(duration) if ("rpc.service", "grpc.health.v1.Health") in at]
