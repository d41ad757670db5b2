"""Draining a replica (docs/deploying.md, Draining): on SIGTERM its health turns NOT_SERVING at
once, watchers told first; it goes on serving for the drain delay, then ends every stream with
UNAVAILABLE, lets calls in flight finish and exits 0. Under load, every call succeeds or fails
with a retryable status, no acknowledged write is lost and the drain settles no turn."""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.calls import admit, complete, events_after, heartbeat, record_call
from tests.support.processes import spawn_server
from tests.support.servers import Client
from tests.support.waiting import eventually
from tests.support.watching import collect, ended, watch
from turngate.client.errors import transient
from turngate.v1 import turngate_pb2 as pb

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
# A grace far beyond the processes' timeout: exiting in time proves no stream held the shutdown.
DRAIN = {"TURNGATE_DRAIN_DELAY": "1", "TURNGATE_SHUTDOWN_GRACE": "60"}
RUNNERS = 16


def session_ref(name: str) -> pb.SessionRef:
    return pb.SessionRef(project_id="drain", session_id=name)


async def next_status(
    stream: grpc.aio.UnaryStreamCall[health_pb2.HealthCheckRequest, health_pb2.HealthCheckResponse],
) -> int:
    reply = await stream.read()
    assert isinstance(reply, health_pb2.HealthCheckResponse)
    status: int = reply.status
    return status


async def test_sigterm_turns_health_not_serving_first_serves_through_the_delay_then_ends_streams_and_exits_0(
    tmp_path: Path,
) -> None:
    session = session_ref("announced")
    async with spawn_server(tmp_path, env=DRAIN) as served:
        client = served.client
        health = health_pb2_grpc.HealthStub(client.channel)
        health_watch = health.Watch(health_pb2.HealthCheckRequest())
        assert await next_status(health_watch) == SERVING
        session_watch = watch(client, session)
        await collect(session_watch, 1)

        served.terminate()
        assert await next_status(health_watch) == NOT_SERVING
        # Told, and still served: load balancers have the delay to move calls elsewhere.
        lease = (await admit(client, session, "t1")).lease
        await complete(client, lease)
        liveness = await health.Check(health_pb2.HealthCheckRequest(service="liveness"))
        assert liveness.status == SERVING

        delivered, error = await ended(session_watch)
        assert [event.WhichOneof("kind") for event in delivered] == ["turn_admitted", "turn_settled"]
        assert error.code() == grpc.StatusCode.UNAVAILABLE
        with pytest.raises(grpc.aio.AioRpcError) as health_end:
            await health_watch.read()
        assert health_end.value.code() == grpc.StatusCode.UNAVAILABLE
        assert await served.exit_code() == 0


async def test_sigint_skips_the_drain_delay(tmp_path: Path) -> None:
    async with spawn_server(tmp_path, env={"TURNGATE_DRAIN_DELAY": "600"}) as served:
        served.process.send_signal(signal.SIGINT)
        assert await served.exit_code() == 0


@dataclass
class Load:
    """What the runners were told: each session's acknowledged admissions and completions."""

    admitted: dict[str, list[str]] = field(default_factory=dict)
    completed: dict[str, list[str]] = field(default_factory=dict)
    unanswered: dict[str, str] = field(default_factory=dict)
    failures: list[grpc.aio.AioRpcError] = field(default_factory=list)
    in_flight: int = 0


async def run_turns(client: Client, session: pb.SessionRef, load: Load) -> None:
    """Turn after turn (admit, heartbeat, a tool call, complete) until a call fails."""
    name = session.session_id
    admitted, completed = load.admitted.setdefault(name, []), load.completed.setdefault(name, [])
    n = 0
    while True:
        n += 1
        turn_id = f"t{n}"
        load.in_flight += 1
        try:
            lease = (await admit(client, session, turn_id)).lease
            admitted.append(turn_id)
            await heartbeat(client, lease)
            await record_call(client, lease, "c1", pb.TOOL_CALL_STATUS_OPEN)
            await record_call(client, lease, "c1", pb.TOOL_CALL_STATUS_SUCCEEDED)
            await complete(client, lease)
            completed.append(turn_id)
        except grpc.aio.AioRpcError as error:
            load.failures.append(error)
            load.unanswered[name] = turn_id
            return
        finally:
            load.in_flight -= 1


async def test_drain_under_load_loses_no_acknowledged_write_and_settles_no_turn(tmp_path: Path) -> None:
    load = Load()
    sessions = [session_ref(f"s{i}") for i in range(RUNNERS)]
    async with spawn_server(tmp_path, env=DRAIN) as served:
        client = served.client
        health_watch = health_pb2_grpc.HealthStub(client.channel).Watch(health_pb2.HealthCheckRequest())
        watches = [watch(client, session) for session in sessions[:4]]
        runners = [asyncio.create_task(run_turns(client, session, load)) for session in sessions]
        await eventually(
            lambda: len(load.completed) == RUNNERS and all(len(t) >= 3 for t in load.completed.values())
        )

        served.terminate()
        signalled = time.monotonic()
        in_flight_at_signal = load.in_flight
        assert await served.exit_code() == 0
        exited_after = time.monotonic() - signalled
        await asyncio.gather(*runners)
        for stream in watches:
            delivered, error = await ended(stream)
            assert error.code() == grpc.StatusCode.UNAVAILABLE
            assert [e.seq for e in delivered] == list(
                range(delivered[0].seq, delivered[0].seq + len(delivered))
            )
        health_watch.cancel()

    # Retryable as the SDK retries: UNAVAILABLE, or CANCELLED for a call the server received but
    # never started (grpc-core issue 41785).
    assert all(transient(failure) for failure in load.failures), [f.code() for f in load.failures]
    async with spawn_server(tmp_path) as restarted:
        for session in sessions:
            name = session.session_id
            log = await events_after(restarted.client, session, 1)
            settled = {
                e.turn_settled.turn.turn_id: e.turn_settled.turn for e in log if e.HasField("turn_settled")
            }
            started = {e.turn_admitted.turn.turn_id for e in log if e.HasField("turn_admitted")} | {"t1"}
            # Every acknowledged write is there; the one unanswered call may or may not have landed.
            assert set(load.admitted[name]) <= started <= {*load.admitted[name], load.unanswered[name]}
            assert set(load.completed[name]) == {
                turn for turn, record in settled.items() if record.settled_by == pb.SETTLED_BY_RUNNER
            }
            assert all(record.settled_by == pb.SETTLED_BY_RUNNER for record in settled.values())
    print(
        f"\ndrain under load: {RUNNERS} runners, {in_flight_at_signal} calls in flight at SIGTERM, "
        f"{sum(map(len, load.completed.values()))} turns completed, {len(load.failures)} retryable failures "
        f"({dict(Counter(f.code().name for f in load.failures))}), exit {exited_after:.2f}s after SIGTERM "
        "(drain delay 1s)"
    )
