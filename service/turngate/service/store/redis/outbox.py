"""The Redis outbox (ports/outbox.py): the bucket outboxes read as a consumer of the group
`ledger`, the session logs their entries point to, acknowledgements and dead letters.

Each commit of the Redis store appends one entry (`k` session, `s` last seq written, `epoch` of the
log that seq is in) to its bucket's outbox. An entry is acknowledged and deleted only once the
ledger holds its events (outbox_ack.lua, which also raises the session document's `ledger` mark).
What can never be recorded is dead-lettered once (dead_letter.lua). The names of consumers that
are gone are pruned from the group (prune_consumers.lua). Redis failing is StoreUnavailable (the
one classifier, connection.failure; a consumer group Redis lost is recreated on the retry):
entries then stay pending, and are never blamed on an event.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from importlib.resources import files
from typing import Any, cast

from redis import exceptions as redis_errors
from redis.asyncio.cluster import RedisCluster
from redis.commands.core import AsyncScript
from redis.typing import EncodableT

from turngate.service.core import LEGACY_EPOCH, Event, SessionKey
from turngate.service.ports.outbox import (
    Delivered,
    Entry,
    LogRecord,
    Malformed,
    Outbox,
    Position,
    described,
)
from turngate.service.store.redis.buckets import each_bucket
from turngate.service.store.redis.connection import Client, close_client, unavailable_on_failure
from turngate.service.store.redis.keys import (
    LEDGER_GROUP,
    Keyspace,
    LogEntries,
    epoch_of,
    log_event,
    log_id,
    member,
    seq_of,
    session_of,
)
from turngate.service.store.redis.replication import NO_REPLICATION, Replication
from turngate.service.store.redis.script import evaluated

_ACK = files("turngate.service.store.redis").joinpath("outbox_ack.lua").read_text()
_DEAD_LETTER = files("turngate.service.store.redis").joinpath("dead_letter.lua").read_text()
_PRUNE = files("turngate.service.store.redis").joinpath("prune_consumers.lua").read_text()
# Entries read per bucket and round: all of one session's go to one script call (outbox_ack.lua),
# whose arguments Lua unpacks onto its stack (8,000 slots at most).
MAX_BATCH = 1_000

# An outbox entry as redis-py returns it: its id and its fields (empty once deleted).
Raw = tuple[bytes, dict[bytes, bytes]]


@dataclass(frozen=True, slots=True)
class ScriptCall:
    script: AsyncScript
    keys: list[str]
    args: list[EncodableT]


@dataclass(frozen=True, slots=True)
class _LogRecord:
    """A session log's entry as redis-py returns it (ports/outbox.LogRecord)."""

    id: bytes
    fields: dict[bytes, bytes]

    @property
    def seq(self) -> int:
        return seq_of(self.id)

    @property
    def epoch(self) -> int:
        return epoch_of(self.fields)

    def event(self) -> Event:
        return log_event(self.id, self.fields)


def _delivered(read: Sequence[tuple[int, Raw]]) -> Delivered:
    """Entries read, each with its bucket, by what becomes of them."""
    found = Delivered({}, [], [])
    for bucket, (entry_id, fields) in read:
        if not fields:
            found.gone.append((bucket, entry_id))
            continue
        try:
            key, seq, epoch = session_of(fields[b"k"].decode()), int(fields[b"s"]), epoch_of(fields)
        except (KeyError, ValueError) as exc:
            k, s = fields.get(b"k", b""), fields.get(b"s", b"")
            found.malformed.append(
                Malformed(bucket, entry_id, k, s, f"malformed outbox entry: {described(exc)}")
            )
            continue
        retired = fields.get(b"retired") == b"1"
        found.by_session.setdefault(key, []).append(Entry(bucket, entry_id, key, seq, epoch, retired))
    return found


def _about_entry(entry_id: bytes) -> str:
    """What the dead letter of a malformed outbox entry is about: the entry."""
    return f"outbox entry {entry_id.decode()}"


def _about_events(key: SessionKey, last: Position) -> str:
    """What the dead letter of events of a session is about: the last of them, in its epoch."""
    return f"{member(key)} epoch {last.epoch} seq {last.seq}"


