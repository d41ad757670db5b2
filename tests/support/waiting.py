"""Waiting for what nothing signals: one `eventually()` for every suite.

A test waits on the condition it needs, never for a guessed time: the timeout is reached only
when the test fails.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

# How long a condition may take to hold: reached only when a test fails.
WAIT_TIMEOUT_S = 5.0
POLL_INTERVAL_S = 0.01
# How long a cancelled task may take to end: reached only when a test fails.
TASK_END_TIMEOUT_S = 20.0

Check = Callable[[], bool | Awaitable[bool]]


async def eventually(check: Check, *, timeout_s: float = WAIT_TIMEOUT_S) -> None:
    """Polls `check` (sync, or async) until it passes; fails (TimeoutError) after `timeout_s`."""
    async with asyncio.timeout(timeout_s):
        while True:
            passed = check()
            if passed if isinstance(passed, bool) else await passed:
                return
            await asyncio.sleep(POLL_INTERVAL_S)


async def cancelled(task: asyncio.Task[None]) -> None:
    """Cancels `task` and waits for its end, cancelling again while it runs on: on Python 3.11
    `asyncio.wait_for` (inside redis-py) swallows a cancellation that lands as its operation
    completes, and the task goes on as if never cancelled."""
    async with asyncio.timeout(TASK_END_TIMEOUT_S):
        while not task.done():
            task.cancel()
            await asyncio.wait([task], timeout=POLL_INTERVAL_S)
    if not task.cancelled() and task.exception() is not None:
        raise AssertionError(f"{task!r} failed before it was cancelled") from task.exception()
