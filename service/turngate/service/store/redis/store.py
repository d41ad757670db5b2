"""The Redis store: session documents, event logs, deadlines and the ledger outbox in Redis.

Coordination only; the durable history is the SQL ledger, fed from the outbox by the projector.
Every command is one run of a small generic compare-and-set script (cas.lua), loaded again
after NOSCRIPT: one round trip when this replica already knows the session's current document.

It decides against the document and version it last saw (a session it never saw is taken to be new)
at an estimate of Redis `TIME` that is never behind it (`clock.StoreClock`), so a decision is never
stamped before the request that asked for it; and it decides only once it holds the connection the
script goes out on, or the pipe that concurrent writes share (pipeline.py: to the master of the
session's slot, on a cluster), so nothing but that trip lies between the decision and the script,
and a failure is known to have come before the script left, or after (then the write's outcome is
unknown: connection.failure). The script confirms the
decision atomically, with the write or, for a decision that changed nothing, alone: the version
must be unchanged, and the epoch (a document Redis lost and wrote again may reach the same
version), `TIME` must lie in the decision's clock window (`core.clock_window`: no deadline or
expiry passed, or was anticipated, between the decision and the write; I8) and the decision's `now`
within [TIME - BEHIND_LIMIT_US, TIME + AHEAD_LIMIT_US] (I10: like a SQL store's read, a decision is
as of the store's clock when it was taken). Otherwise nothing is written, the script returns the
current document and `TIME`, and the decision is taken again on them.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import replace
from typing import Any, cast

from redis import exceptions as redis_errors
from redis.asyncio.cluster import RedisCluster

from turngate.service.codec import load_session
from turngate.service.core import Command, Decision, Event, Retired, Session, SessionKey, clock_window
from turngate.service.ports.store import Applied, BeforeWrite, Recall, StoreUnavailable, Unrecorded
from turngate.service.store.cas import CompareAndSetStore, History
from turngate.service.store.redis.buckets import each_bucket
from turngate.service.store.redis.clock import (
    AHEAD_LIMIT_US,
    BEHIND_LIMIT_US,
    StoreClock,
    monotonic_us,
    time_of,
)
from turngate.service.store.redis.connection import (
    POOL_SIZE,
    POOL_TIMEOUT_S,
    Client,
    close_client,
    unavailable_on_failure,
)
from turngate.service.store.redis.held import ConnectionLender, HeldConnection
from turngate.service.store.redis.keys import Keyspace, LogEntries, log_event, log_id, session_of
from turngate.service.store.redis.pipeline import Pipes
from turngate.service.store.redis.replication import NO_REPLICATION, Replication
from turngate.service.store.redis.resp import Exchange, packed
from turngate.service.store.redis.script import (
    CAS,
    UNRECORDED,
    change_args,
    entry_fields,
    evaluated,
    run_cas,
    window_args,
)

# Sessions whose document this replica remembers (the least recently used are forgotten).
_KNOWN_SESSIONS = 10_000
# cas.lua's first reply: confirmed or written, or a removal whose session's log the ledger does
# not hold whole yet (nothing written).
_DONE = 1
_LEDGER_BEHIND = 2


def _version_after(version: int, decision: Decision) -> int:
    """The document's version once `decision` is written: a removed one has none (0), as if never
    written."""
    if decision.removed:
        return 0
    return version + 1 if decision.changed else version


def _not_yet_removed(applied: Applied) -> Applied:
    """A removal (R1) that waits for the ledger to record the whole log, so that the history stays:
    nothing was written, and the watchdog asks again on a later pass."""
    unchanged = Decision(applied.state, (), Retired(False), changed=False)
    return replace(applied, decision=unchanged)


class RedisStore(CompareAndSetStore):
    """`Store` over one Redis; the session document, its events, its deadline and the outbox
    entry for the ledger change together in one script run, or not at all."""

    def __init__(
        self,
        client: Client,
        keys: Keyspace,
        *,
        retention: int,
        max_event_age: int | None = None,
        replication: Replication = NO_REPLICATION,
        recall: Recall | None = None,
        before_write: BeforeWrite | None = None,
        max_attempts: int = 32,
    ) -> None:
        super().__init__(before_write=before_write, max_attempts=max_attempts, recall=recall)
        self.client = client
        self.keys = keys
        self._retention = retention
        self._max_event_age = max_event_age
        self._replication = replication
        self._cas = client.register_script(CAS)
        self._unrecorded = client.register_script(UNRECORDED)
        self._clock = StoreClock()
        # The compare-and-set's own connections (a cluster's nodes lend theirs): the client's pool
        # serves the other commands.
        self._lender = (
            None
            if isinstance(client, RedisCluster)
            else ConnectionLender(client.connection_pool, POOL_SIZE, POOL_TIMEOUT_S)
        )
        self._known: OrderedDict[SessionKey, tuple[int, Session]] = OrderedDict()
        # Without replicas to wait for, concurrent writes share a pipe per node; a WAIT would hold
        # a shared connection until replicas confirm, so with them each write holds its own.
        self._pipes = None if replication.replicas else Pipes(client, self._lender)

    def _exchange(self, doc: str) -> AbstractAsyncContextManager[Exchange]:
        """How the write of the session whose document is `doc` reaches its master."""
        if self._pipes is not None:
            return self._pipes.exchange(doc)
        return HeldConnection(self.client, self._lender, doc)

    def _unavailable_on_failure(self) -> AbstractContextManager[None]:
        return unavailable_on_failure()

    async def _attempt(self, key: SessionKey, command: Command, history: History) -> Applied | None:
        """One decide-and-confirm; None when the version or the clock was off (both now corrected),
        or when a cluster node said another serves the session now (MOVED: nothing was run). A
        removal (R1) the ledger is not ready for changes nothing: it is tried again later."""
        version, state = self._known.get(key, (0, Session()))
        if not self._clock.calibrated:
            await self.now()
        try:
            # The connection (or the node's pipe) in hand, connected: a decision made then has only
            # the trip to Redis between its `now` and TIME, and what it sends is known to have
            # left, or not (connection.failure).
            async with self._exchange(self.keys.doc(key)) as exchange:
                now = self._clock.now()
                applied = self._decide(state, command, now, history)
                decision = applied.decision
                if decision.changed:
                    await self._before_write(key, command)
                window = window_args(clock_window(state, now))
                # The epoch of the document written, or of the one a removal takes away.
                epoch = (state if decision.removed else decision.state).epoch
                args = [
                    version,
                    epoch,
                    now,
                    BEHIND_LIMIT_US,
                    AHEAD_LIMIT_US,
                    *window,
                    *change_args(key, decision, retention=self._retention, max_event_age=self._max_event_age),
                ]
                sent = monotonic_us()
                reply = await self._compare_and_set(exchange, key, command, args, writes=decision.changed)
                self._clock.observe(time_of(reply[1:3]), sent, monotonic_us())
        except StoreUnavailable as unavailable:
            if not isinstance(moved := unavailable.__cause__, redis_errors.MovedError):
                raise
            # The slot has a new master (a failover): this attempt goes there instead.
            await cast(RedisCluster, self.client).nodes_manager.move_slot(moved)
            return None
        if reply[0] == _LEDGER_BEHIND:
            return _not_yet_removed(applied)
        if reply[0]:
            self._remember(key, _version_after(version, decision), decision.state)
            return applied
        current = reply[4] if len(reply) > 4 else None
        self._remember(key, int(reply[3]), Session() if current is None else load_session(current))
        return None

    async def _compare_and_set(
        self,
        exchange: Exchange,
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
        keys = self.keys.script_keys(key)
        reply, *confirmed = await run_cas(exchange, keys, args, confirm, writes=writes)
        if reply[0] != _DONE:
            return reply
        if writes:
            with unavailable_on_failure(sent=True):
                await self._after_write(key, command)
        self._replication.check(confirmed, str(key), wrote=writes)
        return reply

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
            doc, entries = await evaluated(self._unrecorded, [self.keys.doc(key), self.keys.log(key)])
        state = Session() if doc is None else load_session(doc)
        return Unrecorded(state, tuple(log_event(entry_id, entry_fields(raw)) for entry_id, raw in entries))

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
                sent = monotonic_us()
                store_now = time_of(await self.client.time())
            else:
                async with HeldConnection(self.client, self._lender) as exchange:
                    sent = monotonic_us()
                    (reply,) = await exchange(packed([("TIME",)]), 1)
                    if isinstance(reply, Exception):
                        raise reply
                    store_now = time_of(reply)
        self._clock.observe(store_now, sent, monotonic_us())
        return store_now

    async def next_deadline(self) -> int | None:
        with unavailable_on_failure():
            firsts = await each_bucket(
                self.client,
                self.keys,
                lambda pipe, bucket: pipe.zrange(self.keys.deadlines(bucket), 0, 0, withscores=True),
            )
        scores = [int(entries[0][1]) for entries in firsts if entries]
        return min(scores, default=None)

    async def due(self, now: int, limit: int) -> list[SessionKey]:
        return await self._earliest(self.keys.deadlines, now, limit)

    async def retirable(self, before: int, limit: int) -> list[SessionKey]:
        return await self._earliest(self.keys.idle, before, limit)

    async def _earliest(self, index: Callable[[int], str], until: int, limit: int) -> list[SessionKey]:
        """Up to `limit` sessions scored at or before `until` in each bucket's `index`, earliest first."""
        with unavailable_on_failure():
            per_bucket = await each_bucket(
                self.client,
                self.keys,
                lambda pipe, bucket: pipe.zrangebyscore(
                    index(bucket), "-inf", until, start=0, num=limit, withscores=True
                ),
            )
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
            per_bucket = await each_bucket(
                self.client,
                self.keys,
                lambda pipe, bucket: pipe.zrangebyscore(
                    self.keys.deadlines(bucket), after[0] if after else "-inf", "+inf", withscores=True
                ),
            )
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
            per_bucket = await each_bucket(
                self.client, self.keys, lambda pipe, bucket: pipe.zrange(self.keys.active(bucket), 0, -1)
            )
        held = sum(
            session_of(name.decode()).project_id == project_id for names in per_bucket for name in names
        )
        return min(held, bound)

    async def count_active(self) -> int:
        with unavailable_on_failure():
            counts = await each_bucket(
                self.client, self.keys, lambda pipe, bucket: pipe.zcard(self.keys.active(bucket))
            )
        return sum(int(count) for count in counts)

    async def ping(self) -> None:
        """The compare-and-set script confirming, on a key no session has, a decision that changed
        nothing: Redis runs it only where it could write (cas.lua)."""
        if not self._clock.calibrated:
            await self.now()
        args: list[str | int] = [0, 0, self._clock.now(), BEHIND_LIMIT_US, AHEAD_LIMIT_US, "", "", ""]
        with unavailable_on_failure():
            await evaluated(self._cas, self.keys.probe(), args)

    async def close(self) -> None:
        if self._pipes is not None:
            await self._pipes.close()
        if self._lender is not None:
            await self._lender.close()
        await close_client(self.client)
