"""The steers a running turn receives, in the order they came, until it is asked to stop."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable

from turngate.client.models import Steer


class Steers:
    """`async for steer in turn.steers:` yields each steer once, as it arrives; the iteration
    ends once the turn is asked to stop (a stopping turn takes no more input) and the steers
    received before are taken. `received()` takes those that arrived without waiting: what a
    runner folds into its next step."""

    def __init__(self) -> None:
        self._arrived: deque[Steer] = deque()
        self._seen: set[str] = set()
        self._ended = False
        self._wake = asyncio.Event()

    def __aiter__(self) -> Steers:
        return self

    async def __anext__(self) -> Steer:
        while not self._arrived:
            if self._ended:
                raise StopAsyncIteration
            self._wake.clear()
            await self._wake.wait()
        return self._arrived.popleft()

    def received(self) -> list[Steer]:
        """The steers that arrived and were not taken yet, oldest first."""
        taken = list(self._arrived)
        self._arrived.clear()
        return taken

    # --- what the turn tells it ----------------------------------------------------------------

    def _push(self, steer: Steer) -> None:
        """A steer arrived (once: a resync may read again one the watch pushed)."""
        if steer.steer_id not in self._seen:
            self._seen.add(steer.steer_id)
            self._arrived.append(steer)
            self._wake.set()

    def _unseen(self, steer_ids: Iterable[str]) -> bool:
        """Whether any of these pending steers has not arrived."""
        return any(steer_id not in self._seen for steer_id in steer_ids)

    def _end(self) -> None:
        self._ended = True
        self._wake.set()
