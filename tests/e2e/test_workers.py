"""`turngate serve --workers N` (redis mode): N processes on one port, each a full replica. Calls
reach every worker, a watcher on one worker hears the writes of the others, SIGTERM drains them
all and the parent exits 0, a killed worker is started again, and a worker failing before it
serves (a port taken), however slowly, stops the others and the parent exits 1."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from multiprocessing.synchronize import Event
from pathlib import Path

import grpc
import pytest

from tests.support.calls import admit, complete, stop
from tests.support.processes import Spawned, free_port, serve_log, spawn_server
from tests.support.servers import client_for
from tests.support.shared_redis import REDIS_SERVER, prefix_on_shared_redis
from tests.support.waiting import eventually
from tests.support.watching import collect, watch
from turngate.service.config import Settings
from turngate.service.workers import Workers
from turngate.v1 import turngate_pb2 as pb

pytestmark = pytest.mark.redis

WORKERS = 2
# More connections than workers, so the kernel spreads them over every worker: a connection goes
# to one worker for its lifetime, chosen by a hash of its addresses.
CONNECTIONS = 16
# How long a test waits for the processes: reached only when it fails.
WAIT_TIMEOUT_S = 30.0


@pytest.fixture
async def prefix() -> AsyncIterator[str]:
    """A Redis key prefix of the test's own, deleted afterwards."""
    async with prefix_on_shared_redis() as prefix:
        yield prefix


def workers_args(tmp: Path) -> tuple[str, ...]:
    """`serve`'s arguments for WORKERS workers in redis mode, with a ledger in `tmp`."""
    return (
        "--workers",
        str(WORKERS),
        "--store",
        REDIS_SERVER,
        "--ledger",
        f"sqlite+aiosqlite:///{tmp}/ledger.db",
    )


@asynccontextmanager
async def spawn_workers(tmp: Path, prefix: str, *args: str, port: int) -> AsyncIterator[Spawned]:
    """`turngate serve` with `workers_args` and `args`, its keys under `prefix`, on `port`, once
    every worker listens (the port serves as soon as one does)."""
    env = {"TURNGATE_REDIS_PREFIX": prefix}
    async with spawn_server(tmp, *workers_args(tmp), *args, port=port, env=env) as served:
        await eventually(lambda: listening(tmp, port) == WORKERS, timeout_s=WAIT_TIMEOUT_S)
        yield served


def listening(tmp: Path, port: int) -> int:
    """How many workers have said they listen (each has its signal handlers by then)."""
    return serve_log(tmp, port).read_text().count("turngate listening on")


def running(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def serve_log_of(tmp: Path) -> str:
    [log] = tmp.glob("serve-*.log")
    return log.read_text()


def admissions_of(metrics_port: int) -> int:
    """The AdmitTurn answers a worker counted, from its /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return sum(int(float(n)) for n in re.findall(r"^turngate_admissions_total\{[^}]*\} (\S+)$", text, re.M))


def worker_pids(parent: int) -> set[int]:
    """The worker processes of the parent `parent` (not multiprocessing's resource tracker)."""
    children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    return {
        int(pid)
        for pid in children
        if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()  # the tracker runs another main
    }


async def test_every_worker_serves_the_port_and_a_watcher_on_one_hears_the_writes_of_the_others(
    tmp_path: Path, prefix: str
) -> None:
    port, metrics = free_port(), free_port()
    async with spawn_workers(tmp_path, prefix, "--metrics-listen", f"127.0.0.1:{metrics}", port=port):
        # A subchannel pool of each channel's own: a connection per channel, not one shared.
        channels = [
            grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)])
            for _ in range(CONNECTIONS)
        ]
        try:
            clients = [client_for(channel) for channel in channels]
            for i in range(CONNECTIONS):
                session = pb.SessionRef(project_id="p-workers", session_id=f"s{i}")
                streams = [watch(client, session) for client in clients]
                for stream in streams:
                    await collect(stream, 1)  # subscribed: the snapshot came
                # A turn through every connection, so through every worker.
                for n, writer in enumerate(clients[i:] + clients[:i]):
                    await complete(writer, (await admit(writer, session, f"t{n}")).lease)
                for stream in streams:
                    events = await collect(stream, 2 * CONNECTIONS)
                    assert [event.seq for event in events] == list(range(1, 2 * CONNECTIONS + 1))
                    stream.cancel()
            counts = [admissions_of(metrics + index) for index in range(WORKERS)]
            assert all(counts), f"admissions counted per worker: {counts}"
            assert sum(counts) == CONNECTIONS * CONNECTIONS
        finally:
            await asyncio.gather(*(channel.close() for channel in channels))


