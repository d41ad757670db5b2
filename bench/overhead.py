"""What telemetry and security cost turngate: `python bench/overhead.py` (about two minutes).

Starts, each in its own process, `turngate serve` on an embedded SQLite store six times: with no
OTEL_* variable and no tokens file (telemetry off: nothing is exported, no span is started; a
log line per event, as by default; no authentication), the same at TURNGATE_LOG_LEVEL=WARNING
(not even the event log lines), with an OTLP endpoint (every span, and metrics every 10 s,
exported over gRPC to `otlp_sink.py`, a process that drops them), with `--metrics-listen` alone
(metrics kept for a Prometheus scrape, no spans), with a tokens file of 100 principals (every
call carries a bearer token, checked against all of them), and with tokens over TLS (a
certificate made by `openssl` for the run). One client times sequential AdmitTurn calls (a new
session each) and Heartbeats against each in turn, round after round (each round starting with
the next server), so that drift on the machine spreads over all of them; the server's CPU per
call is read from /proc. `--store redis://…` measures redis mode instead (each server with a
SQLite ledger and a Redis key prefix of its own, deleted at the end).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from redis.asyncio import Redis

from turngate.client.auth import bearer_interceptors

from environment import (
    ServerProcess,
    answers,
    cpu_seconds,
    delete_prefix,
    free_port,
    load_average,
    wait_until,
)
from measure import Call, Latency, sequential
from report import table
from rpcs import Caller, Stubs
from servers import HERE, SERVE_FLAGS, TURNGATE, turngate_serving

TOKEN = "bench-token-of-the-last-principal"
PRINCIPALS = 100
OPERATIONS: tuple[tuple[str, Callable[[Caller], Iterator[Call]]], ...] = (
    ("AdmitTurn", Caller.admits),
    ("Heartbeat", Caller.heartbeats),
)


@dataclass
class Variant:
    """One `turngate serve` and the samples measured against it, per operation."""

    name: str
    process: ServerProcess
    caller: Caller
    samples: dict[str, list[float]] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)

    def add(self, operation: str, latency: Latency) -> None:
        self.samples.setdefault(operation, []).extend(latency.samples)
        self.cpu[operation] = self.cpu.get(operation, 0.0) + latency.cpu["server"]

    def latency(self, operation: str) -> Latency:
        return Latency(self.samples[operation], {"server": self.cpu[operation]})


@dataclass(frozen=True)
class Config:
    """How one server is started and reached."""

    name: str
    env: dict[str, str] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    token: str | None = None
    # The PEM certificate to trust: the channel is TLS when set.
    trust: bytes | None = None


async def start(
    stack: AsyncExitStack, config: Config, log: Path, env: dict[str, str], flags: list[str]
) -> Variant:
    port = free_port()
    argv = [TURNGATE, "serve", "--listen", f"127.0.0.1:{port}", *SERVE_FLAGS, *flags, *config.flags]
    process = await ServerProcess.start(config.name, argv, {**env, **config.env}, log)
    stack.push_async_callback(process.stop)
    target = f"localhost:{port}" if config.trust else f"127.0.0.1:{port}"
    interceptors = [] if config.token is None else bearer_interceptors(config.token)
    if config.trust is None:
        channel = grpc.aio.insecure_channel(target, interceptors=interceptors)
    else:
        credentials = grpc.ssl_channel_credentials(root_certificates=config.trust)
        channel = grpc.aio.secure_channel(target, credentials, interceptors=interceptors)
    stack.push_async_callback(channel.close)
    name = config.name

    async def ready() -> bool:
        process.check_alive()
        return await answers(lambda: turngate_serving(channel))

    await wait_until(ready, name)
    return Variant(name, process, Caller(Stubs.on(channel), f"bench-{uuid.uuid4().hex[:6]}"))


async def run(options: argparse.Namespace) -> None:
    logs = Path(tempfile.mkdtemp(prefix="turngate-overhead-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TURNGATE_", "OTEL_"))}
    print(f"load average at start: {load_average()}; logs in {logs}", file=sys.stderr)
    async with AsyncExitStack() as stack:
        sink_port = free_port()
        argv = [sys.executable, str(HERE / "otlp_sink.py"), str(sink_port)]
        sink = await ServerProcess.start("otlp-sink", argv, env, logs / "sink.log")
        stack.push_async_callback(sink.stop)
        otlp = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink_port}",
            "OTEL_METRIC_EXPORT_INTERVAL": "10000",
        }
        tokens = _tokens_file(logs / "tokens.toml")
        cert, key = _certificate(logs)
        secured = ["--auth-file", str(tokens)]
        configs = [
            Config("off"),
            Config("off, no event logs", env={"TURNGATE_LOG_LEVEL": "WARNING"}),
            Config("otlp", env=otlp),
            Config("prometheus", flags=["--metrics-listen", f"127.0.0.1:{free_port()}"]),
            Config("tokens", flags=secured, token=TOKEN),
            Config(
                "tokens + TLS",
                flags=[*secured, "--tls-cert", str(cert), "--tls-key", str(key)],
                token=TOKEN,
                trust=cert.read_bytes(),
            ),
        ]
        store = _stores(stack, options.store, logs)
        variants = []
        for i, config in enumerate(configs):
            flags, store_env = store(i)
            variants.append(await start(stack, config, logs / f"{i}.log", {**env, **store_env}, flags))
        for round_ in range(options.rounds):
            # Each round starts with the next server, so that none is always measured first.
            turn = round_ % len(variants)
            for operation, calls in OPERATIONS:
                for variant in variants[turn:] + variants[:turn]:
                    pid = variant.process.process.pid
                    meters = {"server": lambda pid=pid: asyncio.to_thread(cpu_seconds, pid)}
                    variant.add(operation, await sequential(calls(variant.caller), options.calls, 50, meters))
    # The servers stopped first, exporting what they had left, then the sink.
    print(table(*_report(variants, options)))
    print(f"sink received {(logs / 'sink.log').read_text().strip()}; load average at end: {load_average()}")


def _tokens_file(path: Path) -> Path:
    """PRINCIPALS admins; the bench's token is the last one, so every lookup compares them all."""
    tokens = [f"bench-token-{i}" for i in range(PRINCIPALS - 1)] + [TOKEN]
    path.write_text(
        "".join(
            f'[[principals]]\nname = "p{i}"\ntoken_sha256 = "{hashlib.sha256(t.encode()).hexdigest()}"\n'
            'roles = ["admin"]\nprojects = "*"\n'
            for i, t in enumerate(tokens)
        )
    )
    return path


