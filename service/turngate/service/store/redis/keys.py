"""Where the Redis store keeps things. Every key one command touches shares a `{bucket}` hash tag,
so each command lives in one slot and the layout stays valid on Redis Cluster.

Per session (`member` = `project/session`; ids cannot contain `/`):
  `<prefix>:{b}:doc:<member>`   hash: `v` version, `doc` document JSON, `ledger` seq projected so far
  `<prefix>:{b}:log:<member>`   stream of the session's events, entry id `<seq>-0`, fields `t` time,
                                `e` event, `epoch` the document's epoch
Per bucket:
  `<prefix>:{b}:deadlines`      sorted set: member → next deadline (µs): an active turn's or a
                                queued turn's expiry
  `<prefix>:{b}:active`         sorted set: the members of `deadlines` that a turn holds
                                (`Session.turn_active`), with the same score
  `<prefix>:{b}:outbox`         stream, one entry per commit: `k` member, `s` last seq written,
                                `epoch` the epoch of the log that seq is in
  `<prefix>:{b}:replicated`     string, written only with redis_wait_replicas: see store.py
  `<prefix>:{b}:deadletter`     stream of what the ledger could never record: `k`, `s`, `reason`, and
                                the event's `t`, `e`, `epoch` when there is one (ledger/projector.py)
  `<prefix>:{b}:deadletter:index`  hash: what each dead letter is about → its entry id, so each is
                                written once (dead_letter.lua)
Never written:
  `<prefix>:{probe}:doc`, `:log` the document and log the health probe's compare-and-set confirms (version 0)

Entries written by 0.1.0 have no `epoch`: they are of the legacy epoch (`core.LEGACY_EPOCH`).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass

from turngate.service.codec import load_event_body
from turngate.service.core import LEGACY_EPOCH, Event, SessionKey

LEDGER_GROUP = "ledger"


def member(key: SessionKey) -> str:
    return f"{key.project_id}/{key.session_id}"


def session_of(member_name: str) -> SessionKey:
    project_id, session_id = member_name.split("/", 1)
    return SessionKey(project_id, session_id)


def log_id(seq: int) -> str:
    """The stream id of event `seq`: a cursor maps straight to a stream position."""
    return f"{seq}-0"


def seq_of(entry_id: str | bytes) -> int:
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return int(text.split("-", 1)[0])


# A stream read as redis-py returns it (bytes, without decode_responses).
LogEntries = list[tuple[bytes, dict[bytes, bytes]]]


def epoch_of(fields: Mapping[bytes, bytes]) -> int:
    """The epoch a log or outbox entry names."""
    return int(fields.get(b"epoch", LEGACY_EPOCH))


def log_event(entry_id: bytes, fields: Mapping[bytes, bytes]) -> Event:
    """The event a session-log entry holds."""
    return Event(seq_of(entry_id), int(fields[b"t"]), load_event_body(fields[b"e"]), epoch_of(fields))


@dataclass(frozen=True, slots=True)
class Keyspace:
    prefix: str = "tg"
    buckets: int = 16

    def bucket(self, key: SessionKey) -> int:
        """A stable hash of project+session (the same on every replica and every run)."""
        return zlib.crc32(member(key).encode()) % self.buckets

    def _tag(self, bucket: int) -> str:
        return f"{self.prefix}:{{{bucket}}}"

    def doc(self, key: SessionKey) -> str:
        return f"{self._tag(self.bucket(key))}:doc:{member(key)}"

    def log(self, key: SessionKey) -> str:
        return f"{self._tag(self.bucket(key))}:log:{member(key)}"

    def deadlines(self, bucket: int) -> str:
        return f"{self._tag(bucket)}:deadlines"

    def active(self, bucket: int) -> str:
        return f"{self._tag(bucket)}:active"

    def idle(self, bucket: int) -> str:
        """The bucket's sessions in which nothing is live, by since when (R1)."""
        return f"{self._tag(bucket)}:idle"

    def outbox(self, bucket: int) -> str:
        return f"{self._tag(bucket)}:outbox"

    def script_keys(self, key: SessionKey) -> list[str]:
        """The keys the compare-and-set script (cas.lua) takes for `key`'s session, in its order."""
        bucket = self.bucket(key)
        return [
            self.doc(key),
            self.log(key),
            self.deadlines(bucket),
            self.outbox(bucket),
            self.active(bucket),
            self.idle(bucket),
        ]

    def dead_letters(self, bucket: int) -> str:
        return f"{self._tag(bucket)}:deadletter"

    def probe(self) -> list[str]:
        """The document and log the health probe confirms on: never written, one slot."""
        return [f"{self.prefix}:{{probe}}:doc", f"{self.prefix}:{{probe}}:log"]

    def replication_mark(self, bucket: int) -> str:
        """Written by a confirmation that waits for replicas (WAIT counts a connection's writes)."""
        return f"{self._tag(bucket)}:replicated"

    def dead_letter_index(self, bucket: int) -> str:
        return f"{self._tag(bucket)}:deadletter:index"

    def all_buckets(self) -> range:
        return range(self.buckets)
