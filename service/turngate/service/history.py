"""Turn history for GetTurn and ListTurns: the ledger, with what it has not recorded yet replayed
onto it, so a read never shows less than a write already acknowledged. And the state of sessions
as GetSession shows it, for one session or a page of ListSessions.

In redis mode the projector copies the session logs into the ledger after the fact. Until it has,
the events it lacks are still in the session's log (the store trims only what the ledger holds),
and `replay` applies them as the ledger will. While the ledger is down, the turns whose whole
history the log still keeps are answered from the log alone; any other is UNAVAILABLE (never a
turn with less than it had). The document adds what no event carries: the active turn's lease,
which heartbeats extend, and the turns waiting in the queue (GetTurn answers one as QUEUED; they
have no place in ListTurns until they leave the queue: docs/decisions.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, replace

from turngate.service import core
from turngate.service.core import SessionKey, TurnPhase
from turngate.service.ledger.reads import recall, settled_turn_of
from turngate.service.ledger.replay import replay
from turngate.service.ports.history import SessionActivity, TurnHistory, TurnView, turn_view
from turngate.service.ports.store import Store, StoreUnavailable

# Events read per round trip when the log alone answers.
_LOG_PAGE = 1_000


class LiveHistory:
    def __init__(self, ledger: TurnHistory, store: Store) -> None:
        self._ledger = ledger
        self._store = store

    async def session(self, key: SessionKey) -> core.Session:
        """The session's document; for one the store does not hold (never written, or removed:
        R2), its settled turns as history recalls them, if history answers."""
        state = await self._store.load(key)
        if state.epoch != core.NO_EPOCH:
            return state
        try:
            return core.recalled(state, await recall(self._ledger, key))
        except StoreUnavailable:
            return state

    async def listed(self, found: Sequence[SessionActivity]) -> list[core.Session]:
        """Each session's document, read at once; for one the store does not hold, its last settled
        turn as `found` has it from history (all GetSession shows of the turns it recalls)."""
        states = await asyncio.gather(*(self._store.load(activity.key) for activity in found))
        return [_listed(state, activity) for state, activity in zip(states, found, strict=True)]

    async def get_turn(self, key: SessionKey, turn_id: str) -> TurnView | None:
        """The turn's latest generation, with its tool calls, interactions and steers; a turn
        waiting in the queue as the document has it (newer than any earlier turn of the same id)."""
        live = await self._store.unrecorded(key)
        if (waiting := live.state.queued(turn_id)) is not None:
            return turn_view(waiting[1])
        try:
            recorded = await self._ledger.get_turn(key, turn_id)
        except StoreUnavailable:
            log = await self._log(key, live.state)
            found = _latest(replay(key, (), log.events), turn_id)
            if found is None and not log.whole:
                raise
        else:
            found = _latest(replay(key, () if recorded is None else (recorded,), live.events), turn_id)
        return None if found is None else _with_lease(found, live.state)

    async def list_turns(self, key: SessionKey, before_generation: int | None, limit: int) -> list[TurnView]:
        """Up to `limit` turns older than `before_generation`, newest first, without calls,
        interactions or steers."""
        live = await self._store.unrecorded(key)
        try:
            page = await self._ledger.list_turns(key, before_generation, limit)
        except StoreUnavailable:
            log = await self._log(key, live.state)
            turns = _page(replay(key, (), log.events), before_generation, limit)
            if len(turns) < limit and not log.whole:
                raise
        else:
            turns = _page(replay(key, page, live.events), before_generation, limit)
        return [
            replace(_with_lease(view, live.state), tool_calls=(), interactions=(), steers=())
            for view in turns
        ]

    async def _log(self, key: SessionKey, state: core.Session) -> _Log:
        """Every event the session's log still keeps (`state`: its document, read before)."""
        events: list[core.Event] = []
        while page := await self._store.events_after(key, events[-1].seq if events else 0, _LOG_PAGE):
            events += page
            if len(page) < _LOG_PAGE:
                break
        return _Log(tuple(events), state.head)


@dataclass(frozen=True, slots=True)
class _Log:
    """Events of a session's log, in seq order. Replayed alone they give every turn whose
    admission they hold, whole (the log has no gaps); a turn admitted before them is unknown,
    unless they start at the session's first event."""

    events: tuple[core.Event, ...]
    # The head of the session's log when its document was read, before the log.
    head: int

    @property
    def whole(self) -> bool:
        return self.events[0].seq == 1 if self.events else self.head == 0


def _listed(state: core.Session, activity: SessionActivity) -> core.Session:
    settled = None if activity.last_settled is None else settled_turn_of(activity.last_settled)
    if state.epoch != core.NO_EPOCH or settled is None:
        return state
    return core.recalled(state, (settled,))


def _latest(turns: dict[int, TurnView], turn_id: str) -> TurnView | None:
    return max((view for view in turns.values() if view.turn_id == turn_id), key=_generation, default=None)


def _page(turns: dict[int, TurnView], before_generation: int | None, limit: int) -> list[TurnView]:
    """Newest first, older than `before_generation`."""
    older = [
        view for view in turns.values() if before_generation is None or view.generation < before_generation
    ]
    return sorted(older, key=_generation, reverse=True)[:limit]


def _generation(view: TurnView) -> int:
    return view.generation


def _with_lease(view: TurnView, state: core.Session) -> TurnView:
    """The active turn's lease as the document has it (heartbeats extend it without an event)."""
    active = state.active
    if active is None or view.generation != active.generation or view.phase is TurnPhase.SETTLED:
        return view
    return replace(view, lease_expires_at=active.lease_expires_at)
