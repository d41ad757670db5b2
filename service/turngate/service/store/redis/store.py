"""The Redis store: session documents, event logs, deadlines and the ledger outbox in Redis.

Coordination only; the durable history is the SQL ledger, fed from the outbox by the projector.
Every command is one run of a small generic compare-and-set script (cas.lua), loaded again
after NOSCRIPT: one round trip when this replica already knows the session's current document.

It decides against the document and version it last saw (a session it never saw is taken to be new)
at an estimate of Redis `TIME` that is never behind it (`_StoreClock`), so a decision is never
stamped before the request that asked for it; and it decides only once it holds the connection the
script goes out on (to the master of the session's slot, on a cluster), so nothing but that trip
lies between the decision and the script, and a failure is known to have come before the script
left, or after (then the write's outcome is unknown: connection.failure). The script confirms the
decision atomically, with the write or, for a decision that changed nothing, alone: the version
must be unchanged, and the epoch (a document Redis lost and wrote again may reach the same
version), `TIME` must lie in the decision's clock window (`core.clock_window`: no deadline or
expiry passed, or was anticipated, between the decision and the write; I8) and the decision's `now`
within [TIME - BEHIND_LIMIT_US, TIME + AHEAD_LIMIT_US] (I10: like a SQL store's read, a decision is
as of the store's clock when it was taken). Otherwise nothing is written, the script returns the
current document and `TIME`, and the decision is taken again on them.
"""

from __future__ import annotations

import hashlib
import heapq
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractContextManager, asynccontextmanager
from importlib.resources import files
from typing import Any, cast

from redis import exceptions as redis_errors
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import AbstractConnection

from turngate.service.codec import dump_event_body, dump_session, load_session
from turngate.service.core import ClockWindow, Command, Decision, Event, Session, SessionKey, clock_window
from turngate.service.ports.store import Applied, BeforeWrite, StoreUnavailable, Unrecorded
from turngate.service.store.cas import CompareAndSetStore
from turngate.service.store.redis.connection import Client, unavailable_on_failure
from turngate.service.store.redis.keys import Keyspace, LogEntries, log_event, log_id, member, session_of
from turngate.service.store.redis.replication import NO_REPLICATION, Replication

_CAS = files("turngate.service.store.redis").joinpath("cas.lua").read_text()
_UNRECORDED = files("turngate.service.store.redis").joinpath("unrecorded.lua").read_text()
_CAS_SHA = hashlib.sha1(_CAS.encode()).hexdigest()
_US = 1_000_000
# How far behind and ahead of Redis TIME a decision's `now` may be at its commit (µs): behind
# covers the trip from the decision to the script under load (measured: docs/decisions.md);
# ahead only estimation error.
BEHIND_LIMIT_US = 5_000
AHEAD_LIMIT_US = 5_000
# Sessions whose document this replica remembers (the least recently used are forgotten).
_KNOWN_SESSIONS = 10_000


def _monotonic_us() -> int:
    return time.monotonic_ns() // 1000


class _StoreClock:
    """Redis TIME, estimated so that it is never behind it, however late a busy event loop reads
    a reply. A reply's TIME was read after its request was sent and before it was received, so
    TIME - sent bounds TIME's offset from the monotonic clock from above, TIME - received from
    below. The estimate keeps the tightest bound from above; a bound from below beyond it shows
    that TIME moved on (a step, or drift), and the new bound from above replaces it. It does not
    run backwards between decisions, except to correct an estimate ahead by more than half of
    what the store accepts."""

    def __init__(self) -> None:
        self._offset: int | None = None
        self._last = 0

    @property
    def calibrated(self) -> bool:
        return self._offset is not None

    def now(self) -> int:
        assert self._offset is not None, "observe the store's TIME first"
        estimate = _monotonic_us() + self._offset
        if estimate < self._last <= estimate + AHEAD_LIMIT_US // 2:
            return self._last
        self._last = estimate
        return estimate

    def observe(self, store_now: int, sent: int, received: int) -> None:
        above, below = store_now - sent, store_now - received
        if self._offset is None or below > self._offset:
            self._offset = above
        else:
            self._offset = min(self._offset, above)


def _bounds(window: ClockWindow) -> list[str | int]:
    """A clock window as the script takes it ("" for an open end)."""
    return ["" if window.start is None else window.start, "" if window.end is None else window.end]


