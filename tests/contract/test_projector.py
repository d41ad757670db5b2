"""The ledger projector (redis mode) on a real Redis and a real ledger of each SQL backend: the ledger
it builds is the one the SQL store builds, every event is recorded once and in order however the
outbox entries are delivered, and nothing is acknowledged before it is recorded or ever dropped."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Protocol, cast

import pytest
from redis.asyncio import Redis
from redis.typing import KeyT, StreamIdT
from sqlalchemy import event, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.commands import QUEUE_HISTORY, STEERED_TURNS, play_a_queue, play_steers
from tests.support.projection import (
    SECOND,
    WAIT_TIMEOUT_S,
    Rows,
    commits_log,
    cursor_of,
    each_event_committed_once,
    expected_rows,
    heads,
    lag_is_zero,
    ledger_rows,
    log_of,
    marks,
    pending_count,
    play_turn,
    reclaimed_all,
    rows_recording,
    stopped,
)
from tests.support.shared_redis import REDIS_SERVER
from tests.support.stores import open_redis_store, stream_entries
from tests.support.waiting import eventually
from turngate.service.codec import dump_event_body
from turngate.service.core import (
    Admit,
    Admitted,
    Cancel,
    Complete,
    RecordInteraction,
    RecordToolCall,
    ResolveInteraction,
    Retire,
    Retired,
    SessionKey,
    ToolCallStatus,
    TurnAdmitted,
    TurnOutcome,
)
from turngate.service.ledger.projector import PRUNE_IDLE_S, AfterCommit, LedgerProjector
from turngate.service.ledger.reads import Ledger
from turngate.service.ledger.replay import replay
from turngate.service.ports.store import Store, StoreUnavailable
from turngate.service.sql.engine import make_engine
from turngate.service.sql.tables import dialect_insert, ledger_cursors
from turngate.service.store.redis.keys import LEDGER_GROUP, Keyspace, LogEntries, log_id, member
from turngate.service.store.redis.outbox import RedisOutbox
from turngate.service.store.redis.store import RedisStore
from turngate.service.store.sql import SqlStore

pytestmark = pytest.mark.redis

RECLAIM_IDLE_S = 0.2
MAX_DELIVERIES = 3
PROJECT = "p"


class MakeProjector(Protocol):
    async def __call__(
        self,
        consumer: str = "a",
        *,
        reclaim_idle: float = RECLAIM_IDLE_S,
        max_deliveries: int = MAX_DELIVERIES,
        after_commit: AfterCommit | None = None,
        prune_idle: float = PRUNE_IDLE_S,
    ) -> LedgerProjector: ...


@pytest.fixture
async def ledger(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = make_engine(database_url)
    yield engine
    await engine.dispose()


@pytest.fixture
async def redis() -> AsyncIterator[Redis]:
    client = Redis.from_url(REDIS_SERVER)
    yield client
    await client.aclose()


@pytest.fixture
async def make_projector(redis_keyspace: Keyspace, ledger: AsyncEngine) -> AsyncIterator[MakeProjector]:
    """Projectors (replicas, each with its own Redis connections) on this test's keyspace and ledger."""
    made: list[LedgerProjector] = []

    async def make(
        consumer: str = "a",
        *,
        reclaim_idle: float = RECLAIM_IDLE_S,
        max_deliveries: int = MAX_DELIVERIES,
        after_commit: AfterCommit | None = None,
        prune_idle: float = PRUNE_IDLE_S,
    ) -> LedgerProjector:
        projector = LedgerProjector(
            RedisOutbox(Redis.from_url(REDIS_SERVER), redis_keyspace, consumer=consumer, batch=100),
            ledger,
            reclaim_idle=reclaim_idle,
            max_deliveries=max_deliveries,
            prune_idle=prune_idle,
            concurrency=4,
            after_commit=after_commit,
        )
        await projector.create_groups()
        made.append(projector)
        return projector

    yield make
    for projector in made:
        await projector.close()


async def drain(projector: LedgerProjector) -> int:
    """Polls until no new entries are left (each poll reads at most `batch` per bucket)."""
    read = 0
    while polled := await projector.poll():
        read += polled
    return read


def sessions(n: int) -> list[SessionKey]:
    return [SessionKey(PROJECT, f"s{i}") for i in range(n)]


