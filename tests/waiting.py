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

Check = Callable[[], bool | Awaitable[bool]]


async def eventually(check: Check, *, timeout_s: float = WAIT_TIMEOUT_S) -> None:
    """Polls `check` (sync, or async) until it passes; fails (TimeoutError) after `timeout_s`."""
    async with asyncio.timeout(timeout_s):
        while True:
            passed = check()
            if passed if isinstance(passed, bool) else await passed:
                return
            await asyncio.sleep(POLL_INTERVAL_S)
