"""The Redis store beyond the shared contract: its one compare-and-set script under forced
contention and when it fails, script reloading, cluster slots, log positions and trimming, the
outbox, and the deadline index spread over buckets."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import os
import subprocess
import sys
import zlib
from collections.abc import AsyncIterator, Awaitable
from importlib.resources import files
from typing import Protocol, TypeVar

import pytest
from redis import exceptions as redis_errors
from redis.asyncio import Redis
from redis.crc import key_slot

from tests.support.commands import KEY, SECOND, admit, open_call, stop
from tests.support.shared_redis import REDIS_SERVER
from tests.support.stores import (
    MAX_ATTEMPTS,
    REDIS_RETENTION,
    open_redis_store,
    redis_contents,
    stream_entries,
)
from tests.support.topologies import RedisProcess
from turngate.service.core import (
    Admit,
    Command,
    Complete,
    Directive,
    Heartbeat,
    HeartbeatReply,
    Retire,
    Retired,
    Session,
    SessionKey,
    TurnOutcome,
)
from turngate.service.ports.store import BeforeWrite, StoreContention, Unrecorded
from turngate.service.store.redis import store as redis_store_module
from turngate.service.store.redis.connection import POOL_SIZE
from turngate.service.store.redis.keys import Keyspace, member
from turngate.service.store.redis.store import RedisStore

pytestmark = pytest.mark.redis
T = TypeVar("T")

# The SHA1 that EVALSHA runs the compare-and-set script by.
CAS_SHA = hashlib.sha1(files("turngate.service.store.redis").joinpath("cas.lua").read_bytes()).hexdigest()


class OpenRedisStore(Protocol):
    def __call__(
        self,
        *,
        retention: int = REDIS_RETENTION,
        max_event_age: int | None = None,
        max_attempts: int = MAX_ATTEMPTS,
    ) -> RedisStore: ...


@pytest.fixture
async def open_replica(redis_keyspace: Keyspace) -> AsyncIterator[OpenRedisStore]:
    """Opens Redis stores (replicas, each with its own connections) on this test's keyspace."""
    opened: list[RedisStore] = []

    def open_one(
        *,
        retention: int = REDIS_RETENTION,
        max_event_age: int | None = None,
        max_attempts: int = MAX_ATTEMPTS,
    ) -> RedisStore:
        store = open_redis_store(
            REDIS_SERVER,
            redis_keyspace,
            retention=retention,
            max_event_age=max_event_age,
            max_attempts=max_attempts,
        )
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        await store.close()


async def write_events(store: RedisStore, count: int) -> int:
    """Admits turn t1 and opens tool calls until KEY's log holds `count` events; its generation."""
    lease = await admit(store, KEY, "t1")
    for i in range(count - 1):
        await store.apply(KEY, open_call("t1", lease.generation, f"c{i}"))
    return lease.generation


async def log_ids(client: Redis, keys: Keyspace) -> list[bytes]:
    return [entry_id for entry_id, _ in await stream_entries(client, keys.log(KEY))]


def stream_ids(first: int, last: int) -> list[bytes]:
    return [f"{seq}-0".encode() for seq in range(first, last + 1)]


async def outbox_entries(client: Redis, keys: Keyspace, key: SessionKey) -> list[tuple[str, int]]:
    """The outbox of `key`'s bucket as (session member, last seq written) pairs."""
    entries = await stream_entries(client, keys.outbox(keys.bucket(key)))
    return [(fields[b"k"].decode(), int(fields[b"s"])) for _, fields in entries]


async def keys_written_by(client: Redis, keys: Keyspace, write: Awaitable[T]) -> tuple[T, set[bytes]]:
    """What `write` returned, and the keys whose contents it changed."""
    before = await redis_contents(client, keys)
    result = await write
    after = await redis_contents(client, keys)
    return result, {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}


def sessions_in_distinct_buckets(keys: Keyspace, count: int) -> list[SessionKey]:
    found: dict[int, SessionKey] = {}
    candidates = (SessionKey("p", f"s{i}") for i in itertools.count())
    while len(found) < count:
        key = next(candidates)
        found.setdefault(keys.bucket(key), key)
    return list(found.values())


