"""What the HTTP path costs per call against gRPC, measured in one run: `python bench/http_path.py`
(under a minute).

Starts, each in its own process, the floor server (sqlite_floor.py; its empty call is the bare
gRPC round trip) and one `turngate serve --http-listen` on a fresh SQLite file, both in a
temporary folder removed at the end. Then, on that one server, the same calls over native gRPC and
over its HTTP listener (connectrpc's own client, one connection per contender): GetSession (a read)
over gRPC, Connect JSON, Connect binary and gRPC-Web binary; AdmitTurn on a new session (a write)
over gRPC and Connect JSON; with two floors, the floor server's empty gRPC call and a GET of
/console/config.json on the HTTP listener (an HTTP round trip that makes no RPC: what the HTTP
server and its routing cost alone). The contenders take turns, `--rounds` times, so drift on the
machine spreads over all of them. Then Stop → the watcher has stop_requested, the watcher's
WatchSession over gRPC and over Connect streaming (connect+json), in the same rounds.
See bench/README.md for how to read the tables.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import itertools
import os
import signal
import sqlite3
import statistics
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import grpc
import pyqwest
from connectrpc.client import ConnectClient
from connectrpc.codec import Codec
from connectrpc.compat import google_protobuf_binary_codec, google_protobuf_json_codec
from connectrpc.protocol import ProtocolType

from turngate.v1 import turngate_pb2 as pb

from environment import OWN_CONNECTION, free_port, host_facts, load_average, wait_until
from floor_server import EMPTY
from measure import Call, Contender, CpuMeter, Row, client_cpu, paired, rotated, run_round
from report import facts_lines, fmt_ms, fmt_times, progress, run_benchmark, table
from rpcs import Caller, Stubs, admit_lease, floor_calls, session
from servers import HERE, SERVE_FLAGS, TURNGATE, Endpoint, floor_answers, launch, turngate_serving
from watching import stop_to_notified

SETTLE_S = 1.0
GRPC = "gRPC"
CONNECT_JSON = "Connect JSON"
# How each HTTP contender speaks: the protocol and the codec (a browser's choices).
WIRES: dict[str, tuple[ProtocolType, Codec]] = {
    CONNECT_JSON: (ProtocolType.CONNECT, google_protobuf_json_codec()),
    "Connect binary": (ProtocolType.CONNECT, google_protobuf_binary_codec()),
    "gRPC-Web binary": (ProtocolType.GRPC_WEB, google_protobuf_binary_codec()),
}
READS = (GRPC, *WIRES)
WRITES = (GRPC, CONNECT_JSON)
WATCHES = (GRPC, CONNECT_JSON)
HTTP_VERSIONS = {"1.1": pyqwest.HTTPVersion.HTTP1, "2": pyqwest.HTTPVersion.HTTP2}


@dataclass(frozen=True, slots=True)
class Options:
    rounds: int
    calls: int
    warmup: int
    stops: int
    sessions: int
    http: str


def parse_options(argv: Sequence[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--rounds", type=int, default=6, help="rounds over the contenders (default: %(default)s)")
    add("--calls", type=int, default=60, help="timed calls per contender per round (default: %(default)s)")
    add("--warmup", type=int, default=10, help="untimed calls before them, each round (default: %(default)s)")
    add(
        "--stops",
        type=int,
        default=96,
        help="Stops timed per watcher over all rounds (default: %(default)s)",
    )
    add(
        "--sessions",
        type=int,
        default=4,
        help="watched sessions the Stops rotate over (default: %(default)s)",
    )
    add(
        "--http",
        choices=tuple(HTTP_VERSIONS),
        default="1.1",
        help="the HTTP clients' version: 1.1 (a browser's on plain http) or 2 (h2c, prior knowledge; "
        "default: %(default)s)",
    )
    return Options(**vars(parser.parse_args(argv)))


@dataclass(frozen=True, slots=True)
class Servers:
    floor: Endpoint
    turngate: Endpoint
    http_url: str  # turngate's HTTP listener


async def start_servers(stack: AsyncExitStack, folder: Path) -> Servers:
    """The SQLite floor, and `turngate serve --http-listen` on a fresh SQLite file; ready once its
    gRPC server is SERVING and its HTTP listener answers."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TURNGATE_", "OTEL_"))}
    http_port = free_port()

    def floor_argv(port: int) -> list[str]:
        return [sys.executable, str(HERE / "sqlite_floor.py"), str(port), str(folder / "floor.db")]

    def turngate_argv(port: int) -> list[str]:
        store = ["--store", f"sqlite+aiosqlite:///{folder / 'turngate.db'}"]
        listen = ["--listen", f"127.0.0.1:{port}", "--http-listen", f"127.0.0.1:{http_port}"]
        return [TURNGATE, "serve", *listen, *store, *SERVE_FLAGS]

    floor, server = await asyncio.gather(
        launch(stack, "floor", floor_argv, floor_answers, env, folder / "floor.log"),
        launch(stack, "turngate", turngate_argv, turngate_serving, env, folder / "turngate.log"),
    )
    http_url = f"http://127.0.0.1:{http_port}"
    probe = pyqwest.Client()

    async def http_answers() -> bool:
        server.process.check_alive()
        try:
            return (await probe.get(config_url(http_url))).status == 200
        except ConnectionError:
            return False

    await wait_until(http_answers, "turngate's HTTP listener")
    return Servers(floor, server, http_url)


