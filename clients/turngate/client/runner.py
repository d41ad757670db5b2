"""The runner's entry point: `client.runner(runner_id).turn(session_id, turn_id)`."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

from turngate.client import admission
from turngate.client.admission import OnQueued
from turngate.client.connection import Connection
from turngate.client.enums import AdmissionMode
from turngate.client.turn import Turn, run_turn


class Runner:
    """One runner process (`runner_id` names it; another id cannot take over its turns)."""

    runner_id: str

    def __init__(self, connection: Connection, runner_id: str) -> None:
        self._connection = connection
        self.runner_id = runner_id

    def turn(
        self,
        session_id: str,
        turn_id: str,
        *,
        lease_ttl: float | None = None,
        mode: AdmissionMode = AdmissionMode.REJECT,
        expected_active_turn_id: str = "",
        max_queue_wait: float | None = None,
        on_queued: OnQueued | None = None,
    ) -> AbstractAsyncContextManager[Turn]:
        """`async with runner.turn(session_id, turn_id) as turn:` admits the turn (or raises
        `SessionBusy`, `TurnCancelled`, `TurnAlreadySettled`, `TurnOwnedByOtherRunner`,
        `TurnHeldByOtherPrincipal`…), keeps its lease (`lease_ttl` seconds; the service's default
        when None) while the body runs, and on exit reports its one outcome: COMPLETED, FAILED if
        an exception escaped (re-raised), or CANCELLED if a Stop was requested or the body was
        cancelled.

        `mode` says what to do while another turn holds the session: REJECT (refuse, as above),
        ENQUEUE (wait in the session's queue, first in first out) or INTERRUPT (stop the active
        turn, only if it is `expected_active_turn_id` when that is given, and wait at the head
        of the queue). A queued turn waits at most `max_queue_wait` seconds (the service's
        default when None): entering returns once it is admitted, told by push, and
        `on_queued(queued_turn)` is called with its place when it is queued and each time its
        `position` changes. Waiting ends with `QueuedTurnCancelled` (a Stop named it),
        `QueuedTurnCleared` (a Stop cleared the queue) or `QueuedTurnExpired` (it waited too
        long); the new refusals are `SessionQueueFull`, `SessionQueuePaused` and
        `ActiveTurnMismatch`. Cancelled while it waits, the turn stays queued: it leaves at its
        expiry, or once promoted its unclaimed lease runs out (a gateway's Stop removes it at
        once)."""
        request = admission.admit_request(
            self._connection,
            self.runner_id,
            session_id,
            turn_id,
            lease_ttl=lease_ttl,
            mode=mode,
            expected_active_turn_id=expected_active_turn_id,
            max_queue_wait=max_queue_wait,
        )
        return run_turn(self._connection, request, on_queued)