async def test_two_writers_deciding_on_one_version_both_commit_one_after_a_retry(
    open_replica: OpenRedisStore,
    redis_client: Redis,
    redis_keyspace: Keyspace,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A decision held at the barrier, or on its way, longer than the clock's bound (a loaded
    # machine) is refused by the script and taken again: more attempts than the race's one retry.
    monkeypatch.setattr(redis_store_module, "BEHIND_LIMIT_US", 60 * SECOND)
    first, second = open_replica(), open_replica()
    lease = await admit(first, KEY, "t1")
    both_decided = asyncio.Barrier(2)
    attempts: list[str] = []

    def decide_together(writer: str) -> BeforeWrite:
        async def hold(_key: SessionKey, _command: Command) -> None:
            attempts.append(writer)
            if len(attempts) <= 2:
                await both_decided.wait()

        return hold

    first.before_write, second.before_write = decide_together("first"), decide_together("second")
    await asyncio.gather(
        first.apply(KEY, open_call("t1", lease.generation, "c-first")),
        second.apply(KEY, open_call("t1", lease.generation, "c-second")),
    )

    assert sorted(attempts) in (["first", "first", "second"], ["first", "second", "second"])
    state = await second.load(KEY)
    assert state.active is not None
    assert set(state.active.tool_calls) == {"c-first", "c-second"}
    assert [e.seq for e in await first.events_after(KEY, 0, 10)] == [1, 2, 3]
    assert await redis_client.hget(redis_keyspace.doc(KEY), "v") == b"3"
    assert await outbox_entries(redis_client, redis_keyspace, KEY) == [(member(KEY), s) for s in (1, 2, 3)]


async def test_a_write_on_a_stale_version_writes_nothing_and_the_loop_gives_up_after_max_attempts(
    open_replica: OpenRedisStore, redis_client: Redis, redis_keyspace: Keyspace
) -> None:
    store = open_replica(max_attempts=4)
    lease = await admit(store, KEY, "t1")
    doc = redis_keyspace.doc(KEY)
    before = await redis_contents(redis_client, redis_keyspace)
    document = await redis_client.hget(doc, "doc")
    attempts: list[Command] = []

    async def bump_the_version(_key: SessionKey, command: Command) -> None:
        attempts.append(command)
        await redis_client.hincrby(doc, "v", 1)

    store.before_write = bump_the_version
    with pytest.raises(StoreContention):
        await store.apply(KEY, open_call("t1", lease.generation, "c1"))

    assert len(attempts) == 4
    after = await redis_contents(redis_client, redis_keyspace)
    assert after.pop(doc.encode()) == {b"v": b"5", b"doc": document}
    before.pop(doc.encode())
    assert after == before, "no log entry, outbox entry or deadline was written"


async def test_a_replica_that_remembers_a_document_redis_lost_does_not_write_over_the_new_one(
    open_replica: OpenRedisStore, redis_client: Redis, redis_keyspace: Keyspace
) -> None:
    """Redis loses the session; another replica writes it again, up to the version the first one
    remembers: the epoch, not the version, tells the first one its document is of the old log."""
    remembering, other = open_replica(), open_replica()
    old = await admit(remembering, KEY, "t1")  # version 1 of epoch 1, which it remembers
    await redis_client.delete(redis_keyspace.doc(KEY), redis_keyspace.log(KEY))  # as Redis lost them
    await admit(other, KEY, "t2")  # version 1 again, of a new epoch
    new = await other.load(KEY)

    decision = await remembering.apply(KEY, Heartbeat("t1", old.generation, None))

    assert isinstance(decision.reply, HeartbeatReply)
    assert decision.reply.directive is Directive.ABANDON, "decided again on the new document"
    assert await remembering.load(KEY) == new
    assert await redis_client.hget(redis_keyspace.doc(KEY), "v") == b"1"
    assert {e.epoch for e in await remembering.events_after(KEY, 0, 10)} == {new.epoch}


async def test_a_failing_script_writes_nothing(
    redis_store: RedisStore, redis_client: Redis, redis_keyspace: Keyspace
) -> None:
    """A log ahead of its document (here: the document was deleted) makes the script's first
    XADD fail; no write may come before it."""
    await write_events(redis_store, 3)
    await redis_client.unlink(redis_keyspace.doc(KEY))
    before = await redis_contents(redis_client, redis_keyspace)

    with pytest.raises(redis_errors.ResponseError, match="equal or smaller"):
        await redis_store.apply(KEY, Admit("t2", "runner", SECOND))

    assert await redis_contents(redis_client, redis_keyspace) == before


async def test_noscript_after_a_script_flush_is_recovered_transparently(private_redis: RedisProcess) -> None:
    """On a Redis of its own: on a shared one, another test's store loads the script again between
    the flush and the write."""
    host, port = private_redis.address
    url = f"redis://{host}:{port}"
    keyspace = Keyspace("noscript", 8)
    store = open_redis_store(url, keyspace)
    client = Redis.from_url(url)
    try:
        lease = await admit(store, KEY, "t1")
        await client.script_flush()
        assert await client.script_exists(CAS_SHA) == [False]

        decision = await store.apply(KEY, open_call("t1", lease.generation, "c1"))

        assert [e.seq for e in decision.events] == [2]
        assert await client.script_exists(CAS_SHA) == [True]
        assert [e.seq for e in await store.events_after(KEY, 0, 10)] == [1, 2]
        assert await client.hget(keyspace.doc(KEY), "v") == b"2", "written once"
    finally:
        await client.aclose()
        await store.close()


async def test_a_connection_redis_closed_while_idle_connects_again_and_the_next_write_applies_once(
    private_redis: RedisProcess,
) -> None:
    """Redis closing the store's idle connections (its idle timeout, CLIENT KILL, a restart) costs
    the next write nothing: the connection is made again before the decision, so nothing has left
    on a closed one and the write is applied, not of unknown outcome."""
    host, port = private_redis.address
    url = f"redis://{host}:{port}"
    keyspace = Keyspace("reconnect", 8)
    store = open_redis_store(url, keyspace)
    client = Redis.from_url(url)
    try:
        lease = await admit(store, KEY, "t1")
        assert await client.client_kill_filter(_type="normal", skipme=True) >= 1
        await asyncio.sleep(0.1)  # idle: the store's loop has seen Redis close them

        decision = await store.apply(KEY, open_call("t1", lease.generation, "c1"))

        assert [e.seq for e in decision.events] == [2]
        assert await client.hget(keyspace.doc(KEY), "v") == b"2", "written once"
    finally:
        await client.aclose()
        await store.close()


async def test_writers_beyond_the_stores_connections_wait_for_one_and_every_write_applies(
    private_redis: RedisProcess,
) -> None:
    """Three times as many concurrent writes as the store has connections for them: the others
    wait for one (none is refused), and Redis sees no more connections than that."""
    host, port = private_redis.address
    url = f"redis://{host}:{port}"
    store = open_redis_store(url, Keyspace("burst", 8))
    client = Redis.from_url(url)
    try:
        keys = [SessionKey("burst", f"s{i}") for i in range(3 * POOL_SIZE)]
        before = len(await client.client_list())

        leases = await asyncio.gather(*(admit(store, key, "t1") for key in keys))

        assert [lease.turn_id for lease in leases] == ["t1"] * len(keys)
        assert len(await client.client_list()) - before <= POOL_SIZE
    finally:
        await client.aclose()
        await store.close()


async def test_every_key_one_apply_writes_hashes_to_one_cluster_slot(
    redis_store: RedisStore, redis_client: Redis, redis_keyspace: Keyspace
) -> None:
    slots_used = set()
    for i in range(12):
        key = SessionKey(f"project-{i}", f"session-{i}")
        lease, admitting = await keys_written_by(redis_client, redis_keyspace, admit(redis_store, key, "t1"))
        complete = Complete("t1", lease.generation, TurnOutcome.COMPLETED)
        _, settling = await keys_written_by(redis_client, redis_keyspace, redis_store.apply(key, complete))

        # The document, its log, the outbox and the indexes: deadlines and active; the idle one too
        # once the session is idle (R1).
        for written, indexes in ((admitting, 2), (settling, 3)):
            assert len(written) == 3 + indexes, written
            slots = {key_slot(name) for name in written}
            assert len(slots) == 1, written
            slots_used |= slots

    assert len(slots_used) > 1, "sessions spread over the buckets' slots"


def test_the_bucket_of_a_session_is_crc32_and_the_same_in_every_process() -> None:
    sessions = [(f"project-{i}", f"session-{i}") for i in range(50)]
    here = [Keyspace(buckets=16).bucket(SessionKey(*session)) for session in sessions]
    program = (
        "import json, sys\n"
        "from turngate.service.core import SessionKey\n"
        "from turngate.service.store.redis.keys import Keyspace\n"
        "sessions = json.load(sys.stdin)\n"
        "print(json.dumps([Keyspace(buckets=16).bucket(SessionKey(*s)) for s in sessions]))\n"
    )

    for seed in ("1", "2"):
        elsewhere = subprocess.run(
            [sys.executable, "-c", program],
            input=json.dumps(sessions),
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(elsewhere.stdout) == here

    # The layout of stored data: changing it would strand every key written before.
    assert here == [zlib.crc32(f"{project}/{session}".encode()) % 16 for project, session in sessions]
    assert len(set(here)) > 1


async def test_log_entry_ids_are_seqs_so_a_cursor_is_a_stream_position(
    redis_store: RedisStore, redis_client: Redis, redis_keyspace: Keyspace
) -> None:
    await write_events(redis_store, 5)

    assert await log_ids(redis_client, redis_keyspace) == stream_ids(1, 5)
    after_two = await stream_entries(redis_client, redis_keyspace.log(KEY), first="3-0", count=2)
    assert [entry_id for entry_id, _ in after_two] == stream_ids(3, 4)
    assert [e.seq for e in await redis_store.events_after(KEY, 2, 2)] == [3, 4]


async def test_log_is_trimmed_to_the_retention_but_never_below_what_the_ledger_committed(
    open_replica: OpenRedisStore, redis_client: Redis, redis_keyspace: Keyspace
) -> None:
    store = open_replica(retention=3)
    doc = redis_keyspace.doc(KEY)
    generation = await write_events(store, 10)
    assert await log_ids(redis_client, redis_keyspace) == stream_ids(1, 10), "the ledger has nothing yet"

    await redis_client.hset(doc, "ledger", 2)
    await store.apply(KEY, open_call("t1", generation, "c-11"))
    assert await log_ids(redis_client, redis_keyspace) == stream_ids(3, 11)

    await redis_client.hset(doc, "ledger", 11)
    await store.apply(KEY, open_call("t1", generation, "c-12"))
    assert await log_ids(redis_client, redis_keyspace) == stream_ids(10, 12)
    assert [e.seq for e in await store.events_after(KEY, 0, 100)] == [10, 11, 12]
    assert await redis_client.hget(doc, "ledger") == b"11", "the store's writes keep the ledger's mark"


async def test_outbox_gets_one_entry_per_apply_that_wrote_events_and_none_for_the_others(
    redis_store: RedisStore, redis_client: Redis, redis_keyspace: Keyspace
) -> None:
    gen = (await admit(redis_store, KEY, "t1")).generation
    commands: list[Command] = [
        Admit("t1", "runner", SECOND),  # replayed
        Admit("t2", "runner", SECOND),  # refused: t1 holds the session
        Heartbeat("t1", gen),  # moves the lease and writes no event
        open_call("t1", gen, "c1"),
        stop("t1"),
        stop("t1"),  # repeated: the same answer, nothing new
        Complete("t1", gen, TurnOutcome.CANCELLED),  # interrupts c1 and settles: two events
    ]
    decisions = [await redis_store.apply(KEY, command) for command in commands]

    assert [d.changed for d in decisions] == [False, False, True, True, True, False, True]
    assert [len(d.events) for d in decisions] == [0, 0, 0, 1, 1, 0, 2]
    assert await outbox_entries(redis_client, redis_keyspace, KEY) == [
        (member(KEY), 1),
        (member(KEY), 2),
        (member(KEY), 3),
        (member(KEY), 5),
    ]
    outboxes = [name async for name in redis_client.scan_iter(match=f"{redis_keyspace.prefix}:*:outbox")]
    assert outboxes == [redis_keyspace.outbox(redis_keyspace.bucket(KEY)).encode()]


async def test_due_and_next_deadline_merge_every_bucket_earliest_first(
    redis_store: RedisStore, redis_client: Redis, redis_keyspace: Keyspace
) -> None:
    sessions = sessions_in_distinct_buckets(redis_keyspace, 5)
    leases = {
        key: await admit(redis_store, key, "t1", seconds * SECOND)
        for key, seconds in zip(sessions, [40, 10, 50, 20, 30], strict=True)
    }
    earliest_first = sorted(sessions, key=lambda key: leases[key].lease_expires_at)
    deadlines = [leases[key].lease_expires_at for key in earliest_first]

    assert await redis_store.next_deadline() == deadlines[0]
    assert await redis_store.due(deadlines[-1], 10) == earliest_first
    assert await redis_store.due(deadlines[-1], 3) == earliest_first[:3]
    assert await redis_store.due(deadlines[1], 10) == earliest_first[:2]

    first = earliest_first[0]
    await redis_store.apply(first, Complete("t1", leases[first].generation, TurnOutcome.COMPLETED))

    index = redis_keyspace.deadlines(redis_keyspace.bucket(first))
    assert await redis_client.zscore(index, member(first)) is None
    assert await redis_store.next_deadline() == deadlines[1]
    assert await redis_store.due(deadlines[-1], 10) == earliest_first[1:]


async def test_unrecorded_is_the_document_and_the_log_after_the_ledgers_mark(
    redis_store: RedisStore, redis_client: Redis, redis_keyspace: Keyspace
) -> None:
    await write_events(redis_store, 5)
    everything = await redis_store.events_after(KEY, 0, 10)

    before = await redis_store.unrecorded(KEY)
    await redis_client.hset(redis_keyspace.doc(KEY), "ledger", 3)
    after = await redis_store.unrecorded(KEY)

    assert before.state == after.state == await redis_store.load(KEY)
    assert before.events == tuple(everything), "the ledger has nothing yet"
    assert after.events == tuple(everything[3:])
    assert await redis_store.unrecorded(SessionKey("p", "never-written")) == Unrecorded(Session(), ())


# --- retirement (docs/design.md §8) and logs bounded by age -------------------------------------


async def settled_and_idle(store: RedisStore) -> None:
    lease = await admit(store, KEY, "t1")
    await store.apply(KEY, Complete("t1", lease.generation, TurnOutcome.COMPLETED))
    idle_since = (await store.load(KEY)).idle_since()
    assert idle_since is not None
    await asyncio.sleep(0.01)


def naming(contents: dict[bytes, object], name: str) -> list[bytes]:
    """The keys whose name or contents name `name` (a session's member)."""
    return [
        key
        for key, value in contents.items()
        if name.encode() in key or name.encode() in repr(value).encode()
    ]


async def test_r1_a_session_leaves_redis_only_once_the_ledger_holds_its_log_and_then_leaves_nothing(
    redis_store: RedisStore, redis_client: Redis, redis_keyspace: Keyspace
) -> None:
    await settled_and_idle(redis_store)
    head = (await redis_store.load(KEY)).head

    waiting = await redis_store.apply(KEY, Retire(1))
    assert waiting.reply == Retired(False), "the ledger has recorded nothing yet"
    assert not waiting.changed
    await redis_client.hset(redis_keyspace.doc(KEY), "ledger", head - 1)
    assert (await redis_store.apply(KEY, Retire(1))).reply == Retired(False), "nor all of it"
    await redis_client.hset(redis_keyspace.doc(KEY), "ledger", head)

    assert (await redis_store.apply(KEY, Retire(1))).reply == Retired(True)
    contents = await redis_contents(redis_client, redis_keyspace)
    # The outbox's entries are the projector's: its acknowledgement, which raised the mark, deletes them.
    del contents[redis_keyspace.outbox(redis_keyspace.bucket(KEY)).encode()]
    assert naming(contents, member(KEY)) == [], "not a byte of the session is left"


async def test_r1_a_replica_that_knew_the_removed_session_decides_again_on_the_empty_one(
    open_replica: OpenRedisStore, redis_client: Redis, redis_keyspace: Keyspace
) -> None:
    knowing, retiring = open_replica(), open_replica()
    await settled_and_idle(knowing)
    await redis_client.hset(redis_keyspace.doc(KEY), "ledger", (await knowing.load(KEY)).head)
    assert (await retiring.apply(KEY, Retire(1))).reply == Retired(True)

    again = await admit(knowing, KEY, "t2")

    state = await knowing.load(KEY)
    assert state.active is not None
    assert state.active.turn_id == "t2"
    assert state.head == 1, "a new log"
    assert again.generation > 0


async def test_event_logs_keep_young_events_and_trim_old_ones_the_ledger_has_as_part_of_writes(
    open_replica: OpenRedisStore, redis_client: Redis, redis_keyspace: Keyspace
) -> None:
    store = open_replica(max_event_age=SECOND // 2)
    generation = await write_events(store, 5)
    await asyncio.sleep(0.6)  # events 1-5 are now older than the bound
    await store.apply(KEY, open_call("t1", generation, "young"))
    assert await log_ids(redis_client, redis_keyspace) == stream_ids(1, 6), "none recorded: all kept"

    await redis_client.hset(redis_keyspace.doc(KEY), "ledger", 3)
    await store.apply(KEY, open_call("t1", generation, "younger"))

    assert await log_ids(redis_client, redis_keyspace) == stream_ids(4, 7), "old and recorded: gone"
    await redis_client.hset(redis_keyspace.doc(KEY), "ledger", 7)
    await store.apply(KEY, open_call("t1", generation, "youngest"))
    assert await log_ids(redis_client, redis_keyspace) == stream_ids(6, 8), "4 and 5 were old too"
