"""The runner's entry point: `client.runner(runner_id).turn(session_id, turn_id)`."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

from turngate.client.connection import Connection
from turngate.client.turn import Turn, run_turn


class Runner:
    """One runner process (`runner_id` names it; another id cannot take over its turns)."""

    runner_id: str

    def __init__(self, connection: Connection, runner_id: str) -> None:
        self._connection = connection
        self.runner_id = runner_id

    def turn(
        self, session_id: str, turn_id: str, *, lease_ttl: float | None = None
    ) -> AbstractAsyncContextManager[Turn]:
        """`async with runner.turn(session_id, turn_id) as turn:` admits the turn (or raises
        `SessionBusy`, `TurnCancelled`, `TurnAlreadySettled`, `TurnOwnedByOtherRunner`,
        `TurnHeldByOtherPrincipal`), keeps its lease (`lease_ttl` seconds; the service's default
        when None) while the body runs, and on exit reports its one outcome: COMPLETED, FAILED if
        an exception escaped (re-raised), or CANCELLED if a Stop was requested or the body was
        cancelled."""
        return run_turn(self._connection, self.runner_id, session_id, turn_id, lease_ttl)
