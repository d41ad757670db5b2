"""An in-memory store: the store port (ports/store.py) over a dict, with a clock the test sets (or,
for the store contract suite, the host's).

It is a `CompareAndSetStore`, so it runs the real compare-and-set loop, listeners, observers and
`before_write` and `after_write` seams; only the read and the conditional write are its own.
Several `MemoryStore`s may share one `MemoryData` (`replica()`), as replicas share a database:
each has its own listeners, so a commit made through one is not published by another's watch hub.

The unit tests above the core run on it; it keeps the store contract as the real stores do
(tests/contract runs it as one more backend), so what they learn of a store holds for those.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field

from turngate.service.core import Command, Event, Session, SessionKey, SettledTurn, TurnSettled
from turngate.service.ports.store import (
    Applied,
    BeforeWrite,
    StoreUnavailable,
    Unrecorded,
    WriteOutcomeUnknown,
)
from turngate.service.store.cas import CompareAndSetStore, History

MAX_ATTEMPTS = 32
# A realistic store clock (µs since the epoch): where a FakeClock starts, and the core's unit tests' timeline.
T0 = 1_700_000_000 * 1_000_000


@dataclass
class FakeClock:
    """The store's clock (I10), in µs since the epoch; it moves only when the test moves it."""

    now: int = T0

    def advance(self, us: int) -> int:
        self.now += us
        return self.now


class HostClock:
    """The host's clock as the store's (µs since the epoch), as the embedded SQLite store has it:
    for the store contract suite, whose tests wait for deadlines to pass."""

    @property
    def now(self) -> int:
        return time.time_ns() // 1_000


@dataclass(frozen=True, slots=True)
class _Row:
    """One session as a store keeps it: the document and its version, its log, its deadline and
    whether a turn holds it."""

    version: int
    state: Session
    events: tuple[Event, ...]
    deadline: int | None
    turn_active: bool


@dataclass
class MemoryData:
    """What the stores sharing it see: one clock, one row per session. `down` makes every call
    fail as an unreachable database does (StoreUnavailable), without touching the data.

    As the Redis store does, it tells which events a ledger fed after the fact may lack: those
    after `recorded[key]` (the ledger's mark, 0 by default: a ledger that has recorded nothing),
    and its log keeps the events after `trimmed[key]` only. `history` is what a ledger keeps of
    each session's settled turns, after the session has left too (R1)."""

    clock: FakeClock | HostClock = field(default_factory=FakeClock)
    rows: dict[SessionKey, _Row] = field(default_factory=dict)
    down: bool = False
    recorded: dict[SessionKey, int] = field(default_factory=dict)
    trimmed: dict[SessionKey, int] = field(default_factory=dict)
    history: dict[SessionKey, list[SettledTurn]] = field(default_factory=dict)

    def version(self, key: SessionKey) -> int:
        """How many writes the session has had (0: never written)."""
        row = self.rows.get(key)
        return 0 if row is None else row.version


class _Unreachable(ConnectionError):
    """What the memory "database" raises while it is down, as a driver raises its own errors."""