def _fields(flat: list[bytes]) -> dict[bytes, bytes]:
    """A stream entry's fields as a script returns them (name, value, name, value…)."""
    return dict(zip(flat[::2], flat[1::2], strict=True))


def _now(time_reply: Any) -> int:
    seconds, micros = time_reply
    return int(seconds) * _US + int(micros)


async def _run_cas(
    connection: AbstractConnection,
    keys: list[str],
    args: list[str | int | bytes],
    after: Sequence[tuple[str | int, ...]],
    *,
    writes: bool,
) -> list[Any]:
    """cas.lua's reply on `connection`, then the replies of the commands `after` it (sent in the
    same round trip; a reply Redis failed is its exception), loading the script first if Redis lost
    it (a restart, a SCRIPT FLUSH). Once a script that `writes` is on its way, a failure may leave
    the write applied: its outcome is unknown (connection.failure)."""
    evalsha = ("EVALSHA", _CAS_SHA, len(keys), *keys, *args)
    with unavailable_on_failure():  # nothing has left yet: a connection refused applied nothing
        await connection.connect()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
    with unavailable_on_failure(sent=writes):
        for _ in range(2):
            await connection.send_packed_command(connection.pack_commands([evalsha, *after]))
            replies = [await _reply(connection) for _ in range(1 + len(after))]
            if not isinstance(replies[0], redis_errors.NoScriptError):
                break
            await connection.send_command("SCRIPT", "LOAD", _CAS)
            await connection.read_response()
        else:
            raise StoreUnavailable("the compare-and-set script could not be loaded")
        if isinstance(replies[0], Exception):
            raise replies[0]
        return replies


async def _reply(connection: AbstractConnection) -> Any:
    """The next reply on `connection`; an error reply as its exception, so the replies after it
    are read too."""
    try:
        return await connection.read_response()
    except redis_errors.ResponseError as error:
        return error


@asynccontextmanager
async def _discarded_on_failure(connection: AbstractConnection) -> AsyncIterator[None]:
    """Disconnects `connection` if the block fails: replies may be left unread, so it is never
    reused as it is."""
    try:
        yield
    except BaseException:
        await connection.disconnect()
        raise