async def play_turns(store: Store, keys: list[SessionKey], turns: int = 1, first: int = 0) -> None:
    """Turns t<first>, t<first+1>… in every session (the sessions at once)."""
    for turn in range(first, first + turns):
        await asyncio.gather(*(play_turn(store, key, f"t{turn}") for key in keys))


async def test_projection_equals_the_sql_store_ledger_for_the_same_commands(
    database_url: str, ledger: AsyncEngine, redis_store: RedisStore, make_projector: MakeProjector
) -> None:
    sql_store = SqlStore(make_engine(database_url))
    on_sql, on_redis = SessionKey("p-sql", "s"), SessionKey("p-redis", "s")
    for store, key in ((sql_store, on_sql), (redis_store, on_redis)):
        await run_every_kind_of_event(store, key)
    await sql_store.close()
    projector = await make_projector()

    await drain(projector)

    assert await projector.lag() == 0
    assert (
        await cursor_of(ledger, on_redis)
        == (await log_of(redis_store.client, redis_store.keys, on_redis))[-1].seq
    )
    projected = await ledger_rows(ledger, "p-redis")
    # The rows record() writes for these events; but for the clock, those the SQL store writes.
    assert projected == await expected_rows(redis_store.client, redis_store.keys, ledger, [on_redis])
    assert without_instants(projected) == without_instants(await ledger_rows(ledger, "p-sql"))
    # What GetTurn answers from the log while the ledger lags is what the ledger holds now.
    replayed = replay(on_redis, (), await log_of(redis_store.client, redis_store.keys, on_redis))
    read = Ledger(ledger)
    assert {view.turn_id for view in replayed.values()} == {"t1", "t2", "t3", *QUEUE_HISTORY, *STEERED_TURNS}
    for view in replayed.values():
        assert await read.get_turn(on_redis, view.turn_id) == view


async def run_every_kind_of_event(store: Store, key: SessionKey) -> None:
    """Stop before start, a turn stopped with calls and interactions of every outcome, a completed
    turn and a force-stopped one, then turns that waited in the queue and left it each way, then
    steers that end each way."""
    stop = Cancel("t0", "changed my mind", False, "", 30 * SECOND, 600 * SECOND)
    await store.apply(key, stop)
    first = (
        await store.apply(key, Admit("t1", "runner", 20 * SECOND, "00-" + "1" * 32 + "-" + "2" * 16 + "-01"))
    ).reply
    assert isinstance(first, Admitted)
    gen = first.generation
    for command in (
        RecordToolCall("t1", gen, "c-open", "search", ToolCallStatus.OPEN),
        RecordToolCall("t1", gen, "c-ok", "read", ToolCallStatus.OPEN),
        RecordToolCall("t1", gen, "c-ok", "read", ToolCallStatus.SUCCEEDED),
        RecordToolCall("t1", gen, "c-bad", "write", ToolCallStatus.FAILED, "disk full"),
        RecordInteraction("t1", gen, "i-answered", "approval"),
        ResolveInteraction("i-answered", "yes"),
        RecordInteraction("t1", gen, "i-pending", "question"),
        Cancel("t1", "user pressed stop", False, "", 30 * SECOND, 600 * SECOND),
        Complete("t1", gen, TurnOutcome.CANCELLED),
    ):
        await store.apply(key, command)
    await play_turn(store, key, "t2")
    third = (await store.apply(key, Admit("t3", "runner", 20 * SECOND))).reply
    assert isinstance(third, Admitted)
    await store.apply(key, Cancel("t3", "now", True, "", 30 * SECOND, 600 * SECOND))
    await play_a_queue(store, key, traceparent="00-" + "3" * 32 + "-" + "4" * 16 + "-01")
    await play_steers(store, key)