def config_url(http_url: str) -> str:
    return f"{http_url}/console/config.json"


@dataclass
class Clients:
    """Each contender's own connection: a gRPC channel, or an HTTP client with a connection pool
    of its own; all closed with the run's stack."""

    stack: AsyncExitStack
    servers: Servers
    http_version: pyqwest.HTTPVersion

    def grpc(self) -> Stubs:
        channel = grpc.aio.insecure_channel(self.servers.turngate.address, options=OWN_CONNECTION)
        self.stack.push_async_callback(channel.close)
        return Stubs.on(channel)

    def http(self) -> pyqwest.Client:
        transport = pyqwest.HTTPTransport(http_version=self.http_version)
        self.stack.push_async_callback(transport.aclose)
        return pyqwest.Client(transport)

    def over_http(self, wire: str) -> Stubs:
        protocol, codec = WIRES[wire]
        # No compression either way, as gRPC's default.
        client = ConnectClient(
            self.servers.http_url,
            protocol=protocol,
            codec=codec,
            send_compression=None,
            accept_compression=(),
            http_client=self.http(),
        )
        return Stubs.over_http(client)

    def stubs(self, wire: str) -> Stubs:
        return self.grpc() if wire == GRPC else self.over_http(wire)


async def fetch(client: pyqwest.Client, url: str) -> None:
    response = await client.get(url)
    if response.status != 200:
        raise RuntimeError(f"GET {url} answered {response.status}")


def config_gets(client: pyqwest.Client, servers: Servers) -> Iterator[Call]:
    """GET /console/config.json: the listener's HTTP server and routing, no RPC."""
    return itertools.repeat(functools.partial(fetch, client, config_url(servers.http_url)))


def reads(stubs: Stubs, ref: pb.SessionRef) -> Iterator[Call]:
    return itertools.repeat(functools.partial(stubs.sessions.GetSession, pb.GetSessionRequest(session=ref)))


GRPC_FLOOR, HTTP_FLOOR = "floor: empty gRPC call (floor server)", "floor: GET /console/config.json"


def slug(wire: str) -> str:
    """The wire's name as a session id may spell it."""
    return wire.lower().replace(" ", "-")


def read_row(wire: str) -> str:
    return f"GetSession, {wire}"


def write_row(wire: str) -> str:
    return f"AdmitTurn (new session), {wire}"


def watch_row(wire: str) -> str:
    return f"WatchSession over {wire}"


async def contenders(clients: Clients) -> list[list[Contender]]:
    """The units a round times, each alone (so each meters its own CPU): the floors, GetSession on
    a session with a running turn over every wire, AdmitTurn on a new session each call over
    gRPC and Connect JSON. Every wire's GetSession must answer what gRPC's does."""
    servers = clients.servers
    on_floor = {**servers.floor.meters(), "client": client_cpu}
    on_turngate: dict[str, CpuMeter] = {**servers.turngate.meters(), "client": client_cpu}
    ref = session("read")
    await admit_lease(servers.turngate.stubs, ref, "turn-1")
    expected = await servers.turngate.stubs.sessions.GetSession(pb.GetSessionRequest(session=ref))
    units = [
        [Contender(GRPC_FLOOR, calls=floor_calls(servers.floor.channel, EMPTY), meters=on_floor)],
        [Contender(HTTP_FLOOR, GRPC_FLOOR, calls=config_gets(clients.http(), servers), meters=on_turngate)],
    ]
    for wire in READS:
        stubs = clients.stubs(wire)
        answer = await stubs.sessions.GetSession(pb.GetSessionRequest(session=ref))
        if answer != expected:
            raise RuntimeError(f"GetSession over {wire} answered {answer}, gRPC {expected}")
        paired_with = None if wire == GRPC else read_row(GRPC)
        units.append([Contender(read_row(wire), paired_with, calls=reads(stubs, ref), meters=on_turngate)])
    for wire in WRITES:
        caller = Caller(clients.stubs(wire), f"write-{slug(wire)}")
        paired_with = None if wire == GRPC else write_row(GRPC)
        units.append([Contender(write_row(wire), paired_with, calls=caller.admits(), meters=on_turngate)])
    return units