class RedisStore(CompareAndSetStore):
    """`Store` over one Redis; the session document, its events, its deadline and the outbox
    entry for the ledger change together in one script run, or not at all."""

    def __init__(
        self,
        client: Client,
        keys: Keyspace,
        *,
        retention: int,
        replication: Replication = NO_REPLICATION,
        before_write: BeforeWrite | None = None,
        max_attempts: int = 32,
    ) -> None:
        super().__init__(before_write=before_write, max_attempts=max_attempts)
        self.client = client
        self.keys = keys
        self._retention = retention
        self._replication = replication
        self._cas = client.register_script(_CAS)
        self._unrecorded = client.register_script(_UNRECORDED)
        self._clock = _StoreClock()
        self._known: OrderedDict[SessionKey, tuple[int, Session]] = OrderedDict()

    def _unavailable_on_failure(self) -> AbstractContextManager[None]:
        return unavailable_on_failure()

    async def _attempt(self, key: SessionKey, command: Command) -> Applied | None:
        """One decide-and-confirm; None when the version or the clock was off (both now corrected),
        or when a cluster node said another serves the session now (MOVED: nothing was run)."""
        version, state = self._known.get(key, (0, Session()))
        if not self._clock.calibrated:
            await self.now()
        try:
            async with self._connection_in_hand(key) as connection:
                now = self._clock.now()
                applied = self._decide(state, command, now)
                decision = applied.decision
                if decision.changed:
                    await self._before_write(key, command)
                window = _bounds(clock_window(state, now))
                args = [
                    version,
                    decision.state.epoch,
                    now,
                    BEHIND_LIMIT_US,
                    AHEAD_LIMIT_US,
                    *window,
                    *self._change(key, decision),
                ]
                sent = _monotonic_us()
                reply = await self._compare_and_set(connection, key, command, args, writes=decision.changed)
                self._clock.observe(_now(reply[1:3]), sent, _monotonic_us())
        except StoreUnavailable as unavailable:
            if not isinstance(moved := unavailable.__cause__, redis_errors.MovedError):
                raise
            # The slot has a new master (a failover): this attempt goes there instead.
            await cast(RedisCluster, self.client).nodes_manager.move_slot(moved)
            return None
        if reply[0]:
            self._remember(key, version + 1 if decision.changed else version, decision.state)
            return applied
        current = reply[4] if len(reply) > 4 else None
        self._remember(key, int(reply[3]), Session() if current is None else load_session(current))
        return None

    @asynccontextmanager
    async def _connection_in_hand(self, key: SessionKey) -> AsyncIterator[AbstractConnection]:
        """A connection to the master that holds `key`'s session (the slot's master on a cluster),
        held until the block ends: a decision made with it in hand has only the trip to Redis
        between its `now` and TIME, and what it sends is known to have left, or not
        (connection.failure)."""
        if not isinstance(self.client, RedisCluster):
            async with self._pooled_connection() as connection:
                yield connection
            return
        node = self.client.get_node_from_key(self.keys.doc(key))
        if node is None:
            raise StoreUnavailable(f"{key}: no node serves its slot")
        connection = node.acquire_connection()
        try:
            async with _discarded_on_failure(connection):
                yield connection
        finally:
            node.release(connection)

    @asynccontextmanager
    async def _pooled_connection(self) -> AsyncIterator[AbstractConnection]:
        """A connection of the pool of one server, or of the Sentinel-managed primary, connected."""
        assert not isinstance(self.client, RedisCluster)
        pool = self.client.connection_pool
        connection = await pool.get_connection()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
        try:
            async with _discarded_on_failure(connection):
                yield connection
        finally:
            await pool.release(connection)

    async def _compare_and_set(
        self,
        connection: AbstractConnection,
        key: SessionKey,
        command: Command,
        args: list[str | int | bytes],
        *,
        writes: bool,
    ) -> Any:
        """The script's reply, confirmed by the replicas `replication` asks for. A decision that
        changes nothing is confirmed so too (`replication`'s mark): it may answer from an earlier
        attempt's write that no replica has yet."""
        mark = None if writes else self.keys.replication_mark(self.keys.bucket(key))
        confirm = self._replication.commands(mark)
        reply, *confirmed = await _run_cas(connection, self._keys_of(key), args, confirm, writes=writes)
        if reply[0] and writes:
            with unavailable_on_failure(sent=True):
                await self._after_write(key, command)
        if reply[0]:
            self._replication.check(confirmed, str(key), wrote=writes)
        return reply

    def _change(self, key: SessionKey, decision: Decision) -> list[str | int | bytes]:
        """The script's arguments after the clock window: the new document, its deadline, whether a
        turn holds it, and its events."""
        if not decision.changed:
            return [""]
        deadline = decision.state.deadline()
        args: list[str | int | bytes] = [
            dump_session(decision.state),
            "" if deadline is None else deadline,
            "1" if decision.state.turn_active else "",
            member(key),
            self._retention,
            len(decision.events),
        ]
        for event in decision.events:
            args += [event.seq, event.time, dump_event_body(event.body)]
        return args

    def _keys_of(self, key: SessionKey) -> list[str]:
        bucket = self.keys.bucket(key)
        return [
            self.keys.doc(key),
            self.keys.log(key),
            self.keys.deadlines(bucket),
            self.keys.outbox(bucket),
            self.keys.active(bucket),
        ]

    def _remember(self, key: SessionKey, version: int, state: Session) -> None:
        """Keeps the document last seen for `key` (even an older version: Redis may have lost
        data), forgetting the least recently used beyond a bound."""
        self._known[key] = (version, state)
        self._known.move_to_end(key)
        if len(self._known) > _KNOWN_SESSIONS:
            self._known.popitem(last=False)

    async def load(self, key: SessionKey) -> Session:
        with unavailable_on_failure():
            doc = await self.client.hget(self.keys.doc(key), "doc")
        return Session() if doc is None else load_session(doc)

    async def unrecorded(self, key: SessionKey) -> Unrecorded:
        with unavailable_on_failure():
            doc, entries = await self._unrecorded(keys=[self.keys.doc(key), self.keys.log(key)])
        state = Session() if doc is None else load_session(doc)
        return Unrecorded(state, tuple(log_event(entry_id, _fields(raw)) for entry_id, raw in entries))

    async def events_after(self, key: SessionKey, after_seq: int, limit: int) -> list[Event]:
        with unavailable_on_failure():
            entries = await self.client.xrange(self.keys.log(key), min=log_id(after_seq + 1), count=limit)
        return [log_event(entry_id, fields) for entry_id, fields in cast(LogEntries, entries)]

    async def now(self) -> int:
        with unavailable_on_failure():
            # On one server or behind Sentinel, timed with a connection in hand, so that connecting
            # does not loosen the estimate.
            if isinstance(self.client, RedisCluster):
                # Learning the topology first (once), so the trip timed is TIME's alone.
                await self.client.initialize()
                sent = _monotonic_us()
                store_now = _now(await self.client.time())
            else:
                async with self._pooled_connection() as connection:
                    sent = _monotonic_us()
                    await connection.send_command("TIME")
                    store_now = _now(await connection.read_response())
        self._clock.observe(store_now, sent, _monotonic_us())
        return store_now

    async def next_deadline(self) -> int | None:
        with unavailable_on_failure():
            async with self.client.pipeline(transaction=False) as pipe:
                for bucket in self.keys.all_buckets():
                    pipe.zrange(self.keys.deadlines(bucket), 0, 0, withscores=True)
                firsts = await pipe.execute()
        scores = [int(entries[0][1]) for entries in firsts if entries]
        return min(scores, default=None)

    async def due(self, now: int, limit: int) -> list[SessionKey]:
        with unavailable_on_failure():
            async with self.client.pipeline(transaction=False) as pipe:
                for bucket in self.keys.all_buckets():
                    pipe.zrangebyscore(
                        self.keys.deadlines(bucket), "-inf", now, start=0, num=limit, withscores=True
                    )
                per_bucket = await pipe.execute()
        earliest = heapq.nsmallest(
            limit, (entry for entries in per_bucket for entry in entries), key=lambda e: e[1]
        )
        return [session_of(name.decode()) for name, _ in earliest]

    async def active(
        self, project_id: str, after: tuple[int, str] | None, limit: int
    ) -> list[tuple[SessionKey, int]]:
        """Reads every bucket's deadlines from `after` on and keeps the project's: fine for an
        operator's listing, not for a hot path."""
        with unavailable_on_failure():
            async with self.client.pipeline(transaction=False) as pipe:
                for bucket in self.keys.all_buckets():
                    pipe.zrangebyscore(
                        self.keys.deadlines(bucket), after[0] if after else "-inf", "+inf", withscores=True
                    )
                per_bucket = await pipe.execute()
        found = sorted(
            (int(score), key.session_id)
            for entries in per_bucket
            for name, score in entries
            if (key := session_of(name.decode())).project_id == project_id
        )
        return [
            (SessionKey(project_id, session), deadline)
            for deadline, session in found
            if after is None or (deadline, session) > after
        ][:limit]

    async def count_active_in_project(self, project_id: str, bound: int) -> int:
        """Reads every bucket's sessions that a turn holds and counts the project's, as `active`."""
        with unavailable_on_failure():
            async with self.client.pipeline(transaction=False) as pipe:
                for bucket in self.keys.all_buckets():
                    pipe.zrange(self.keys.active(bucket), 0, -1)
                per_bucket = await pipe.execute()
        held = sum(
            session_of(name.decode()).project_id == project_id for names in per_bucket for name in names
        )
        return min(held, bound)

    async def count_active(self) -> int:
        with unavailable_on_failure():
            async with self.client.pipeline(transaction=False) as pipe:
                for bucket in self.keys.all_buckets():
                    pipe.zcard(self.keys.active(bucket))
                counts = await pipe.execute()
        return sum(int(count) for count in counts)

    async def ping(self) -> None:
        """The compare-and-set script confirming, on a key no session has, a decision that changed
        nothing: Redis runs it only where it could write (cas.lua)."""
        if not self._clock.calibrated:
            await self.now()
        args: list[str | int] = [0, 0, self._clock.now(), BEHIND_LIMIT_US, AHEAD_LIMIT_US, "", "", ""]
        with unavailable_on_failure():
            await self._cas(keys=self.keys.probe(), args=args)

    async def close(self) -> None:
        await self.client.aclose()