def without_instants(rows: Rows) -> Rows:
    """`rows` with every store-clock value (times and generations, also inside event bodies) and
    the time between two (how long a promoted turn waited) blanked: two runs of the same commands
    write the same rows but for those."""

    def blanked(value: Any) -> Any:
        if isinstance(value, str) and value.startswith("{"):
            return blanked(json.loads(value))
        if isinstance(value, dict):
            return {k: "<duration>" if k == "waited" else blanked(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(blanked(v) for v in value)
        is_instant = isinstance(value, int) and not isinstance(value, bool) and value > 10**14
        return "<instant>" if is_instant else value

    return {name: [blanked(row) for row in table] for name, table in rows.items()}


async def test_redelivered_entries_change_nothing(
    redis: Redis,
    redis_keyspace: Keyspace,
    ledger: AsyncEngine,
    redis_store: RedisStore,
    make_projector: MakeProjector,
) -> None:
    keys = sessions(3)
    await play_turns(redis_store, keys)
    cursors, note = commits_log()
    projector = await make_projector(after_commit=note)
    await projector.poll()
    before = await ledger_rows(ledger, PROJECT)
    cursors.clear()

    # The same outbox entries again, as a replica that crashed before acknowledging would leave them.
    for key in keys:
        outbox, epoch = redis_keyspace.outbox(redis_keyspace.bucket(key)), (await redis_store.load(key)).epoch
        for seq in range(1, 5):
            await redis.xadd(outbox, {"k": member(key), "s": seq, "epoch": epoch})
    assert await projector.poll() == 12

    assert cursors == {}
    assert await ledger_rows(ledger, PROJECT) == before
    assert before == await expected_rows(redis, redis_keyspace, ledger, keys)
    assert await projector.lag() == 0


async def test_entries_are_acknowledged_only_after_the_commit(
    redis: Redis,
    redis_keyspace: Keyspace,
    ledger: AsyncEngine,
    redis_store: RedisStore,
    make_projector: MakeProjector,
) -> None:
    keys = sessions(2)
    await play_turns(redis_store, keys)
    seen: list[tuple[int, int | None, int, int]] = []

    async def look(key: SessionKey, cursor: int) -> None:
        # From other connections: what is committed, what is still pending, the mark.
        committed = await cursor_of(ledger, key)
        pending = await pending_count(redis, redis_keyspace)
        seen.append((cursor, committed, pending, (await marks(redis, redis_keyspace, [key]))[key]))

    projector = await make_projector(after_commit=look)
    await projector.poll()

    # Each commit was visible to others while all 8 entries were still pending and no mark raised.
    assert seen == [(4, 4, 8, 0), (4, 4, 8, 0)]
    assert await pending_count(redis, redis_keyspace) == 0
    assert await marks(redis, redis_keyspace, keys) == dict.fromkeys(keys, 4)


async def test_a_projector_failing_between_commit_and_ack_leaves_its_entries_for_another(
    redis: Redis,
    redis_keyspace: Keyspace,
    ledger: AsyncEngine,
    redis_store: RedisStore,
    make_projector: MakeProjector,
) -> None:
    keys = sessions(3)
    await play_turns(redis_store, keys)

    async def crash(_key: SessionKey, _cursor: int) -> None:
        raise RuntimeError("died between commit and ack")

    doomed = await make_projector("doomed", after_commit=crash)
    with pytest.raises(RuntimeError):
        await doomed.poll()
    committed = {key for key in keys if await cursor_of(ledger, key) == 4}
    assert committed  # some sessions were recorded, and none of their entries acknowledged
    assert await pending_count(redis, redis_keyspace) == 12
    cursors, note = commits_log()
    heir = await make_projector("heir", after_commit=note)

    await eventually(lambda: reclaimed_all(heir), timeout_s=WAIT_TIMEOUT_S)

    assert set(cursors) == set(keys) - committed  # the recorded sessions were only acknowledged
    assert await ledger_rows(ledger, PROJECT) == await expected_rows(redis, redis_keyspace, ledger, keys)
    assert await marks(redis, redis_keyspace, keys) == dict.fromkeys(keys, 4)


async def test_a_consumer_that_read_and_died_is_reclaimed_after_reclaim_idle(
    redis: Redis,
    redis_keyspace: Keyspace,
    ledger: AsyncEngine,
    redis_store: RedisStore,
    make_projector: MakeProjector,
) -> None:
    keys = sessions(4)
    await play_turns(redis_store, keys)
    heir = await make_projector("heir")
    # A consumer reads everything and dies before recording any of it.
    streams: dict[KeyT, StreamIdT] = {redis_keyspace.outbox(b): ">" for b in redis_keyspace.all_buckets()}
    read = cast(list[tuple[bytes, LogEntries]], await redis.xreadgroup(LEDGER_GROUP, "dead", streams))
    assert sum(len(entries) for _, entries in read) == 16
    loop = asyncio.get_running_loop()
    died_at = loop.time()

    assert await heir.poll() == 0  # nothing new, and not idle long enough to take over
    assert await heir.reclaim() == 0
    await eventually(lambda: reclaimed_all(heir), timeout_s=WAIT_TIMEOUT_S)

    assert loop.time() - died_at >= RECLAIM_IDLE_S
    assert await pending_count(redis, redis_keyspace) == 0
    assert await ledger_rows(ledger, PROJECT) == await expected_rows(redis, redis_keyspace, ledger, keys)


async def test_two_projectors_racing_on_the_same_entries_project_each_event_once(
    redis: Redis,
    redis_keyspace: Keyspace,
    ledger: AsyncEngine,
    redis_store: RedisStore,
    make_projector: MakeProjector,
) -> None:
    keys = sessions(6)
    await play_turns(redis_store, keys, turns=2)
    cursors, note = commits_log()
    first = await make_projector("first", after_commit=note)
    rival = await make_projector("rival", reclaim_idle=0.001, after_commit=note)
    async with ledger.connect() as blocker:
        # Holds the sessions' cursor rows (on SQLite, the database) until both projectors are at them.
        rows = [
            {"project_id": k.project_id, "session_id": k.session_id, "epoch": epoch, "seq": 0}
            for k, epoch in zip(keys, [(await redis_store.load(k)).epoch for k in keys], strict=True)
        ]
        await blocker.execute(dialect_insert(ledger.dialect.name, ledger_cursors), rows)
        first_polls = asyncio.create_task(first.poll())
        await eventually(lambda: has_pending(redis, redis_keyspace, "first", 48), timeout_s=WAIT_TIMEOUT_S)
        await asyncio.sleep(0.002)  # the 1 ms that makes the entries idle enough for the rival
        rival_reclaims = asyncio.create_task(rival.reclaim())
        await eventually(lambda: has_pending(redis, redis_keyspace, "rival"), timeout_s=WAIT_TIMEOUT_S)
        await blocker.commit()

    assert await first_polls == 48
    assert await rival_reclaims > 0
    assert await pending_count(redis, redis_keyspace) == 0
    assert each_event_committed_once(cursors, await heads(redis, redis_keyspace, keys))
    assert await ledger_rows(ledger, PROJECT) == await expected_rows(redis, redis_keyspace, ledger, keys)
    assert first.dead_letters == rival.dead_letters == 0


async def has_pending(redis: Redis, keys: Keyspace, consumer: str, n: int = 1) -> bool:
    """Whether `consumer` has at least `n` entries pending."""
    counts = [await redis.xpending(keys.outbox(bucket), LEDGER_GROUP) for bucket in keys.all_buckets()]
    mine = [
        int(c["pending"]) for count in counts for c in count["consumers"] if c["name"] == consumer.encode()
    ]
    return sum(mine) >= n


async def test_a_poison_event_is_dead_lettered_while_others_commit(
    redis: Redis,
    redis_keyspace: Keyspace,
    ledger: AsyncEngine,
    redis_store: RedisStore,
    make_projector: MakeProjector,
) -> None:
    keys = sessions(3)
    poisoned = keys[0]
    await play_turns(redis_store, keys)
    # Two more events in one session's log, as the store writes them: one no version can read.
    log, outbox = redis_keyspace.log(poisoned), redis_keyspace.outbox(redis_keyspace.bucket(poisoned))
    later = TurnAdmitted("t9", "runner", 10**16, 10**16, 10**16 + 20 * SECOND)
    epoch = (await redis_store.load(poisoned)).epoch
    await redis.xadd(log, {"t": 10**16, "e": b'{"kind": "from_the_future"}', "epoch": epoch}, id=log_id(5))
    await redis.xadd(log, {"t": 10**16, "e": dump_event_body(later), "epoch": epoch}, id=log_id(6))
    await redis.xadd(outbox, {"k": member(poisoned), "s": 6, "epoch": epoch})
    projector = await make_projector(max_deliveries=2)

    await projector.poll()

    # The other sessions and the poisoned one's good events committed; the poison waits a retry.
    assert [await cursor_of(ledger, key) for key in keys] == [4, 4, 4]
    assert projector.dead_letters == 0
    assert await projector.lag() == 5  # the poisoned session's entries
    await eventually(lambda: reclaimed_all(projector), timeout_s=WAIT_TIMEOUT_S)

    assert projector.dead_letters == 1
    assert await cursor_of(ledger, poisoned) == 6
    dead = await stream_entries(redis, redis_keyspace.dead_letters(redis_keyspace.bucket(poisoned)))
    assert len(dead) == 1
    fields = dead[0][1]
    assert (fields[b"k"], fields[b"s"], fields[b"t"]) == (
        member(poisoned).encode(),
        b"5",
        str(10**16).encode(),
    )
    assert fields[b"e"] == b'{"kind": "from_the_future"}'
    assert fields[b"reason"].startswith(b"ValidationError")
    readable = {key: await log_of(redis, redis_keyspace, key) for key in keys[1:]}
    readable[poisoned] = [
        *await redis_store.events_after(poisoned, 0, 4),
        *await redis_store.events_after(poisoned, 5, 1),
    ]
    expected = await rows_recording(ledger, readable)
    assert await ledger_rows(ledger, PROJECT) == expected


async def test_events_missing_from_the_log_and_malformed_entries_are_dead_lettered(
    redis: Redis,
    redis_keyspace: Keyspace,
    ledger: AsyncEngine,
    redis_store: RedisStore,
    make_projector: MakeProjector,
) -> None:
    key = SessionKey(PROJECT, "s")
    await play_turn(redis_store, key, "t1")
    await redis.xdel(redis_keyspace.log(key), log_id(2), log_id(3))  # as if Redis lost them
    bucket = redis_keyspace.bucket(key)
    await redis.xadd(redis_keyspace.outbox(bucket), {"k": "no-session-here", "s": "x"})
    projector = await make_projector()

    await projector.poll()

    assert projector.dead_letters == 2
    assert await projector.lag() == 0
    assert await cursor_of(ledger, key) == 4
    dead = [fields for _, fields in await stream_entries(redis, redis_keyspace.dead_letters(bucket))]
    assert [(d[b"k"], d[b"s"], d[b"reason"].split(b":")[0]) for d in dead] == [
        (b"no-session-here", b"x", b"malformed outbox entry"),
        (member(key).encode(), b"3", b"events 2..3 are missing from the session log"),
    ]
    remaining = await log_of(redis, redis_keyspace, key)
    assert [e.seq for e in remaining] == [1, 4]
    assert await ledger_rows(ledger, PROJECT) == await rows_recording(ledger, {key: remaining})


@pytest.fixture
def ledger_outage(ledger: AsyncEngine) -> Iterator[Callable[[bool], None]]:
    """Switches the ledger off and on: while off, every statement fails as a lost connection does."""
    down = False

    def fail_while_down(*_args: Any) -> None:
        if down:
            raise OperationalError("ledger", None, ConnectionRefusedError("ledger is down"))

    def switch(off: bool) -> None:
        nonlocal down
        down = off

    event.listen(ledger.sync_engine, "before_cursor_execute", fail_while_down)
    yield switch
    event.remove(ledger.sync_engine, "before_cursor_execute", fail_while_down)


async def test_while_the_ledger_is_down_nothing_is_acknowledged_then_all_is_projected_once_in_order(
    redis: Redis,
    redis_keyspace: Keyspace,
    ledger: AsyncEngine,
    redis_store: RedisStore,
    make_projector: MakeProjector,
    ledger_outage: Callable[[bool], None],
) -> None:
    keys = sessions(4)
    ledger_outage(True)
    await play_turns(redis_store, keys)
    cursors, note = commits_log()
    projector = await make_projector(after_commit=note)
    redis_store.add_listener(projector.on_commit)
    running = asyncio.create_task(projector.run())

    async def retried_beyond_max_deliveries() -> bool:
        pending = [
            entry
            for bucket in redis_keyspace.all_buckets()
            for entry in await redis.xpending_range(
                redis_keyspace.outbox(bucket), LEDGER_GROUP, "-", "+", 100
            )
        ]
        return max((int(e["times_delivered"]) for e in pending), default=0) > MAX_DELIVERIES

    await eventually(retried_beyond_max_deliveries, timeout_s=WAIT_TIMEOUT_S)
    await play_turns(redis_store, keys[:2], first=1)  # coordination keeps working
    assert await projector.lag() == 24
    assert cursors == {}  # and nothing was committed
    assert await marks(redis, redis_keyspace, keys) == dict.fromkeys(keys, 0)
    ledger_outage(False)

    await eventually(lambda: lag_is_zero(projector), timeout_s=WAIT_TIMEOUT_S)

    await stopped(running)
    assert projector.dead_letters == 0
    assert each_event_committed_once(cursors, await heads(redis, redis_keyspace, keys))
    assert await ledger_rows(ledger, PROJECT) == await expected_rows(redis, redis_keyspace, ledger, keys)


async def test_the_log_is_never_trimmed_below_what_the_ledger_recorded(
    redis: Redis, redis_keyspace: Keyspace, ledger: AsyncEngine, make_projector: MakeProjector
) -> None:
    key = SessionKey(PROJECT, "s")
    store = open_redis_store(REDIS_SERVER, redis_keyspace, retention=2)
    for turn in range(3):
        await play_turn(store, key, f"t{turn}")

    # Retention alone would keep 2 events; nothing is recorded yet, so all 12 stay.
    assert [e.seq for e in await log_of(redis, redis_keyspace, key)] == list(range(1, 13))
    projector = await make_projector()
    await projector.poll()
    assert await marks(redis, redis_keyspace, [key]) == {key: 12}
    # The store trims on its writes: down to the mark, keeping the unrecorded 13-16.
    await play_turn(store, key, "t3")
    assert [e.seq for e in await log_of(redis, redis_keyspace, key)] == [13, 14, 15, 16]
    await projector.poll()
    await play_turn(store, key, "t4")
    assert [e.seq for e in await log_of(redis, redis_keyspace, key)] == [17, 18, 19, 20]
    await store.close()

    await projector.poll()

    assert await cursor_of(ledger, key) == 20
    assert [row[1] for row in (await ledger_rows(ledger, PROJECT))["session_events"]] == list(range(1, 21))


async def test_an_entry_deleted_from_the_outbox_while_pending_is_only_acknowledged(
    redis: Redis,
    redis_keyspace: Keyspace,
    ledger: AsyncEngine,
    redis_store: RedisStore,
    make_projector: MakeProjector,
    ledger_outage: Callable[[bool], None],
) -> None:
    key = SessionKey(PROJECT, "s")
    await play_turn(redis_store, key, "t1")
    projector = await make_projector()
    ledger_outage(True)
    with pytest.raises(StoreUnavailable):
        await projector.poll()
    outbox = redis_keyspace.outbox(redis_keyspace.bucket(key))
    first, *_ = await stream_entries(redis, outbox)
    await redis.xdel(outbox, first[0])  # by hand, while this projector has it pending
    ledger_outage(False)

    running = asyncio.create_task(projector.run())  # which retries its own pending entries first
    await eventually(lambda: nothing_pending(redis, redis_keyspace), timeout_s=WAIT_TIMEOUT_S)
    await stopped(running)

    assert projector.dead_letters == 0
    assert await cursor_of(ledger, key) == 4
    assert await ledger_rows(ledger, PROJECT) == await expected_rows(redis, redis_keyspace, ledger, [key])


async def nothing_pending(redis: Redis, keys: Keyspace) -> bool:
    return await pending_count(redis, keys) == 0


async def test_consumer_groups_lost_with_the_outboxes_are_made_again(
    redis: Redis,
    redis_keyspace: Keyspace,
    ledger: AsyncEngine,
    redis_store: RedisStore,
    make_projector: MakeProjector,
) -> None:
    keys = sessions(2)
    projector = await make_projector()
    redis_store.add_listener(projector.on_commit)
    running = asyncio.create_task(projector.run())
    await play_turns(redis_store, keys)
    await eventually(lambda: lag_is_zero(projector), timeout_s=WAIT_TIMEOUT_S)

    # As after a Redis restart without persistence: the outboxes and their consumer group are gone.
    await redis.delete(*(redis_keyspace.outbox(bucket) for bucket in redis_keyspace.all_buckets()))
    await play_turns(redis_store, keys, first=1)
    await eventually(lambda: lag_is_zero(projector), timeout_s=WAIT_TIMEOUT_S)
    await stopped(running)

    assert await ledger_rows(ledger, PROJECT) == await expected_rows(redis, redis_keyspace, ledger, keys)


async def test_an_entry_delivered_to_two_projectors_at_once_is_dead_lettered_once(
    redis: Redis,
    redis_keyspace: Keyspace,
    ledger: AsyncEngine,
    redis_store: RedisStore,
    make_projector: MakeProjector,
) -> None:
    """The first projector dead-letters a malformed entry and commits a session's events; before
    it acknowledges anything, a rival takes every pending entry over and projects them too."""
    key = SessionKey(PROJECT, "s")
    await play_turn(redis_store, key, "t1")
    bucket = redis_keyspace.bucket(key)
    await redis.xadd(redis_keyspace.outbox(bucket), {"k": "no-session-here", "s": "x"})
    rival = await make_projector("rival", reclaim_idle=0.0001)  # 0 ms: it takes over whatever is pending
    taken_over: list[int] = []

    async def rival_takes_over(_key: SessionKey, _cursor: int) -> None:
        taken_over.append(await rival.reclaim())

    first = await make_projector("first", after_commit=rival_takes_over)

    assert await first.poll() == 5
    assert taken_over == [5], "the rival had every entry delivered again, the malformed one too"
    dead = await stream_entries(redis, redis_keyspace.dead_letters(bucket))
    assert [(fields[b"k"], fields[b"s"]) for _, fields in dead] == [(b"no-session-here", b"x")]
    assert (first.dead_letters, rival.dead_letters) == (1, 0)
    assert await pending_count(redis, redis_keyspace) == 0
    assert await ledger_rows(ledger, PROJECT) == await expected_rows(redis, redis_keyspace, ledger, [key])


async def test_an_event_dead_lettered_before_a_commit_that_failed_is_not_dead_lettered_again(
    redis: Redis,
    redis_keyspace: Keyspace,
    ledger: AsyncEngine,
    redis_store: RedisStore,
    make_projector: MakeProjector,
) -> None:
    """A poison event is dead-lettered and the cursor moved past it in one transaction, whose
    commit fails (the ledger goes away right after the dead letter): the retry skips it again."""
    key = SessionKey(PROJECT, "s")
    await play_turn(redis_store, key, "t1")
    epoch = (await redis_store.load(key)).epoch
    bucket = redis_keyspace.bucket(key)
    poison = b'{"kind": "from_the_future"}'
    await redis.xadd(redis_keyspace.log(key), {"t": 10**16, "e": poison, "epoch": epoch}, id=log_id(5))
    await redis.xadd(redis_keyspace.outbox(bucket), {"k": member(key), "s": 5, "epoch": epoch})
    projector = await make_projector(max_deliveries=1)
    failed: list[str] = []

    def fail_the_move_after_the_dead_letter(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if projector.dead_letters and not failed and statement.startswith("UPDATE ledger_cursors"):
            failed.append(statement)
            raise OperationalError("ledger", None, ConnectionResetError("the ledger went away"))

    event.listen(ledger.sync_engine, "before_cursor_execute", fail_the_move_after_the_dead_letter)
    try:
        with pytest.raises(StoreUnavailable):
            await projector.poll()
        assert failed, "the transaction that dead-lettered event 5 failed"
        assert await cursor_of(ledger, key) == 4
        await eventually(lambda: reclaimed_all(projector), timeout_s=WAIT_TIMEOUT_S)
    finally:
        event.remove(ledger.sync_engine, "before_cursor_execute", fail_the_move_after_the_dead_letter)

    assert await cursor_of(ledger, key) == 5
    dead = await stream_entries(redis, redis_keyspace.dead_letters(bucket))
    assert [(fields[b"s"], fields[b"e"]) for _, fields in dead] == [(b"5", poison)]
    assert projector.dead_letters == 1


async def consumers(redis: Redis, keys: Keyspace) -> dict[str, int]:
    """Every consumer of the group, over all buckets, with the entries pending with it."""
    found: dict[str, int] = {}
    for bucket in keys.all_buckets():
        for consumer in await redis.xinfo_consumers(keys.outbox(bucket), LEDGER_GROUP):
            name = consumer["name"].decode()
            found[name] = found.get(name, 0) + int(consumer["pending"])
    return found


async def test_consumers_of_projectors_that_are_gone_are_pruned_once_they_hold_nothing(
    redis: Redis,
    redis_keyspace: Keyspace,
    ledger: AsyncEngine,
    redis_store: RedisStore,
    make_projector: MakeProjector,
) -> None:
    keys = sessions(2)
    await play_turns(redis_store, keys)
    # A bound of 0 ms: idle for any time at all, so nothing here waits for the clock.
    projector = await make_projector("live", prune_idle=0.0001)
    # Two processes that are gone: one with nothing pending, one that read an entry and died.
    first_outbox = redis_keyspace.outbox(redis_keyspace.bucket(keys[0]))
    await redis.xgroup_createconsumer(first_outbox, LEDGER_GROUP, "gone-empty")
    await redis.xreadgroup(LEDGER_GROUP, "gone-holding", {first_outbox: ">"}, count=1)
    assert await projector.poll() == 7
    assert await consumers(redis, redis_keyspace) == {"gone-empty": 0, "gone-holding": 1, "live": 0}

    assert await projector.prune() == {"gone-empty"}
    assert await consumers(redis, redis_keyspace) == {"gone-holding": 1, "live": 0}, "its entry is kept"
    await eventually(lambda: reclaimed_all(projector), timeout_s=WAIT_TIMEOUT_S)
    assert await projector.prune() == {"gone-holding"}

    assert await consumers(redis, redis_keyspace) == {"live": 0}
    assert await ledger_rows(ledger, PROJECT) == await expected_rows(redis, redis_keyspace, ledger, keys)


async def test_a_live_projector_pruned_with_nothing_pending_goes_on_under_its_name(
    redis: Redis,
    redis_keyspace: Keyspace,
    ledger: AsyncEngine,
    redis_store: RedisStore,
    make_projector: MakeProjector,
) -> None:
    """A bound too short for a live projector costs nothing: no entry is pending with a consumer
    when it is removed, and its next read makes it again."""
    keys = sessions(2)
    await play_turns(redis_store, keys)
    pruner = await make_projector("pruner", prune_idle=0.0001)
    other = await make_projector("other")
    assert await other.poll() == 8
    assert "other" in await consumers(redis, redis_keyspace)

    assert await pruner.prune() == {"other"}
    await play_turns(redis_store, keys, first=1)

    assert await other.poll() == 8
    assert await consumers(redis, redis_keyspace) == {"other": 0}
    assert await lag_is_zero(other)
    assert await ledger_rows(ledger, PROJECT) == await expected_rows(redis, redis_keyspace, ledger, keys)


async def test_r1_a_session_that_left_redis_and_came_back_is_recorded_as_a_new_run_not_a_lost_history(
    redis: Redis,
    redis_keyspace: Keyspace,
    ledger: AsyncEngine,
    redis_store: RedisStore,
    make_projector: MakeProjector,
    caplog: pytest.LogCaptureFixture,
) -> None:
    keys = sessions(3)
    await play_turns(redis_store, keys)
    projector = await make_projector()
    await projector.poll()
    for key in keys:
        assert (await redis_store.apply(key, Retire(1))).reply == Retired(True)
    await play_turns(redis_store, keys, first=1)
    back = [(await redis_store.load(key)).epoch for key in keys]

    with caplog.at_level(logging.WARNING, logger="turngate.projector"):
        await projector.poll()
        await projector.poll()

    assert projector.lost_histories == 0
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], "nothing was lost"
    assert await projector.lag() == 0
    async with ledger.connect() as conn:
        followed = {
            (row.session_id, row.epoch, row.seq) for row in await conn.execute(select(ledger_cursors))
        }
    assert followed == {(key.session_id, epoch, 4) for key, epoch in zip(keys, back, strict=True)}
    history = await ledger_rows(ledger, PROJECT)
    turns = {(row[0], row[2]) for row in history["turns"]}
    assert turns == {(key.session_id, turn) for key in keys for turn in ("t0", "t1")}, "both runs, whole"
