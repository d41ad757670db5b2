"""Runner death → turn settled: `python bench/settlement.py [--store URL --ledger URL]`.

Admits turns on sessions of their own whose runners never heartbeat (as if each died at once),
all at one instant, and reads back when the watchdog settled each LOST. Both ends are the store's
clock (the turn's `admitted_at`, the runner's last word, and its `settled_at`), so the client's
clock plays no part. The target is lease + 1 s at p99 (the design's worst case from runner death
to settlement). Starts `turngate serve` on a fresh embedded SQLite file unless given a store.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path

import grpc
from google.protobuf.duration_pb2 import Duration

from turngate.v1 import turngate_pb2 as pb

from environment import ServerProcess, answers, free_port, wait_until
from measure import Latency
from report import Target, target_table
from rpcs import Stubs, session
from servers import TURNGATE, turngate_serving

LEASE_S = 2.0
# How often a turn's record is read while it waits to be settled.
POLL_S = 0.1
# The watchdog's target: settlement within the lease plus this.
SETTLE_MARGIN_S = 1.0


async def death_to_settlement(stubs: Stubs, turns: int, lease_s: float) -> Latency:
    """`turns` turns admitted at once with a lease of `lease_s` and never heard from again: for
    each, the seconds from its admission to its settlement, on the store's clock."""
    run = uuid.uuid4().hex[:8]
    ttl = Duration(seconds=int(lease_s), nanos=round(lease_s % 1 * 1e9))
    refs = [session(f"death-{run}-{i}") for i in range(turns)]
    await asyncio.gather(
        *(
            stubs.admission.AdmitTurn(
                pb.AdmitTurnRequest(session=ref, turn_id="t1", runner_id="dies", lease_ttl=ttl)
            )
            for ref in refs
        )
    )
    await asyncio.sleep(lease_s)
    records = await asyncio.gather(*(_settled(stubs, ref) for ref in refs))
    return Latency([(r.settled_at.ToMicroseconds() - r.admitted_at.ToMicroseconds()) / 1e6 for r in records])


async def _settled(stubs: Stubs, ref: pb.SessionRef) -> pb.TurnRecord:
    while True:
        turn = (await stubs.sessions.GetTurn(pb.GetTurnRequest(session=ref, turn_id="t1"))).turn
        if turn.phase == pb.TURN_PHASE_SETTLED:
            if turn.outcome != pb.TURN_OUTCOME_LOST:
                raise RuntimeError(f"turn of {ref.session_id} settled {turn.outcome}, not LOST")
            return turn
        await asyncio.sleep(POLL_S)


def settlement_target(latency: Latency, lease_s: float, store: str) -> Target:
    name = f"{store}: runner death → settled p99 (lease + 1 s)"
    return Target(name, latency.p99 / 1000, lease_s + SETTLE_MARGIN_S, " s")


async def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", help="a store URL (default: a fresh SQLite file)")
    parser.add_argument("--ledger", help="with a redis store, its ledger URL")
    parser.add_argument("--turns", type=int, default=1_000)
    parser.add_argument("--lease", type=float, default=LEASE_S)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="turngate-bench-") as tmp:
        store = args.store or f"sqlite+aiosqlite:///{tmp}/turngate.db"
        port = free_port()
        argv_ = [TURNGATE, "serve", "--listen", f"127.0.0.1:{port}", "--store", store]
        if args.ledger:
            argv_ += ["--ledger", args.ledger]
        env = {k: v for k, v in os.environ.items() if not k.startswith("TURNGATE_")}
        server = await ServerProcess.start("turngate", argv_, env, Path(tmp) / "serve.log")
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                await wait_until(lambda: answers(lambda: turngate_serving(channel)), "turngate")
                latency = await death_to_settlement(Stubs.on(channel), args.turns, args.lease)
        finally:
            await server.stop()
    print(
        f"{args.turns} turns, lease {args.lease:g} s: admission → settled p50 {latency.p50 / 1000:.3f} s, "
        f"p99 {latency.p99 / 1000:.3f} s, max {latency.max / 1000:.3f} s"
    )
    kind = "redis" if store.startswith("redis") else "embedded"
    print(target_table([settlement_target(latency, args.lease, kind)]))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