class MemoryStore(CompareAndSetStore):
    """`Store` over `data` (new data on `clock`, or on a FakeClock at T0, by default)."""

    def __init__(
        self,
        data: MemoryData | None = None,
        *,
        clock: FakeClock | None = None,
        before_write: BeforeWrite | None = None,
        max_attempts: int = MAX_ATTEMPTS,
    ) -> None:
        super().__init__(before_write=before_write, max_attempts=max_attempts, recall=self._recall_settled)
        if data is None:
            data = MemoryData(FakeClock() if clock is None else clock)
        assert clock is None or clock is data.clock, "the data has a clock of its own"
        self.data = data
        self.closed = False

    @property
    def clock(self) -> FakeClock:
        """The clock the test moves (not a store on the host's clock)."""
        assert isinstance(self.data.clock, FakeClock), "this store's clock is the host's"
        return self.data.clock

    def replica(self, *, max_attempts: int = MAX_ATTEMPTS) -> MemoryStore:
        """Another store on the same data, with listeners, observers and seam of its own."""
        return MemoryStore(self.data, max_attempts=max_attempts)

    # --- the compare-and-set -------------------------------------------------------------------

    def _unavailable_on_failure(self) -> AbstractContextManager[None]:
        return _unavailable_on_failure()

    async def _attempt(self, key: SessionKey, command: Command, history: History) -> Applied | None:
        row = self._read(key)
        applied = self._decide(Session() if row is None else row.state, command, self.data.clock.now, history)
        if not applied.decision.changed:
            return applied
        await self._before_write(key, command)
        # From here to the write nothing awaits: no other writer can come in between.
        self._reach()
        if self.data.version(key) != (0 if row is None else row.version):
            return None  # another writer changed the session since the read: decide again
        decision = applied.decision
        self.data.history.setdefault(key, []).extend(
            event.body.turn for event in decision.events if isinstance(event.body, TurnSettled)
        )
        if decision.removed:
            del self.data.rows[key]
        else:
            self.data.rows[key] = _Row(
                version=1 if row is None else row.version + 1,
                state=decision.state,
                events=(() if row is None else row.events) + decision.events,
                deadline=decision.state.deadline(),
                turn_active=decision.state.turn_active,
            )
        with _unavailable_on_failure(sent=True):
            await self._after_write(key, command)
        return applied

    async def _recall_settled(self, key: SessionKey) -> list[SettledTurn]:
        with _unavailable_on_failure():
            self._reach()
        return list(self.data.history.get(key, ()))

    # --- the reads -----------------------------------------------------------------------------

    async def load(self, key: SessionKey) -> Session:
        with _unavailable_on_failure():
            row = self._read(key)
        return Session() if row is None else row.state

    async def events_after(self, key: SessionKey, after_seq: int, limit: int) -> list[Event]:
        with _unavailable_on_failure():
            row = self._read(key)
        events = () if row is None else row.events
        kept_after = max(after_seq, self.data.trimmed.get(key, 0))
        return [event for event in events if event.seq > kept_after][:limit]

    async def unrecorded(self, key: SessionKey) -> Unrecorded:
        with _unavailable_on_failure():
            row = self._read(key)
        if row is None:
            return Unrecorded(Session(), ())
        recorded = self.data.recorded.get(key, 0)
        return Unrecorded(row.state, tuple(event for event in row.events if event.seq > recorded))

    async def now(self) -> int:
        with _unavailable_on_failure():
            self._reach()
        return self.data.clock.now

    async def next_deadline(self) -> int | None:
        with _unavailable_on_failure():
            self._reach()
        return min(self._deadlines().values(), default=None)

    async def due(self, now: int, limit: int) -> list[SessionKey]:
        with _unavailable_on_failure():
            self._reach()
        deadlines = self._deadlines()
        due = sorted((deadline, key) for key, deadline in deadlines.items() if deadline <= now)
        return [key for _, key in due[:limit]]

    async def retirable(self, before: int, limit: int) -> list[SessionKey]:
        with _unavailable_on_failure():
            self._reach()
        idle = ((row.state.idle_since(), key) for key, row in self.data.rows.items())
        return [key for since, key in sorted((s, k) for s, k in idle if s is not None and s <= before)][
            :limit
        ]

    async def active(
        self, project_id: str, after: tuple[int, str] | None, limit: int
    ) -> list[tuple[SessionKey, int]]:
        with _unavailable_on_failure():
            self._reach()
        busy = sorted(
            (deadline, key.session_id)
            for key, deadline in self._deadlines().items()
            if key.project_id == project_id and (after is None or (deadline, key.session_id) > after)
        )
        return [(SessionKey(project_id, session_id), deadline) for deadline, session_id in busy[:limit]]

    async def count_active_in_project(self, project_id: str, bound: int) -> int:
        with _unavailable_on_failure():
            self._reach()
        return min(bound, sum(key.project_id == project_id for key in self._held()))

    async def count_active(self) -> int:
        with _unavailable_on_failure():
            self._reach()
        return len(self._held())

    async def ping(self) -> None:
        with _unavailable_on_failure():
            self._reach()

    async def close(self) -> None:
        self.closed = True

    def _reach(self) -> None:
        if self.closed or self.data.down:
            raise _Unreachable("the memory store is closed" if self.closed else "the memory store is down")

    def _read(self, key: SessionKey) -> _Row | None:
        self._reach()
        return self.data.rows.get(key)

    def _deadlines(self) -> dict[SessionKey, int]:
        """Every session with a deadline (an active turn, or turns waiting), and that deadline."""
        return {key: row.deadline for key, row in self.data.rows.items() if row.deadline is not None}

    def _held(self) -> list[SessionKey]:
        """Every session that a turn holds."""
        return [key for key, row in self.data.rows.items() if row.turn_active]


@contextmanager
def _unavailable_on_failure(*, sent: bool = False) -> Iterator[None]:
    """The "database" failing, as the real stores classify it: once a write was `sent`, what
    failed may be its reply (WriteOutcomeUnknown)."""
    try:
        yield
    except OSError as error:  # _Unreachable, or a connection a test seam loses
        raise (WriteOutcomeUnknown if sent else StoreUnavailable)(str(error)) from error
