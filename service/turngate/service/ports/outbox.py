"""What the ledger projector needs of a store that keeps the ledger apart (redis mode): an outbox
of the sessions each commit wrote to, read as one consumer of a group (an entry stays pending
until it is acknowledged, and another consumer may take it over); the session logs its entries
point to; acknowledgements, which also tell the store how far the ledger holds a session (so it
may trim the log below); and dead letters, each written once.

A failure of the outbox is StoreUnavailable: entries then stay pending, never blamed on an event.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from turngate.service.core import Event, SessionKey

_REASON_CHARS = 1_000


@dataclass(frozen=True, slots=True)
class Position:
    """A place in a session's history: event `seq` of the log of `epoch`."""

    epoch: int
    seq: int

    def covers(self, target: Position) -> bool:
        """Whether a ledger recorded up to here holds `target`'s event: the same log, not behind."""
        return self.epoch == target.epoch and self.seq >= target.seq


@dataclass(frozen=True, slots=True)
class Entry:
    """An outbox entry: the session `key` has events up to `seq` of the log of `epoch` to record;
    or, `retired`, it left the store with its log of `epoch` recorded up to `seq` (R1).
    `part` and `id` say where the outbox keeps it (its partition, and its id there)."""

    part: int
    id: bytes
    key: SessionKey
    seq: int
    epoch: int
    retired: bool = False


@dataclass(frozen=True, slots=True)
class Malformed:
    """An outbox entry that names no session and seq: its place, what it said, and why it is bad."""

    part: int
    id: bytes
    k: bytes
    s: bytes
    reason: str


@dataclass(slots=True)
class Delivered:
    """Entries read, by what becomes of them: projected per session, only acknowledged (`gone`:
    deleted from the outbox while pending here), or dead-lettered (`malformed`)."""

    by_session: dict[SessionKey, list[Entry]]
    gone: list[tuple[int, bytes]]
    malformed: list[Malformed]

    def __len__(self) -> int:
        return sum(map(len, self.by_session.values())) + len(self.gone) + len(self.malformed)


class LogRecord(Protocol):
    """One event of a session's log as the outbox reads it: its place, and the event, decoded on
    demand (an event that does not decode is dead-lettered with the `fields` it is kept as)."""

    @property
    def seq(self) -> int: ...

    @property
    def epoch(self) -> int: ...

    @property
    def fields(self) -> Mapping[bytes, bytes]: ...

    def event(self) -> Event:
        """The event; raises when what is kept is not one."""
        ...


class Outbox(Protocol):
    async def create_groups(self) -> None:
        """Makes the consumer group where it is missing (every entry ever written is then new)."""
        ...

    async def read_new(self) -> Delivered:
        """Entries no consumer has been given yet, up to a batch per partition."""
        ...

    def own_pending(self) -> AsyncIterator[Delivered]:
        """The entries pending with this consumer, a batch at a time; each batch is acknowledged
        before the next is read."""
        ...

    def claim_idle(self, idle_ms: int) -> AsyncIterator[Delivered]:
        """Takes over, a batch at a time, entries pending longer than `idle_ms` with any consumer."""
        ...

    async def read_logs(
        self, ranges: Mapping[SessionKey, tuple[int, int]], limit: int
    ) -> list[list[LogRecord]]:
        """Up to `limit` events of each session's log within its (first, last) seqs, in `ranges`'
        order; what only a primary that may be deposed holds is not returned (StoreUnavailable)."""
        ...

    async def acknowledge(
        self, recorded: Sequence[tuple[Sequence[Entry], Position]], gone: Sequence[tuple[int, bytes]]
    ) -> None:
        """Acknowledges each recorded session's entries, telling the store the ledger holds its log
        up to the cursor given, and acknowledges the `gone` ones."""
        ...

    async def deliveries(self, entries: Sequence[Entry]) -> int:
        """How often the most delivered of `entries` has been delivered (0 once all are acknowledged)."""
        ...

    async def dead_letter_entry(self, bad: Malformed) -> bool:
        """Dead-letters a malformed entry, unless it was before; True when written now."""
        ...

    async def dead_letter_events(
        self, key: SessionKey, last: Position, reason: str, record: LogRecord | None
    ) -> bool:
        """Dead-letters the session's events up to `last` that could not be recorded (the event as
        kept, when there is one: `record`), unless that was done before; True when written now."""
        ...

    async def prune_consumers(self, idle_ms: int) -> set[str]:
        """Removes the consumers other than this one with nothing pending, idle `idle_ms` or longer;
        returns their names."""
        ...

    async def lag(self) -> int:
        """Entries not yet acknowledged."""
        ...

    async def close(self) -> None: ...


def described(exc: BaseException) -> str:
    """What went wrong, in one short line, as a dead letter gives the reason."""
    lines = str(exc).splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:_REASON_CHARS]
