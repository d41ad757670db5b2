"""The store contract: one primitive, `apply`, plus the reads the API, watch hub and watchdog need.

A store never decides anything: it reads the document and its version, runs `core.decide` with
its own clock, and writes the new document, the numbered events, the ledger rows and the next
deadline atomically, only if the version is unchanged (retrying a bounded number of times).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from turngate.service.core import Command, Decision, Event, Session, SessionKey, SettledTurn


class StoreUnavailable(Exception):
    """The store could not be reached, refused, or failed before a write could take effect:
    nothing was written. Its subclass `WriteOutcomeUnknown` is the one exception."""


class WriteOutcomeUnknown(StoreUnavailable):
    """The write was sent, and its reply (or its replicas' confirmation) never came: it may have
    taken effect. The same request sent again answers what it did (docs/design.md §3.2)."""


class StoreContention(Exception):
    """The compare-and-set lost too many times in a row; nothing was written."""


@dataclass(frozen=True, slots=True)
class Applied:
    """One apply's decide(): the command, the document and store-clock time it was decided on, and
    the decision (committed when it changed something; written nowhere otherwise)."""

    command: Command
    state: Session
    now: int
    decision: Decision


@dataclass(frozen=True, slots=True)
class Unrecorded:
    """A session's document and, read together with it, the events of its log that the ledger may
    not hold yet, in seq order (none where the ledger is written with the document)."""

    state: Session
    events: tuple[Event, ...]


# Called after each committed apply, in the committing task, with the key and what was decided.
CommitListener = Callable[[SessionKey, Decision], None]
# Called after every apply (committed or changing nothing), in the committing task: what was decided.
Observer = Callable[[SessionKey, Applied], None]
# The turns a session's history recorded as settled, oldest first (R2; none when it has none).
Recall = Callable[[SessionKey], Awaitable[Sequence[SettledTurn]]]
# Test seam: awaited between reading the document and writing the new one, to force interleavings.
BeforeWrite = Callable[[SessionKey, Command], Awaitable[None]]
# Test seam: awaited once a write has been made, before the caller is answered; what it raises is
# a failure of the write's reply (an OSError: the connection lost with the reply).
AfterWrite = Callable[[SessionKey, Command], Awaitable[None]]


class Store(Protocol):
    async def apply(self, key: SessionKey, command: Command) -> Decision:
        """Decides `command` against the session's current document and commits the result."""
        ...

    async def load(self, key: SessionKey) -> Session:
        """The session's current document (a fresh `Session()` if it never had one)."""
        ...

    async def events_after(self, key: SessionKey, after_seq: int, limit: int) -> list[Event]:
        """Up to `limit` events with seq > after_seq, in seq order (of those the log still keeps)."""
        ...

    async def unrecorded(self, key: SessionKey) -> Unrecorded:
        """The session's document and the events the ledger may lack, read at one instant."""
        ...

    async def now(self) -> int:
        """The store's clock, µs since the epoch (I10)."""
        ...

    async def next_deadline(self) -> int | None:
        """The earliest deadline of any session, or None when nothing is due ever."""
        ...

    async def due(self, now: int, limit: int) -> list[SessionKey]:
        """Up to `limit` sessions whose deadline is at or before `now`, earliest first."""
        ...

    async def retirable(self, before: int, limit: int) -> list[SessionKey]:
        """Up to `limit` sessions in which nothing has been live since `before` or earlier (R1:
        `Session.idle_since`), longest idle first; read from an index, never a scan."""
        ...

    async def active(
        self, project_id: str, after: tuple[int, str] | None, limit: int
    ) -> list[tuple[SessionKey, int]]:
        """Up to `limit` of the project's sessions that have a deadline (an active turn, or turns
        waiting in the queue) and their deadlines, ordered by (deadline, session_id), after `after`
        (a previous page's last pair)."""
        ...

    async def count_active_in_project(self, project_id: str, bound: int) -> int:
        """How many of the project's sessions a turn holds (`Session.turn_active`), counted up to
        `bound`."""
        ...

    async def ping(self) -> None:
        """Returns if the store answers; raises StoreUnavailable otherwise."""
        ...

    def add_listener(self, listener: CommitListener) -> None:
        """Registers a callback run after every commit made through this store instance."""
        ...

    def add_observer(self, observer: Observer) -> None:
        """Registers a callback run after every apply through this store instance, with its inputs."""
        ...

    async def count_active(self) -> int:
        """How many sessions, of every project, a turn holds (`Session.turn_active`)."""
        ...

    async def close(self) -> None: ...
