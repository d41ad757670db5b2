"""Turn history for GetTurn and ListTurns: the ledger, completed by the live session document.

The document is fresher than the ledger for the active turn (its lease, phase and tool calls
change without a ledger write) and, in redis mode, for turns the projector has not recorded yet.
Error texts and resolutions live only in the ledger, so a turn not projected yet shows none.
"""

from __future__ import annotations

from turngate.service import core
from turngate.service.ledger.views import InteractionView, ToolCallView, TurnHistory, TurnView
from turngate.service.store.base import SessionKey, Store, StoreUnavailable


class LiveHistory:
    def __init__(self, ledger: TurnHistory, store: Store) -> None:
        self._ledger = ledger
        self._store = store

    async def get_turn(self, key: SessionKey, turn_id: str) -> TurnView | None:
        """The turn's latest generation; from the live document alone while the ledger is down."""
        state = await self._store.load(key)
        try:
            recorded = await self._ledger.get_turn(key, turn_id)
        except StoreUnavailable:
            live = _merged(state, [], turn_id)
            if not live:
                raise
            return live[max(live)]
        merged = _merged(state, [recorded] if recorded else [], turn_id)
        return merged[max(merged)] if merged else None

    async def list_turns(self, key: SessionKey, before_generation: int | None, limit: int) -> list[TurnView]:
        """Newest first: the ledger's page, with live turns replacing or completing it."""
        state = await self._store.load(key)
        merged = _merged(state, await self._ledger.list_turns(key, before_generation, limit))
        newest = sorted(merged, reverse=True)
        return [merged[g] for g in newest if before_generation is None or g < before_generation][:limit]


def _merged(state: core.Session, recorded: list[TurnView], turn_id: str = "") -> dict[int, TurnView]:
    """Turns by generation: the ledger's, replaced or completed by what the live document has."""
    by_generation = {view.generation: view for view in recorded}
    return by_generation | {view.generation: view for view in _live_turns(state, by_generation, turn_id)}


def _live_turns(state: core.Session, recorded: dict[int, TurnView], turn_id: str = "") -> list[TurnView]:
    """The active turn, and the settled turns the ledger has not recorded, as the document has them."""
    views = [
        _settled_view(turn)
        for turn in state.recent
        if turn.generation not in recorded and turn_id in ("", turn.turn_id)
    ]
    active = state.active
    if active is not None and turn_id in ("", active.turn_id):
        views.append(_active_view(active, recorded.get(active.generation)))
    return views


def _settled_view(turn: core.SettledTurn) -> TurnView:
    return TurnView(
        turn_id=turn.turn_id,
        runner_id=turn.runner_id,
        generation=turn.generation,
        phase=core.TurnPhase.SETTLED,
        outcome=turn.outcome,
        settled_by=turn.settled_by,
        stop_requested=turn.stop_requested,
        stop_reason=turn.stop_reason,
        stop_requested_at=None,
        stop_deadline=None,
        admitted_at=turn.admitted_at,
        settled_at=turn.settled_at,
        lease_expires_at=turn.settled_at,
        error=turn.error,
        traceparent="",
    )


def _active_view(turn: core.ActiveTurn, recorded: TurnView | None) -> TurnView:
    """The active turn from the document; error texts and resolutions from the ledger."""
    errors = {call.call_id: call.error for call in recorded.tool_calls} if recorded else {}
    answers = {it.interaction_id: it.resolution for it in recorded.interactions} if recorded else {}
    stop = turn.stop
    return TurnView(
        turn_id=turn.turn_id,
        runner_id=turn.runner_id,
        generation=turn.generation,
        phase=turn.phase,
        outcome=None,
        settled_by=None,
        stop_requested=stop is not None,
        stop_reason=stop.reason if stop else "",
        stop_requested_at=stop.requested_at if stop else None,
        stop_deadline=stop.deadline if stop else None,
        admitted_at=turn.admitted_at,
        settled_at=None,
        lease_expires_at=turn.lease_expires_at,
        error="",
        traceparent=turn.traceparent,
        tool_calls=tuple(
            ToolCallView(call_id, c.name, c.status, errors.get(call_id, ""), c.opened_at, c.closed_at)
            for call_id, c in turn.tool_calls.items()
        ),
        interactions=tuple(
            InteractionView(iid, i.kind, i.status, answers.get(iid, ""), i.opened_at, i.closed_at)
            for iid, i in turn.interactions.items()
        ),
    )
