"""A step run on many sessions at once: they are independent, so a store can pipeline (or
group-commit) their writes instead of taking a round trip each."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable

from turngate.service.core import SessionKey


async def count_at_once(keys: Iterable[SessionKey], step: Callable[[SessionKey], Awaitable[bool]]) -> int:
    """How many of `keys` `step` answered True for; once all ended, the first failure is raised."""
    results = await asyncio.gather(*map(step, keys), return_exceptions=True)
    for failure in results:
        if isinstance(failure, BaseException):
            raise failure
    return results.count(True)
