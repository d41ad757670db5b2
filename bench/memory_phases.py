"""What sessions cost Redis: an idle session (at growing counts, with the watchdog's sweep timed at
each), a running one, and an event of a session's log as the log grows."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from turngate.service.core import SessionKey

from clones import Template, read_template, write_copies
from ledger_size import project
from redis_memory import RedisUnderTest
from report import Figure, progress
from sweeps import sweep_figures
from workload import Shape, for_each, hold_turn, run_session, session_key, session_keys, turn_steps

# Sessions made through the store whose keys the copies repeat (round robin).
TEMPLATES = 64
# Running sessions beside the idle ones while the watchdog's sweep is timed.
LIVE = 100
LOG_CHECKPOINTS = (1, 10, 100, 1_000)
GIB = 1 << 30
# What Redis needs beyond its data as it grows (allocator slack, rehashing), and what the machine
# keeps for everything else: a step that would not fit is skipped, not swapped.
HEADROOM = 1.3
RESERVE = 2 * GIB


@dataclass(frozen=True, slots=True)
class IdleLadder:
    """Idle sessions at each of `counts`; a step whose Redis would need more than `budget` bytes
    (masters and replicas together) is skipped."""

    counts: tuple[int, ...]
    shape: Shape
    budget: int
    ledger: str  # the ledger the templates are projected into


def available_memory() -> int:
    """MemAvailable of /proc/meminfo, in bytes."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


async def make_templates(redis: RedisUnderTest, prefix: str, ladder: IdleLadder) -> list[Template]:
    """TEMPLATES sessions run through the store, projected into the ledger, read back."""
    store, keys = redis.store(prefix), redis.keyspace(prefix)
    names = session_keys("tpl", range(TEMPLATES))
    await for_each(names, lambda key: run_session(store, key, ladder.shape))
    await project(redis.topology.url, keys, ladder.ledger)
    return [await read_template(redis.client, keys, key) for key in names]


async def idle_phase(redis: RedisUnderTest, ladder: IdleLadder) -> list[Figure]:
    """Copies of the templates, added step by step; at each step Redis's bytes per idle session and
    the watchdog's sweep, with LIVE running sessions in the same keyspace."""
    prefix, where = "idle", redis.name
    store, keys = redis.store(prefix), redis.keyspace(prefix)
    templates = await make_templates(redis, prefix, ladder)
    await for_each(session_keys("live", range(LIVE)), lambda key: hold_turn(store, key))
    figures = await sweep_figures(store, where, 0)
    base, base_replicas = await redis.used_memory(), await redis.used_memory(replicas=True)
    copies = 1 + len(redis.topology.replicas) / len(redis.masters)
    # Until a step has measured it, what MEMORY USAGE says a template holds.
    per_session, made = float(sum(await redis.session_bytes(keys, session_key("tpl", 0)))), 0
    for count in ladder.counts:
        needed = per_session * (count - made) * copies * HEADROOM
        held = (await redis.used_memory() - base) * copies
        room = min(ladder.budget - held, available_memory() - RESERVE)
        if needed > room:
            note = f"needs ~{needed / GIB:.1f} GiB more, {room / GIB:.1f} GiB left in the budget"
            figures.append(
                Figure("idle", where, f"bytes per idle session, {count:,} sessions", None, "B", note)
            )
            progress(f"{where}: {count:,} idle sessions skipped: {note}")
            break
        progress(f"{where}: {count - made:,} more idle sessions (to {count:,})")
        await write_copies(redis.client, keys, templates, session_keys("idle", range(made, count)))
        made = count
        per_session = (await redis.used_memory() - base) / count
        figures.append(
            Figure("idle", where, f"bytes per idle session (used_memory*), {count:,}", per_session, "B")
        )
        if redis.topology.replicas:
            replicas = (await redis.used_memory(replicas=True) - base_replicas) / count
            figures.append(
                Figure("idle", where, f"replicas' bytes per idle session, {count:,}", replicas, "B")
            )
        figures += await sweep_figures(store, where, count)
    figures += await _key_figures(redis, prefix, session_key("tpl", 0), session_key("idle", 0))
    return figures


async def _key_figures(
    redis: RedisUnderTest, prefix: str, template: SessionKey, copy: SessionKey
) -> list[Figure]:
    """MEMORY USAGE of an idle session's keys: the template's, and a copy's (they should match)."""
    keys = redis.keyspace(prefix)
    doc, log = await redis.session_bytes(keys, template)
    copy_doc, copy_log = await redis.session_bytes(keys, copy)
    events = await redis.client.xlen(keys.log(template))
    return [
        Figure("idle", redis.name, "MEMORY USAGE document, idle session", doc, "B"),
        Figure("idle", redis.name, f"MEMORY USAGE log ({events} events), idle session", log, "B"),
        Figure(
            "idle",
            redis.name,
            "MEMORY USAGE document + log, a copy / its template",
            (copy_doc + copy_log) / (doc + log),
            "x",
        ),
    ]


async def active_phase(redis: RedisUnderTest, count: int) -> list[Figure]:
    """`count` sessions with a turn running (admitted, not completed): Redis's bytes for each, with
    the outbox entry of its admission and once the projector has taken it."""
    prefix, where = "active", redis.name
    store, keys = redis.store(prefix), redis.keyspace(prefix)
    base = await redis.used_memory()
    progress(f"{where}: {count:,} running sessions")
    await for_each(session_keys("run", range(count)), lambda key: hold_turn(store, key))
    with_outbox = (await redis.used_memory() - base) / count
    outbox = await redis.bucket_bytes(keys, "outbox") / count
    sets = (await redis.bucket_bytes(keys, "deadlines") + await redis.bucket_bytes(keys, "active")) / count
    await redis.empty_outboxes(keys)
    projected = (await redis.used_memory() - base) / count
    doc, log = await redis.session_bytes(keys, session_key("run", 0))
    return [
        Figure("active", where, f"bytes per running session (used_memory*), {count:,}", projected, "B"),
        Figure("active", where, "... before the projector takes its outbox entry", with_outbox, "B"),
        Figure("active", where, "MEMORY USAGE outbox entry (unprojected commit)", outbox, "B"),
        Figure("active", where, "MEMORY USAGE deadline + active sets, per running session", sets, "B"),
        Figure("active", where, "MEMORY USAGE document, running session", doc, "B"),
        Figure("active", where, "MEMORY USAGE log (1 event), running session", log, "B"),
    ]


async def log_phase(redis: RedisUnderTest, shape: Shape) -> list[Figure]:
    """One session's turns, one after the other, until its log holds the last LOG_CHECKPOINTS
    events (turngate's default event_retention keeps 1,000): MEMORY USAGE of the log per event at
    each checkpoint (the first time the log reaches it)."""
    prefix, where = "log", redis.name
    store, keys = redis.store(prefix), redis.keyspace(prefix)
    key = session_key("log", 0)
    figures: list[Figure] = []
    pending = list(LOG_CHECKPOINTS)
    turn = 0
    while pending:
        async for _ in turn_steps(store, key, f"turn-{turn}", shape.tool_calls_per_turn):
            events = await redis.client.xlen(keys.log(key))
            if pending and events >= pending[0]:
                pending.pop(0)
                log = await redis.key_bytes(keys.log(key))
                figures.append(
                    Figure("log", where, f"log bytes per event, {events:,} events", log / events, "B")
                )
        turn += 1
    return figures
