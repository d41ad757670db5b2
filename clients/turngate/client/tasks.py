"""Ending background tasks for sure: what the SDK's turns and the service's loops share."""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import Any

_CANCEL_AGAIN_S = 0.5


async def cancel_all(tasks: Collection[asyncio.Task[Any]]) -> list[BaseException]:
    """Cancels `tasks`, waits until every one has ended, and returns what they failed with.

    Cancelled again while any is left: on Python 3.11 a cancellation landing inside
    `asyncio.wait_for` (which grpc and redis-py use) as its operation completes can be
    swallowed, and the task would go on.
    """
    pending = {task for task in tasks if not task.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=_CANCEL_AGAIN_S)
    return [error for task in tasks if not task.cancelled() and (error := task.exception()) is not None]
