"""The ledger projector (redis mode): copies each session's events from the store into the SQL ledger.

A store that keeps the ledger apart writes, with each commit's events, one entry (the session, the
last seq written, the epoch of its log) to an outbox (`ports.outbox.Outbox`; Redis's is
`store.redis.outbox.RedisOutbox`). Every replica reads the outbox as one consumer of its group,
and brings a session's ledger up to an entry's seq like this: one SQL transaction locks the
session's cursor row (`ledger.cursors`: an epoch and a seq), reads the events after the cursor
from the log, records them with the `record()` the SQL store uses, and moves the cursor (one
transaction does this for many sessions at once). Only after that commit does it acknowledge the
entries, which tells the store how far the ledger holds the log (the Redis store trims it only
below). Hence:

* nothing is acknowledged before it is recorded: a crash or an outage at any point leaves the
  entries pending, and any replica takes over entries pending longer than `reclaim_idle`;
* nothing is recorded twice, and a session's events are recorded in seq order, however often and
  by however many replicas its entries are delivered: a second projector waits on the cursor lock,
  then finds the cursor at or past `s` and only acknowledges;
* nothing is dropped silently: an event that cannot be recorded while the ledger otherwise works
  (after `max_deliveries` deliveries), events missing from the log and malformed outbox entries are
  dead-lettered, and counted in `dead_letters`;
* a log the store lost and started again (a new epoch, from seq 1) is never taken for the one the
  cursor follows: when an entry names another epoch than the cursor's and the log holds that
  epoch, the cursor moves to its start and its events are recorded as a new run of the session's
  history, beside the old one (`session_events` are keyed by epoch too); the loss is logged and
  counted in `lost_histories`. An entry whose epoch the log no longer holds is only acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from turngate.service.core import Decision, SessionKey
from turngate.service.ledger.cursors import Cursors
from turngate.service.ledger.record import record_sessions
from turngate.service.ports.outbox import Delivered, Entry, LogRecord, Outbox, Position, described
from turngate.service.ports.store import StoreUnavailable
from turngate.service.sql.engine import unavailable_on_failure

log = logging.getLogger("turngate.projector")

# Per SQL transaction: sessions, and events per session (which keeps transactions short after a
# long ledger outage). One transaction for many sessions saves a commit, and its fsync, per session.
_SESSIONS_PER_TRANSACTION = 50
_EVENTS_PER_TRANSACTION = 500
# Between retries while Redis or the ledger is unreachable: doubling from the first to the last.
_FIRST_BACKOFF_S = 0.05
_LAST_BACKOFF_S = 1.0
# A consumer of the group idle this long with nothing pending is a projector that is gone (a live
# one reads every poll; one pruned all the same is made again by its next read).
PRUNE_IDLE_S = 3_600.0

# Test seam: awaited after each SQL commit that moved a session's cursor (to the seq given),
# before anything is acknowledged.
AfterCommit = Callable[[SessionKey, int], Awaitable[None]]


class _EventFailed(Exception):
    """Decoding or recording events failed for a reason other than the store or the ledger being
    unreachable; `entry` is the first event of those that failed together."""

    def __init__(self, entry: LogRecord, why: str) -> None:
        super().__init__(why)
        self.entry = entry
        self.reason = why


def _target(entries: Sequence[Entry]) -> Position:
    """Where a session's entries (in outbox order) ask its ledger to be: the last seq of the epoch
    written last (an earlier epoch's entries name a log Redis has since started again)."""
    epoch = entries[-1].epoch
    return Position(epoch, max(entry.seq for entry in entries if entry.epoch == epoch))


def _split_at_retirement(entries: Sequence[Entry]) -> tuple[Entry | None, list[Entry]]:
    """A session's last retirement among its entries (in outbox order), if any, and the entries
    after it: those name the log it started again with, a new session's."""
    for i in range(len(entries) - 1, -1, -1):
        if entries[i].retired:
            return entries[i], list(entries[i + 1 :])
    return None, list(entries)


def _first_to_read(cursor: Position, target: Position) -> int:
    """The seq the log is read from: after the cursor, or from the start of a new epoch's log."""
    return cursor.seq + 1 if cursor.epoch == target.epoch else 1


def _contiguous(records: list[LogRecord], first_seq: int) -> list[LogRecord]:
    """The leading records whose seqs run on from `first_seq` without a gap."""
    for i, record in enumerate(records):
        if record.seq != first_seq + i:
            return records[:i]
    return records


def _named(key: SessionKey) -> str:
    return f"{key.project_id}/{key.session_id}"


class LedgerProjector:
    """Projects `outbox` into the ledger on `engine` (already migrated).

    `reclaim_idle` (s): entries pending that long with any consumer are taken over. `prune_idle`
    (s): consumers idle that long with nothing pending are removed from the group.
    `max_deliveries`: how often an entry is delivered before an event of it that fails alone is
    dead-lettered. Per round, what the outbox reads is projected by up to `concurrency`
    transactions at once. A local commit wakes it (after `coalesce` s, so a burst is projected
    together); otherwise it looks for other replicas' entries every `poll_interval` s.
    """

    def __init__(
        self,
        outbox: Outbox,
        engine: AsyncEngine,
        *,
        reclaim_idle: float,
        max_deliveries: int,
        prune_idle: float = PRUNE_IDLE_S,
        concurrency: int = 8,
        poll_interval: float = 1.0,
        coalesce: float = 0.02,
        after_commit: AfterCommit | None = None,
    ) -> None:
        if min(reclaim_idle, prune_idle, poll_interval) <= 0 or max_deliveries < 1 or concurrency < 1:
            raise ValueError("reclaim_idle, prune_idle and poll_interval must be > 0; the counts at least 1")
        self.after_commit = after_commit
        self.dead_letters = 0
        self.lost_histories = 0
        self._outbox = outbox
        self._cursors = Cursors(engine.dialect.name)
        self._engine = engine
        self._reclaim_idle = reclaim_idle
        self._prune_idle = prune_idle
        self._max_deliveries = max_deliveries
        self._poll_interval = poll_interval
        self._coalesce = coalesce
        self._transactions = asyncio.Semaphore(concurrency)
        self._wake = asyncio.Event()

    def on_commit(self, _key: SessionKey, decision: Decision) -> None:
        """A store `CommitListener`: a local commit that wrote events (and so an outbox entry) wakes
        the projector instead of the next poll."""
        if decision.events:
            self._wake.set()

    async def run(self) -> None:
        """Projects until cancelled; cancelling at any point is safe (whatever was not
        acknowledged is delivered again).

        First, and after every failure, it recreates the consumer groups if they are missing and
        retries this consumer's own pending entries; every `reclaim_idle / 2` it takes over idle
        ones and prunes the consumers that are gone; in between it reads new entries, waiting for
        a commit or `poll_interval` when there are none. While Redis or the ledger is unreachable
        it backs off and retries, dropping nothing.
        """
        loop = asyncio.get_running_loop()
        this = asyncio.current_task()
        backoff = _FIRST_BACKOFF_S
        recovering = True
        next_reclaim = loop.time()
        while True:
            # redis-py sends every command under asyncio.wait_for, which on Python 3.11 can swallow
            # a cancellation (CPython gh-86296); a cancelled run() stops all the same.
            if this is not None and this.cancelling():
                raise asyncio.CancelledError
            try:
                if recovering:
                    await self.create_groups()
                    await self._project_each(self._outbox.own_pending())
                    recovering = False
                if loop.time() >= next_reclaim:
                    await self.reclaim()
                    await self.prune()
                    next_reclaim = loop.time() + self._reclaim_idle / 2
                self._wake.clear()
                if not await self.poll():
                    # Not asyncio.wait_for, for the same reason.
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(min(self._poll_interval, next_reclaim - loop.time())):
                            await self._wake.wait()
                        # Let a burst of commits gather, so one round projects them together.
                        await asyncio.sleep(self._coalesce)
                backoff = _FIRST_BACKOFF_S
            except Exception as error:
                # Unreachable: expected, and retried quietly. Anything else (a schema the
                # migrations did not make, a bug) is logged in full and retried the same way.
                if isinstance(error, StoreUnavailable):
                    log.warning("ledger projection paused for %.2fs: %s", backoff, error)
                else:
                    log.exception("ledger projection failed, retrying in %.2fs", backoff)
                recovering = True
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _LAST_BACKOFF_S)

    async def create_groups(self) -> None:
        await self._outbox.create_groups()

    async def poll(self) -> int:
        """Reads and projects the entries no consumer has seen yet; returns how many it read."""
        read = await self._outbox.read_new()
        await self._project(read)
        return len(read)

    async def reclaim(self) -> int:
        """Takes over and projects entries pending longer than `reclaim_idle` with any consumer
        (one that died or hangs, or this one after a failure); returns how many."""
        return await self._project_each(self._outbox.claim_idle(round(self._reclaim_idle * 1000)))

    async def prune(self) -> set[str]:
        """Removes from the group the consumers (of projectors that are gone) with nothing pending,
        idle for `prune_idle` or longer; returns their names."""
        removed = await self._outbox.prune_consumers(round(self._prune_idle * 1000))
        if removed:
            log.info(
                "removed %d gone consumers from the ledger group: %s",
                len(removed),
                ", ".join(sorted(removed)),
            )
        return removed

    async def lag(self) -> int:
        """Outbox entries not yet recorded."""
        return await self._outbox.lag()

    async def close(self) -> None:
        """Closes the Redis client it was given (not the engine, which the caller may share)."""
        await self._outbox.close()

    async def _project_each(self, batches: AsyncIterator[Delivered]) -> int:
        projected = 0
        async for read in batches:
            await self._project(read)
            projected += len(read)
        return projected

    async def _project(self, entries: Delivered) -> None:
        """Projects the sessions of `entries`, up to `_SESSIONS_PER_TRANSACTION` per transaction and
        `concurrency` transactions at once, then acknowledges what was recorded; raises the first
        failure after that."""
        for bad in entries.malformed:
            if await self._outbox.dead_letter_entry(bad):
                log.error("outbox entry %r of part %d dead-lettered: %s", bad.id, bad.part, bad.reason)
                self.dead_letters += 1
        by_session = entries.by_session
        # Sorted, so that replicas lock the cursors of the sessions they share in one order.
        keys = sorted(by_session)
        groups = [
            keys[i : i + _SESSIONS_PER_TRANSACTION] for i in range(0, len(keys), _SESSIONS_PER_TRANSACTION)
        ]
        results = await asyncio.gather(
            *(self._project_sessions({key: by_session[key] for key in group}) for group in groups),
            return_exceptions=True,
        )
        recorded = [
            (by_session[key], cursor)
            for result in results
            if isinstance(result, dict)
            for key, cursor in result.items()
            if cursor is not None
        ]
        await self._outbox.acknowledge(
            recorded, [*entries.gone, *((bad.part, bad.id) for bad in entries.malformed)]
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _project_sessions(
        self, entries: dict[SessionKey, list[Entry]]
    ) -> dict[SessionKey, Position | None]:
        """Records each session's events up to the last of its entries; returns each one's cursor
        (at or past that), or None for a session with an event that failed and may yet be retried
        (its entries stay pending)."""
        left: dict[SessionKey, Entry] = {}
        live: dict[SessionKey, list[Entry]] = {}
        for key, of in entries.items():
            retirement, after = _split_at_retirement(of)
            if retirement is not None:
                left[key] = retirement
            if after:
                live[key] = after
        async with self._transactions:
            cursors: dict[SessionKey, Position | None] = {}
            if left:
                cursors |= await self._forget(left)
            if not live:
                return cursors
            try:
                return cursors | await self._advance({key: _target(of) for key, of in live.items()})
            except _EventFailed:
                pass
            # An event of one of them cannot be recorded: find it, session by session.
            return cursors | {key: await self._project_session(key, of) for key, of in live.items()}

    async def _forget(self, left: dict[SessionKey, Entry]) -> dict[SessionKey, Position]:
        """Forgets the cursors of sessions that left the store (R1), whose logs the ledger held
        whole; returns where each log ended."""
        with unavailable_on_failure():
            async with self._engine.begin() as conn:
                await self._cursors.forget(conn, {key: entry.epoch for key, entry in left.items()})
        return {key: Position(entry.epoch, entry.seq) for key, entry in left.items()}

    async def _project_session(self, key: SessionKey, entries: list[Entry]) -> Position | None:
        """Records one session's events, one per transaction from where one fails: that one is
        retried while its entries have been delivered fewer than max_deliveries times, then
        dead-lettered."""
        limit = _EVENTS_PER_TRANSACTION
        while True:
            try:
                return (await self._advance({key: _target(entries)}, limit))[key]
            except _EventFailed as failure:
                if limit > 1:
                    limit = 1
                    continue
                deliveries = await self._outbox.deliveries(entries)
                if deliveries < self._max_deliveries:
                    log.warning(
                        "%s: event %d not recorded (delivery %d of %d), will retry: %s",
                        _named(key),
                        failure.entry.seq,
                        deliveries,
                        self._max_deliveries,
                        failure.reason,
                    )
                    return None
                await self._skip_failed_event(key, failure)
                limit = _EVENTS_PER_TRANSACTION

    async def _advance(
        self, targets: dict[SessionKey, Position], limit: int = _EVENTS_PER_TRANSACTION
    ) -> dict[SessionKey, Position]:
        """Commits until every session's cursor covers its target, or stays at another epoch (the
        target's log is gone); returns the cursors."""
        cursors: dict[SessionKey, Position] = {}
        while targets:
            cursors |= await self._commit_next(targets, limit)
            targets = {
                key: target
                for key, target in targets.items()
                if cursors[key].epoch == target.epoch and not cursors[key].covers(target)
            }
        return cursors

    async def _commit_next(
        self, targets: dict[SessionKey, Position], limit: int
    ) -> dict[SessionKey, Position]:
        """One transaction under the sessions' cursor locks: records up to `limit` events after
        each cursor (from the start of the log, for a cursor that moves to a new epoch), or, when a
        log lacks the events that come next, only dead-letters those ranges; moves the cursors past
        what it handled. Returns every session's cursor."""
        missing: dict[SessionKey, str] = {}
        # Sessions whose log Redis started again, with where the ledger had got in the lost one.
        lost: dict[SessionKey, Position] = {}
        gone: list[SessionKey] = []
        with unavailable_on_failure():
            async with self._engine.begin() as conn:
                cursors = await self._cursors.lock(
                    conn, {key: target.epoch for key, target in targets.items()}
                )
                behind = [key for key, target in targets.items() if not cursors[key].covers(target)]
                if not behind:
                    return cursors
                logs = await self._outbox.read_logs(
                    {key: (_first_to_read(cursors[key], targets[key]), targets[key].seq) for key in behind},
                    limit,
                )
                found: list[tuple[SessionKey, list[LogRecord]]] = []
                for key, records in zip(behind, logs, strict=True):
                    target = targets[key]
                    if cursors[key].epoch != target.epoch:
                        if not records or records[0].epoch != target.epoch:
                            gone.append(key)
                            continue
                        lost[key] = cursors[key]
                        cursors[key] = Position(target.epoch, 0)
                    # Records of another epoch are of a log that replaced this one: this one's are missing.
                    records = [record for record in records if record.epoch == target.epoch]
                    first = cursors[key].seq + 1
                    next_seq = records[0].seq if records else target.seq + 1
                    if next_seq > first:
                        missing[key] = f"events {first}..{next_seq - 1} are missing from the session log"
                        cursors[key] = Position(target.epoch, next_seq - 1)
                    else:
                        found.append((key, _contiguous(records, first)))
                if missing:
                    # A transaction that skips gaps records nothing: a gap is dead-lettered before
                    # the commit (never lost), and once (were the commit to fail, the retry's
                    # letter would be the same one).
                    moved = list(missing)
                    for key, reason in missing.items():
                        await self._dead_letter(key, cursors[key], reason, reason, None)
                else:
                    await self._record(conn, found)
                    moved = []
                    for key, records in found:
                        moved.append(key)
                        cursors[key] = Position(targets[key].epoch, records[-1].seq)
                if moved:
                    await self._cursors.move(conn, {key: cursors[key] for key in moved})
        for key in gone:
            log.warning(
                "%s: outbox entries name events up to %d of epoch %d, which the log no longer holds "
                "(the store lost them); acknowledged",
                _named(key),
                targets[key].seq,
                targets[key].epoch,
            )
        for key in moved:
            if key in lost:
                self._new_run(key, lost[key], cursors[key].epoch)
        for key in moved:
            await self._committed(key, cursors[key].seq)
        return cursors

    async def _record(self, conn: AsyncConnection, found: list[tuple[SessionKey, list[LogRecord]]]) -> None:
        try:
            events = [(key, [record.event() for record in records]) for key, records in found]
            with unavailable_on_failure():
                await record_sessions(conn, events)
        except StoreUnavailable:
            raise
        except Exception as exc:
            raise _EventFailed(found[0][1][0], described(exc)) from exc

    async def _skip_failed_event(self, key: SessionKey, failure: _EventFailed) -> None:
        """Dead-letters the event that failed alone and moves the cursor past it, under the cursor
        lock (so two projectors never both skip it). The first event of a new epoch's log may be
        the one: the cursor then moves to that epoch here."""
        failed = Position(failure.entry.epoch, failure.entry.seq)
        with unavailable_on_failure():
            async with self._engine.begin() as conn:
                cursor = (await self._cursors.lock(conn, {key: failed.epoch}))[key]
                if cursor.covers(failed):
                    return
                # Before the commit, so never lost; once, even if the commit fails and is retried.
                what = f"event {failed.seq} could not be recorded: {failure.reason}"
                await self._dead_letter(key, failed, failure.reason, what, failure.entry)
                await self._cursors.move(conn, {key: failed})
        if cursor.epoch != failed.epoch:
            self._new_run(key, cursor, failed.epoch)
        await self._committed(key, failed.seq)

    async def _dead_letter(
        self, key: SessionKey, last: Position, reason: str, what: str, record: LogRecord | None
    ) -> None:
        """Dead-letters events of `key`'s log up to `last` (with the event as kept, `record`),
        unless that letter was written before; counts and logs the ones it writes."""
        if await self._outbox.dead_letter_events(key, last, reason, record):
            log.error("%s: %s; dead-lettered", _named(key), what)
            self.dead_letters += 1

    def _new_run(self, key: SessionKey, lost: Position, epoch: int) -> None:
        """The ledger now follows a new epoch's log: Redis lost the session's history after `lost`
        (what the ledger holds of it stays)."""
        log.error(
            "%s: Redis lost this session's history (the ledger holds its epoch %d up to seq %d); "
            "its new log, epoch %d, is recorded as a new run",
            _named(key),
            lost.epoch,
            lost.seq,
            epoch,
        )
        self.lost_histories += 1

    async def _committed(self, key: SessionKey, cursor: int) -> None:
        if self.after_commit is not None:
            await self.after_commit(key, cursor)
