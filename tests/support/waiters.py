"""A runner's turn in a task of its own, for the SDK and CLI tests of the queue: the places it is
told while it waits, when its body is entered, and a body that runs until it is released or a
Stop reaches it."""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager

from tests.support.waiting import WAIT_TIMEOUT_S, eventually
from turngate.client import AdmissionMode, Client, QueuedTurn, Turn


class Waiter:
    """`runner_id` runs `turn_id` in `session_id` with the given admission options."""

    def __init__(
        self,
        client: Client,
        session_id: str,
        turn_id: str,
        *,
        runner_id: str = "r1",
        mode: AdmissionMode = AdmissionMode.REJECT,
        expected_active_turn_id: str = "",
        max_queue_wait: float | None = None,
    ) -> None:
        self.positions: list[int] = []
        """Each place `on_queued` was told, in order."""
        self.entered = asyncio.Event()
        self._released = asyncio.Event()
        self._turn: Turn | None = None
        entering = client.runner(runner_id).turn(
            session_id,
            turn_id,
            mode=mode,
            expected_active_turn_id=expected_active_turn_id,
            max_queue_wait=max_queue_wait,
            on_queued=self._told,
        )
        self.task = asyncio.create_task(self._run(entering))

    def _told(self, queued: QueuedTurn) -> None:
        self.positions.append(queued.position)

    async def _run(self, entering: AbstractAsyncContextManager[Turn]) -> Turn:
        async with entering as turn:
            self._turn = turn
            self.entered.set()
            stopped = asyncio.create_task(turn.stop_requested.wait())
            released = asyncio.create_task(self._released.wait())
            try:
                await asyncio.wait({stopped, released}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stopped.cancel()
                released.cancel()
        return turn

    async def placed(self, *positions: int) -> None:
        """Waits until `on_queued` was told exactly these places."""
        await eventually(lambda: self.positions == list(positions))

    async def admitted(self) -> Turn:
        """The turn, once its body runs."""
        async with asyncio.timeout(WAIT_TIMEOUT_S):
            await self.entered.wait()
        assert self._turn is not None
        return self._turn

    async def ended(self) -> Turn:
        """Lets the body end (COMPLETED, or CANCELLED after a Stop); the turn once settled."""
        self._released.set()
        async with asyncio.timeout(WAIT_TIMEOUT_S):
            return await self.task
