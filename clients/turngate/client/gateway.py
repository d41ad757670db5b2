"""The gateway's calls: forward a user's Stop (typed answers) and answers to interactions, and
stop a turn for sure (`stop_and_wait`)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from datetime import datetime

from turngate.client import reads
from turngate.client.connection import Connection
from turngate.client.convert import instant
from turngate.client.watch import Watch
from turngate.v1 import turngate_pb2 as pb

log = logging.getLogger("turngate.client")


@dataclass(frozen=True)
class Cancelled:
    """The Stop cancelled the expected turn (or, unguarded, the active one)."""

    cancelled_turn_ids: tuple[str, ...]
    stopping_turn_id: str
    """The turn now STOPPING ('' when it settled at once or had not started)."""
    settled: bool
    """The turn settled CANCELLED at once (force)."""
    before_start: bool
    """The turn was never admitted: it is refused TURN_CANCELLED when it arrives."""
    cancelled_interaction_ids: tuple[str, ...]
    stop_deadline: datetime | None
    """When the service settles the stopping turn CANCELLED if its runner has not."""


@dataclass(frozen=True)
class Mismatch:
    """The expected turn already ended and another turn is active: nothing changed."""

    expected_turn_id: str
    current_turn_id: str
    current_phase: pb.TurnPhase.ValueType
    expected_outcome: pb.TurnOutcome.ValueType


@dataclass(frozen=True)
class Idle:
    """Nothing is active: nothing changed."""

    expected_turn_id: str
    expected_outcome: pb.TurnOutcome.ValueType
    last_turn_id: str
    last_outcome: pb.TurnOutcome.ValueType


StopResult = Cancelled | Mismatch | Idle


def _result(response: pb.CancelTurnResponse) -> StopResult:
    match response.WhichOneof("outcome"):
        case "cancelled":
            c = response.cancelled
            return Cancelled(
                tuple(c.cancelled_turn_ids),
                c.stopping_turn_id,
                c.settled,
                c.before_start,
                tuple(c.cancelled_interaction_ids),
                instant(c, "stop_deadline"),
            )
        case "mismatch":
            m = response.mismatch
            return Mismatch(m.expected_turn_id, m.current_turn_id, m.current_phase, m.expected_outcome)
        case "idle":
            i = response.idle
            return Idle(i.expected_turn_id, i.expected_outcome, i.last_turn_id, i.last_outcome)
    raise ValueError(f"CancelTurnResponse without an outcome: {response}")


class Gateway:
    """What the API in front of users calls: `client.gateway()`."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    async def stop(
        self,
        session_id: str,
        *,
        expected_turn_id: str = "",
        force: bool = False,
        request_id: str | None = None,
        reason: str = "",
    ) -> StopResult:
        """Stops `expected_turn_id` (empty: whatever is active). Without `request_id` one is
        made, so that retries after a network blip are idempotent: a retry with the same id
        gets the first answer back and changes nothing."""
        request = pb.CancelTurnRequest(
            session=self._connection.session(session_id),
            expected_turn_id=expected_turn_id,
            reason=reason,
            force=force,
            request_id=request_id or uuid.uuid4().hex,
        )
        return _result(await self._connection.call(self._connection.control.CancelTurn, request))

    async def resolve_interaction(
        self, session_id: str, interaction_id: str, resolution: str
    ) -> pb.Interaction:
        """Answers a pending interaction of the session's active turn; the first answer wins
        (a later one raises `InteractionNotPending`). Retried on network blips: when an attempt
        whose reply was lost had resolved it, the retry is refused `InteractionNotPending`."""
        request = pb.ResolveInteractionRequest(
            session=self._connection.session(session_id), interaction_id=interaction_id, resolution=resolution
        )
        return (await self._connection.call(self._connection.control.ResolveInteraction, request)).interaction

    async def stop_and_wait(
        self,
        session_id: str,
        expected_turn_id: str,
        *,
        force_after: float,
        reason: str = "",
        request_id: str | None = None,
    ) -> pb.TurnRecord | None:
        """Stops the turn and returns its settled record, also when its runner never reacts.

        Watches the turn first (so its settlement cannot be missed), sends the Stop (retried
        with the same `request_id` on network errors), waits up to `force_after` seconds for the
        turn's `turn_settled` event, then escalates to `force=True`, which settles it at once.
        Returns None when the turn had never been admitted (it is now refused when it arrives).
        """
        if not expected_turn_id:
            raise ValueError("stop_and_wait needs the turn to stop")
        async with Watch(self._connection, session_id, turn_id=expected_turn_id) as events:
            await anext(events)  # the snapshot: the watch is live before the Stop
            answer = await self.stop(
                session_id, expected_turn_id=expected_turn_id, reason=reason, request_id=request_id
            )
            if isinstance(answer, Cancelled):
                if answer.before_start:
                    return None
                try:
                    async with asyncio.timeout(force_after):
                        settled = await _settlement(events, expected_turn_id)
                except TimeoutError:
                    log.warning(
                        "turn %s did not settle within %.1fs of its Stop: forcing",
                        expected_turn_id,
                        force_after,
                    )
                    await self.stop(session_id, expected_turn_id=expected_turn_id, reason=reason, force=True)
                else:
                    if settled is not None:
                        return settled
        # Settled: before this Stop (Mismatch, Idle), by the forced Stop, or seen by a resync.
        return await reads.get_turn(self._connection, session_id, expected_turn_id)


async def _settlement(events: Watch, turn_id: str) -> pb.TurnRecord | None:
    """The turn's settled record, from its watch; None when a resync snapshot shows it is no
    longer active (its settlement was among the events skipped)."""
    while True:
        event = await anext(events)
        if event.HasField("turn_settled"):
            return event.turn_settled.turn
        if event.HasField("snapshot") and event.snapshot.active.turn_id != turn_id:
            return None
