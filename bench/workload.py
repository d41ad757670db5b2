"""The sessions a capacity run makes, through a store in this process (no gRPC): what a runner's
turns send, command by command, and many sessions at once by concurrent callers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass

from turngate.service.core import (
    Admit,
    Admitted,
    Complete,
    RecordToolCall,
    SessionKey,
    ToolCallStatus,
    TurnOutcome,
)
from turngate.service.core.limits import SECOND
from turngate.service.ports.store import Store

PROJECT = "capacity"
RUNNER = "capacity-runner"
TOOL = "search"
# Long leases: the watchdog settles nothing the run did not mean it to.
LEASE_US = 3_600 * SECOND
# Enough callers that the store's round trips overlap; more only queue for its connections.
CALLERS = 64


@dataclass(frozen=True, slots=True)
class Shape:
    """What each session does before it goes idle."""

    turns: int = 3
    tool_calls_per_turn: int = 2


def session_key(prefix: str, index: int) -> SessionKey:
    """Ids of one width, so that every session's keys take the same bytes."""
    return SessionKey(PROJECT, f"{prefix}-{index:08d}")


def session_keys(prefix: str, indices: range) -> list[SessionKey]:
    return [session_key(prefix, index) for index in indices]


async def admit(store: Store, key: SessionKey, turn_id: str) -> int:
    """Admits `turn_id`; its generation (the lease's fencing token)."""
    decision = await store.apply(key, Admit(turn_id, RUNNER, LEASE_US))
    if not isinstance(decision.reply, Admitted):
        raise RuntimeError(f"{key} {turn_id}: not admitted: {decision.reply}")
    return decision.reply.generation


async def complete(store: Store, key: SessionKey, turn_id: str, generation: int) -> None:
    await store.apply(key, Complete(turn_id, generation, TurnOutcome.COMPLETED))


async def turn_steps(store: Store, key: SessionKey, turn_id: str, tool_calls: int) -> AsyncIterator[None]:
    """A turn admitted, its tool calls opened and closed one after the other, then completed: a
    step after each command (each writes one event)."""
    generation = await admit(store, key, turn_id)
    yield
    for call in range(tool_calls):
        call_id = f"{turn_id}-call-{call}"
        for status in (ToolCallStatus.OPEN, ToolCallStatus.SUCCEEDED):
            await store.apply(key, RecordToolCall(turn_id, generation, call_id, TOOL, status))
            yield
    await complete(store, key, turn_id, generation)
    yield


async def run_turn(store: Store, key: SessionKey, turn_id: str, tool_calls: int) -> None:
    async for _ in turn_steps(store, key, turn_id, tool_calls):
        pass


async def run_session(store: Store, key: SessionKey, shape: Shape) -> None:
    """`shape.turns` turns, one after the other: the session is idle after."""
    for turn in range(shape.turns):
        await run_turn(store, key, f"turn-{turn}", shape.tool_calls_per_turn)


async def hold_turn(store: Store, key: SessionKey) -> None:
    """One turn admitted and left running (an active session)."""
    await admit(store, key, "turn-0")


async def admit_and_complete(store: Store, key: SessionKey) -> None:
    """AdmitTurn then CompleteTurn: two compare-and-set writes."""
    await complete(store, key, "turn-0", await admit(store, key, "turn-0"))


async def for_each(
    keys: Sequence[SessionKey], work: Callable[[SessionKey], Awaitable[None]], callers: int = CALLERS
) -> None:
    """`work(key)` for every key, by `callers` concurrent callers."""

    async def caller(first: int) -> None:
        for index in range(first, len(keys), callers):
            await work(keys[index])

    await asyncio.gather(*(caller(first) for first in range(min(callers, len(keys)))))