async def test_sigterm_to_the_parent_drains_every_worker_and_it_exits_0(tmp_path: Path, prefix: str) -> None:
    async with spawn_workers(tmp_path, prefix, port=free_port()) as served:
        session = pb.SessionRef(project_id="p-workers", session_id="drained")
        await admit(served.client, session, "t1")
        workers = worker_pids(served.process.pid)
        assert len(workers) == WORKERS
        served.terminate()
        assert await served.exit_code() == 0
    log = serve_log_of(tmp_path)
    assert log.count("turngate shutting down") == WORKERS
    assert "turngate stopped: every worker has exited" in log
    assert not any(map(running, workers))


async def test_a_killed_worker_is_started_again_while_the_others_serve(tmp_path: Path, prefix: str) -> None:
    async with spawn_workers(tmp_path, prefix, port=free_port()) as served:
        killed = min(worker_pids(served.process.pid))
        os.kill(killed, signal.SIGKILL)

        def replaced() -> bool:
            now = worker_pids(served.process.pid)
            return len(now) == WORKERS and killed not in now

        await eventually(replaced, timeout_s=WAIT_TIMEOUT_S)
        session = pb.SessionRef(project_id="p-workers", session_id="after-kill")
        lease = (await admit(served.client, session, "t1")).lease
        assert (await stop(served.client, session, "t1")).cancelled.stopping_turn_id == lease.turn_id
    assert re.search(r"worker \d exited \(exit code -9\): starting it again", serve_log_of(tmp_path))


async def test_a_worker_failing_at_start_stops_the_others_and_the_parent_exits_1(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))  # without SO_REUSEPORT: no worker may share it
        taken.listen()
        port = taken.getsockname()[1]
        served = spawn_server(tmp_path, *workers_args(tmp_path), port=port, serving=False)
        with pytest.raises(AssertionError, match="turngate serve exited"):
            async with served:
                pass
    log = serve_log(tmp_path, port).read_text()
    assert "failed at start" in log
    assert "turngate: " in log  # the worker's one line naming the cause


# Longer than any start a clock could have bounded: a loaded machine starts a worker this slowly.
SLOW_START_S = 6.0
# Where a worker started by the tests below notes that it ran before (inherited by the workers).
RAN_BEFORE = "TURNGATE_TEST_RAN_BEFORE"


def _serve_until_signalled(serving: Event) -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    serving.set()
    signal.pause()


def _fails_slowly_before_serving(_settings: Settings, index: int, serving: Event) -> None:
    """Worker 0 fails after a slow start, never having served; the others serve."""
    if index > 0:
        _serve_until_signalled(serving)
    time.sleep(SLOW_START_S)
    sys.exit(1)


def _fails_once_after_serving(_settings: Settings, index: int, serving: Event) -> None:
    """Worker 0 serves and at once exits 3; started again, it fails before serving."""
    if index > 0:
        _serve_until_signalled(serving)
    ran_before = Path(os.environ[RAN_BEFORE])
    if ran_before.exists():
        sys.exit(1)
    ran_before.touch()
    serving.set()
    sys.exit(3)


@pytest.fixture
def supervising(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    """Settings for `Workers` run in this test's process, whose signal handlers are put back after."""
    monkeypatch.setenv(RAN_BEFORE, str(tmp_path / "ran-before"))
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    ledger = f"sqlite+aiosqlite:///{tmp_path}/ledger.db"
    yield Settings(store=REDIS_SERVER, ledger=ledger, workers=WORKERS, listen="127.0.0.1:1")
    for sig, handler in handlers.items():
        signal.signal(sig, handler)


def test_a_worker_failing_before_it_serves_however_slowly_stops_the_others_and_the_parent_exits_1(
    supervising: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    assert Workers(supervising, _fails_slowly_before_serving).run() == 1
    assert "worker 0 failed at start (exit code 1): stopping the others" in caplog.text


def test_a_worker_exiting_after_it_served_is_started_again(
    supervising: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    assert Workers(supervising, _fails_once_after_serving).run() == 1
    assert "worker 0 exited (exit code 3): starting it again" in caplog.text
    assert "worker 0 failed at start (exit code 1): stopping the others" in caplog.text
