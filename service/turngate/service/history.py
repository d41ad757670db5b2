"""Turn history for GetTurn and ListTurns: the ledger, completed by the live session document.

The document is fresher than the ledger for the active turn (its lease, phase and tool calls
change without a ledger write) and, in redis mode, for turns the projector has not recorded yet.
Error texts and resolutions live only in the ledger, so a turn not projected yet shows none.
"""

from __future__ import annotations

from turngate.service import core
from turngate.service.core import SessionKey
from turngate.service.ports.history import TurnHistory, TurnView, turn_view
from turngate.service.ports.store import Store, StoreUnavailable


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
        turn_view(turn)
        for turn in state.recent
        if turn.generation not in recorded and turn_id in ("", turn.turn_id)
    ]
    active = state.active
    if active is not None and turn_id in ("", active.turn_id):
        views.append(turn_view(active, recorded.get(active.generation)))
    return views
