"""What turngate's API edge costs a call, and what how grpc.aio runs it costs: `python bench/edge_path.py`.

Starts grpc.aio servers, each in its own process, each serving one method with Heartbeat's
request and reply, answered at once (no store): `bare` (the floor: the method alone), `interceptor`
(behind turngate's `Edge` as a server interceptor, as `serve` runs it, authentication off) and
`registered` (the same `Edge` wrapped around the method once, when it is registered, so grpc.aio
runs no interceptor per call). `--callers` (64) callers call each in turn for `--seconds`, with no
deadline (the edge then sets its default deadline's timer) and with one (it sets none). Each of
`--rounds` (3) rounds measures every pair; each figure is its best round, in server CPU
microseconds per call (from /proc) and calls/s, and as a ratio to the bare server's with no
deadline. `--grpc-settings` adds bare servers run with grpc settings that might change what a
call costs: the `poll` poller instead of `epoll1` (`GRPC_POLL_STRATEGY`), grpc-core's
`throughput` optimization target, 1,000 concurrent streams per connection instead of no limit.
Needs nothing else running; docs/performance.md says what it found.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import itertools
import os
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import grpc

from turngate.service.api.edge import Edge
from turngate.service.auth.gatekeeper import Gatekeeper
from turngate.service.config import Settings
from turngate.v1 import turngate_pb2 as pb

from environment import ServerProcess, cpu_seconds, free_port, listening
from floor_server import LISTENING, serve_until_terminated
from measure import Call, concurrent
from report import fmt_times, progress, run_benchmark, table

SERVICE = "turngate.v1.AdmissionService"
METHOD = f"/{SERVICE}/Heartbeat"
DEADLINE_S = 30.0
WARMUP_S = 0.5


@dataclass(frozen=True, slots=True)
class Way:
    """How a server serves the method: where the edge is (nowhere, an interceptor, or wrapped
    around the method at registration), and with which grpc options and environment."""

    edge: Literal["none", "interceptor", "registered"] = "none"
    options: tuple[tuple[str, int | str], ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)


EDGE_WAYS = {"bare": Way(), "interceptor": Way("interceptor"), "registered": Way("registered")}
GRPC_SETTINGS = {
    "bare, poll poller": Way(env={"GRPC_POLL_STRATEGY": "poll"}),
    "bare, throughput target": Way(options=(("grpc.optimization_target", "throughput"),)),
    "bare, 1,000 streams": Way(options=(("grpc.max_concurrent_streams", 1_000),)),
}
WAYS = {**EDGE_WAYS, **GRPC_SETTINGS}


async def _beat(_request: pb.HeartbeatRequest, _context: Any) -> pb.HeartbeatResponse:
    return pb.HeartbeatResponse()


async def serve(port: int, name: str) -> None:
    """Serves Heartbeat on 127.0.0.1:`port` the way `name` names, until SIGTERM."""
    way = WAYS[name]
    edge = Edge(Gatekeeper(None), Settings().rpc_timeout)
    behavior = edge.unary(METHOD, _beat) if way.edge == "registered" else _beat
    handlers = {
        "Heartbeat": grpc.unary_unary_rpc_method_handler(
            behavior,
            request_deserializer=pb.HeartbeatRequest.FromString,
            response_serializer=pb.HeartbeatResponse.SerializeToString,
        )
    }
    server = grpc.aio.server(interceptors=[edge] if way.edge == "interceptor" else [], options=way.options)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    server.add_registered_method_handlers(SERVICE, handlers)
    await serve_until_terminated(server, port)


@contextlib.asynccontextmanager
async def _servers(folder: Path, names: list[str]) -> AsyncIterator[dict[str, tuple[ServerProcess, int]]]:
    """The server process and port of each way `names` names, stopped at the end."""
    started: dict[str, tuple[ServerProcess, int]] = {}
    try:
        for number, name in enumerate(names):
            port = free_port()
            argv = [sys.executable, __file__, "--serve", str(port), name]
            env = {**os.environ, **WAYS[name].env}
            process = await ServerProcess.start(name, argv, env, folder / f"{number}.log")
            started[name] = (process, port)
        await listening([process for process, _ in started.values()], LISTENING, len(started), "the servers")
        yield started
    finally:
        for process, _ in started.values():
            await process.stop()


def _calls(stub: grpc.aio.UnaryUnaryMultiCallable[Any, Any], deadline: float | None) -> Iterator[Call]:
    """Endless Heartbeat calls with `deadline` (None: none)."""
    return itertools.repeat(functools.partial(stub, pb.HeartbeatRequest(), timeout=deadline))


async def main(options: argparse.Namespace) -> None:
    best: dict[tuple[str, float | None], tuple[float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-edge-") as folder:
        names = [*EDGE_WAYS, *(GRPC_SETTINGS if options.grpc_settings else ())]
        async with _servers(Path(folder), names) as servers:
            for number in range(options.rounds):
                progress(f"round {number + 1} of {options.rounds}")
                for way, (process, port) in servers.items():
                    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                        stub = channel.unary_unary(
                            METHOD,
                            request_serializer=pb.HeartbeatRequest.SerializeToString,
                            response_deserializer=pb.HeartbeatResponse.FromString,
                        )
                        for deadline in (None, DEADLINE_S):

                            async def server_cpu(pid: int = process.process.pid) -> float:
                                return cpu_seconds(pid)

                            measured = await concurrent(
                                [_calls(stub, deadline) for _ in range(options.callers)],
                                options.seconds,
                                {"server": server_cpu},
                                WARMUP_S,
                            )
                            cpu, rate = measured.cpu_us_per_call("server"), measured.per_s
                            was = best.get((way, deadline), (float("inf"), 0.0))
                            best[(way, deadline)] = (min(was[0], cpu), max(was[1], rate))
    floor_cpu, floor_rate = best[("bare", None)]
    rows = [
        [
            way,
            "none" if deadline is None else f"{deadline:g} s",
            f"{cpu:,.0f}",
            fmt_times(cpu / floor_cpu),
            f"{rate:,.0f}",
            fmt_times(rate / floor_rate),
        ]
        for (way, deadline), (cpu, rate) in best.items()
    ]
    headers = [
        f"{options.callers} callers",
        "deadline",
        "server CPU µs/call",
        "of floor",
        "calls/s",
        "of floor",
    ]
    print(table(f"Best of {options.rounds} rounds", headers, rows))


def parse_options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--callers", type=int, default=64, help="concurrent callers")
    parser.add_argument("--seconds", type=float, default=4.0, help="seconds each pair is measured")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (each figure's best is kept)")
    parser.add_argument(
        "--grpc-settings", action="store_true", help="also bare servers with other grpc settings"
    )
    parser.add_argument("--serve", nargs=2, metavar=("PORT", "WAY"), help=argparse.SUPPRESS)
    return parser.parse_args()


if __name__ == "__main__":
    chosen = parse_options()
    if chosen.serve:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        asyncio.run(serve(int(chosen.serve[0]), chosen.serve[1]))
    else:
        run_benchmark(main(chosen))