async def measure(opts: Options, clients: Clients) -> tuple[list[Contender], list[Row]]:
    units = await contenders(clients)
    runner = clients.grpc()
    watchers = {wire: clients.stubs(wire) for wire in WATCHES}
    watches = {wire: Row(watch_row(wire), None if wire == GRPC else watch_row(GRPC)) for wire in WATCHES}
    per_round = max(1, opts.stops // opts.rounds)
    for r in range(opts.rounds):
        progress(f"round {r + 1} of {opts.rounds}: calls")
        await run_round(units, r, opts.calls, opts.warmup)
        progress(f"round {r + 1} of {opts.rounds}: Stop → watcher")
        for wire in rotated(WATCHES, r):
            watches[wire].record(
                await stop_to_notified(
                    runner,
                    runner,
                    watchers[wire],
                    name=f"watch-{r}-{slug(wire)}",
                    sessions=opts.sessions,
                    stops=per_round,
                    warmup=max(1, per_round // 10),
                )
            )
    return [row for unit in units for row in unit], list(watches.values())


def cost_table(title: str, what: str, rows: Sequence[Row], floor: Row | None) -> str:
    """Each row's latency (against `floor`, if given); a row paired with the same call over gRPC
    against it: the ratio of p50s paired round by round, what HTTP adds in ms and in server CPU
    per call. CPU columns where metered."""
    by_name = {row.name: row for row in rows}
    roles = [role for role in ("server", "client") if role in rows[0].cpu]

    def line(row: Row) -> list[str]:
        lat = row.latency
        against = ["-"] * (4 + bool(roles))
        if row.paired_with is not None:
            grpc_lat = by_name[row.paired_with].latency
            ratios = paired(row, by_name[row.paired_with])
            against = [
                f"{statistics.median(ratios):.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f})",
                fmt_times(lat.p99 / grpc_lat.p99),
                f"{lat.p50 - grpc_lat.p50:+.3f}",
                f"{lat.p99 - grpc_lat.p99:+.3f}",
            ]
            if roles:
                extra = lat.cpu_us_per_call("server") - grpc_lat.cpu_us_per_call("server")
                against.append(f"{extra:+.0f}")
        empty = [] if floor is None else [fmt_times(lat.p50 / floor.latency.p50)]
        cpu = [f"{lat.cpu_us_per_call(role):.0f}" for role in roles]
        return [row.name, str(lat.n), fmt_ms(lat.p50), fmt_ms(lat.p99), *empty, *against, *cpu]

    headers = [what, "n", "p50 ms", "p99 ms", *([] if floor is None else ["p50/empty"])]
    headers += ["p50/gRPC: median of rounds (range)", "p99/gRPC", "+p50 ms", "+p99 ms"]
    headers += [*(["+server CPU us"] if roles else []), *(f"{role} CPU us/call" for role in roles)]
    return table(title, headers, [line(row) for row in rows])


async def main(opts: Options) -> None:
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    facts = [
        *host_facts(),
        *((name, version(name)) for name in ("connectrpc", "hypercorn", "pyqwest")),
        ("SQLite", sqlite3.sqlite_version),
        ("HTTP clients", f"HTTP/{opts.http}, one connection per contender, no compression"),
    ]
    print(facts_lines(facts))
    async with AsyncExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tgbench-http-")))
        servers = await start_servers(stack, folder)
        await asyncio.sleep(SETTLE_S)
        clients = Clients(stack, servers, HTTP_VERSIONS[opts.http])
        rows, watches = await measure(opts, clients)
        for endpoint in (servers.floor, servers.turngate):
            endpoint.process.check_alive()
        print(
            "\n".join(
                [
                    cost_table("Calls: HTTP against gRPC", "1 caller, sequential", rows, rows[0]),
                    cost_table("Push: Stop sent over gRPC", "Stop sent → watcher has it", watches, None),
                    f"load average at end: {load_average()}",
                ]
            )
        )


if __name__ == "__main__":
    run_benchmark(main(parse_options()))