class RedisOutbox(Outbox):
    """The outboxes of `keys` on `redis`, read by `consumer`, up to `batch` entries per bucket
    and read; what is read of the logs is confirmed by the replicas `replication` asks for."""

    def __init__(
        self,
        redis: Client,
        keys: Keyspace,
        *,
        consumer: str,
        batch: int = 100,
        replication: Replication = NO_REPLICATION,
    ) -> None:
        if not 1 <= batch <= MAX_BATCH:
            raise ValueError(f"batch must be 1 to {MAX_BATCH}")
        self.keys = keys
        self._redis = redis
        self._consumer = consumer
        self._batch = batch
        self._replication = replication
        self._ack = redis.register_script(_ACK)
        self._dead_letter = redis.register_script(_DEAD_LETTER)
        self._prune = redis.register_script(_PRUNE)

    async def create_groups(self) -> None:
        """The group starts at 0, so entries written before any projector ran are projected too."""
        with unavailable_on_failure():
            replies = await each_bucket(
                self._redis,
                self.keys,
                lambda pipe, bucket: pipe.xgroup_create(
                    self.keys.outbox(bucket), LEDGER_GROUP, id="0", mkstream=True
                ),
                raise_on_error=False,
            )
            for reply in replies:
                if isinstance(reply, redis_errors.ResponseError) and not str(reply).startswith("BUSYGROUP"):
                    raise reply

    async def read_new(self) -> Delivered:
        """Entries no consumer has seen yet, from every bucket in one round trip."""
        with unavailable_on_failure():
            replies = await each_bucket(
                self._redis,
                self.keys,
                lambda pipe, bucket: pipe.xreadgroup(
                    LEDGER_GROUP, self._consumer, {self.keys.outbox(bucket): ">"}, count=self._batch
                ),
            )
        return _delivered(
            [
                (bucket, raw)
                for bucket, reply in zip(self.keys.all_buckets(), replies, strict=True)
                for _stream, entries in reply or []
                for raw in entries
            ]
        )

    async def claim_idle(self, idle_ms: int) -> AsyncIterator[Delivered]:
        """Takes over, a batch at a time, entries pending longer than `idle_ms` with any consumer."""
        for bucket in self.keys.all_buckets():
            start: bytes = b"0-0"
            while True:
                with unavailable_on_failure():
                    reply = await self._redis.xautoclaim(
                        self.keys.outbox(bucket),
                        LEDGER_GROUP,
                        self._consumer,
                        idle_ms,
                        start,
                        count=self._batch,
                    )
                start, entries = reply[0], cast(LogEntries, reply[1])
                yield _delivered([(bucket, raw) for raw in entries])
                if start == b"0-0":
                    break

    async def own_pending(self) -> AsyncIterator[Delivered]:
        """The entries pending with this consumer, a batch at a time: those a failure left
        behind, or those of an earlier run under the same consumer name. The caller acknowledges
        each batch before the next is read."""
        for bucket in self.keys.all_buckets():
            after = b"0"
            while True:
                with unavailable_on_failure():
                    reply = cast(
                        list[tuple[bytes, LogEntries]],
                        await self._redis.xreadgroup(
                            LEDGER_GROUP, self._consumer, {self.keys.outbox(bucket): after}, count=self._batch
                        ),
                    )
                entries = reply[0][1] if reply else []
                if not entries:
                    break
                yield _delivered([(bucket, raw) for raw in entries])
                after = entries[-1][0]

    async def acknowledge(
        self, recorded: Sequence[tuple[Sequence[Entry], Position]], gone: Sequence[tuple[int, bytes]]
    ) -> None:
        """Raises each recorded session's mark to its cursor (if its log is still of the cursor's
        epoch) and acknowledges and deletes its entries, and acknowledges `gone` entries."""
        calls = [
            ScriptCall(
                self._ack,
                [
                    self.keys.outbox(entries[0].part),
                    self.keys.doc(entries[0].key),
                    self.keys.log(entries[0].key),
                ],
                [LEDGER_GROUP, cursor.epoch, cursor.seq, LEGACY_EPOCH, *(entry.id for entry in entries)],
            )
            for entries, cursor in recorded
        ]
        calls += [
            ScriptCall(self._ack, [self.keys.outbox(bucket)], [LEDGER_GROUP, 0, 0, LEGACY_EPOCH, entry_id])
            for bucket, entry_id in gone
        ]
        await self._run(calls)

    async def read_logs(
        self, ranges: Mapping[SessionKey, tuple[int, int]], limit: int
    ) -> list[list[LogRecord]]:
        """Up to `limit` events of each session's log within its (first, last) seqs, in one round
        trip. On one server or behind Sentinel, what was read is also confirmed by the replicas
        `replication` asks for: a primary deposed under the projector (split brain) may hold writes
        no replica has, which a failover discards, so the ledger must not record them."""
        confirm = (
            []
            if isinstance(self._redis, RedisCluster)
            else self._replication.commands(self.keys.replication_mark(0))
        )
        with unavailable_on_failure():
            async with self._redis.pipeline(transaction=False) as pipe:
                for key, (first, last) in ranges.items():
                    pipe.xrange(self.keys.log(key), min=log_id(first), max=log_id(last), count=limit)
                for command in confirm:
                    pipe.execute_command(*command)
                replies = await pipe.execute()
        if confirm:
            self._replication.check(replies[len(ranges) :], "the logs read", wrote=False)
        return [[_LogRecord(*entry) for entry in cast(LogEntries, log)] for log in replies[: len(ranges)]]

    async def deliveries(self, entries: Sequence[Entry]) -> int:
        """How often the most delivered of `entries` has been delivered (0 once all are acknowledged)."""
        with unavailable_on_failure():
            async with self._redis.pipeline(transaction=False) as pipe:
                for entry in entries:
                    pipe.xpending_range(self.keys.outbox(entry.part), LEDGER_GROUP, entry.id, entry.id, 1)
                replies = await pipe.execute()
        return max((int(pending["times_delivered"]) for reply in replies for pending in reply), default=0)

    async def dead_letter_entry(self, bad: Malformed) -> bool:
        return await self._dead_letter_once(bad.part, _about_entry(bad.id), bad.k, bad.s, bad.reason, {})

    async def dead_letter_events(
        self, key: SessionKey, last: Position, reason: str, record: LogRecord | None
    ) -> bool:
        kept = record.fields if record is not None else {b"epoch": str(last.epoch).encode()}
        about = _about_events(key, last)
        return await self._dead_letter_once(self.keys.bucket(key), about, member(key), last.seq, reason, kept)

    async def _dead_letter_once(
        self, bucket: int, about: str, k: str | bytes, s: int | bytes, why: str, fields: Mapping[bytes, bytes]
    ) -> bool:
        """Adds what could not be recorded to the bucket's dead-letter stream, unless a letter
        `about` the same thing is there already: the session `k`, the seq `s`, why, and `fields`
        (the event's own `t`, `e`, `epoch`, when there is one). True when written now."""
        entry: list[EncodableT] = ["k", k, "s", s, "reason", why]
        for name, value in fields.items():
            entry += [name, value]
        with unavailable_on_failure():
            written = await evaluated(
                self._dead_letter,
                [self.keys.dead_letters(bucket), self.keys.dead_letter_index(bucket)],
                [about, *entry],
            )
        return bool(written)

    async def prune_consumers(self, idle_ms: int) -> set[str]:
        """Removes from every bucket's group the consumers other than this one that have nothing
        pending and have been idle `idle_ms` or longer; returns their names."""
        calls = [
            ScriptCall(self._prune, [self.keys.outbox(bucket)], [LEDGER_GROUP, idle_ms, self._consumer])
            for bucket in self.keys.all_buckets()
        ]
        removed = cast(list[list[bytes]], await self._run(calls))
        return {name.decode() for names in removed for name in names}

    async def lag(self) -> int:
        """Entries not yet recorded (acknowledged entries are deleted, so it is their sum)."""
        with unavailable_on_failure():
            lengths = await each_bucket(
                self._redis, self.keys, lambda pipe, bucket: pipe.xlen(self.keys.outbox(bucket))
            )
        return sum(int(length) for length in lengths)

    async def close(self) -> None:
        await close_client(self._redis)

    async def _run(self, calls: Sequence[ScriptCall]) -> list[Any]:
        """Script calls in one round trip: pipelined on one server, sent all at once on a Redis
        Cluster (whose pipeline runs no scripts); any failure raised once all have ended."""
        if not calls:
            return []
        with unavailable_on_failure():
            if isinstance(self._redis, RedisCluster):
                outcomes = await asyncio.gather(
                    *(evaluated(call.script, call.keys, call.args) for call in calls), return_exceptions=True
                )
                for outcome in outcomes:
                    if isinstance(outcome, BaseException):
                        raise outcome
                return outcomes
            async with self._redis.pipeline(transaction=False) as pipe:
                for call in calls:
                    await call.script(keys=call.keys, args=call.args, client=pipe)
                return await pipe.execute()