def _certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed P-256 certificate for localhost and 127.0.0.1, and its key."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-days",
            "1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


Store = Callable[[int], tuple[list[str], dict[str, str]]]


def _stores(stack: AsyncExitStack, url: str, logs: Path) -> Store:
    """The store flags and environment of server `i`: a SQLite file of its own, or (redis mode) a
    Redis key prefix and a SQLite ledger of its own, the prefixes deleted at the end."""
    if not url.startswith("redis"):
        return lambda i: (["--store", f"sqlite+aiosqlite:///{logs / str(i)}.db"], {})
    run = f"tgbench{uuid.uuid4().hex[:8]}"
    prefixes: list[str] = []
    client = Redis.from_url(url)
    stack.push_async_callback(client.aclose)

    async def delete_all() -> None:
        for prefix in prefixes:
            await delete_prefix(client, prefix)

    stack.push_async_callback(delete_all)

    def store(i: int) -> tuple[list[str], dict[str, str]]:
        prefixes.append(f"{run}-{i}")
        ledger = f"sqlite+aiosqlite:///{logs / str(i)}-ledger.db"
        return ["--store", url, "--ledger", ledger], {"TURNGATE_REDIS_PREFIX": prefixes[-1]}

    return store


def _report(variants: list[Variant], options: argparse.Namespace) -> tuple[str, list[str], list[list[str]]]:
    off = variants[0]
    rows = []
    for operation, _ in OPERATIONS:
        for variant in variants:
            latency, baseline = variant.latency(operation), off.latency(operation)
            rows.append(
                [
                    f"{operation}, {variant.name}",
                    str(latency.n),
                    f"{latency.p50:.3f}",
                    f"{latency.p99:.3f}",
                    f"{latency.p50 / baseline.p50:.2f}x",
                    f"{latency.cpu_us_per_call('server'):.0f}",
                    f"{latency.cpu_us_per_call('server') / baseline.cpu_us_per_call('server'):.2f}x",
                ]
            )
    store = options.store.split(":")[0]
    title = f"1 caller, sequential, {options.rounds} rounds of {options.calls} calls ({store})"
    headers = ["", "n", "p50 ms", "p99 ms", "p50/off", "server CPU us/call", "CPU/off"]
    return title, headers, rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=500, help="timed calls per operation, server and round")
    parser.add_argument("--rounds", type=int, default=6, help="rounds over the six servers")
    parser.add_argument("--store", default="sqlite", help="sqlite (default) or a redis:// URL")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
