"""Retrying network blips: exponential backoff with jitter, within a deadline."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import grpc

from turngate.client import errors

log = logging.getLogger("turngate.client")
T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    """Delays between attempts: the n-th is drawn uniformly from [cap/2, cap] with
    cap = min(maximum, initial * multiplier**n) (exponential, with jitter so that many clients
    cut off together do not come back together)."""

    initial: float = 0.05
    maximum: float = 2.0
    multiplier: float = 2.0

    def delays(self) -> Iterator[float]:
        cap = self.initial
        while True:
            yield random.uniform(cap / 2, cap)
            cap = min(self.maximum, cap * self.multiplier)


DEFAULT_BACKOFF = Backoff()


async def retrying(
    attempt: Callable[[], Awaitable[T]],
    *,
    until: float,
    backoff: Backoff,
    what: str,
    writes: bool = False,
    request_id: str = "",
) -> T:
    """`attempt()` until it succeeds or fails for good, retrying transient failures
    (`errors.transient`) while the next attempt would start before `until` (event-loop time).
    At least one attempt is made. Failures are raised as `TurngateError`s: when a write's retries
    run out after an attempt that may have taken effect, a `WriteOutcomeUnknown` naming the
    `request_id` to send again, whatever the later attempts said."""
    loop = asyncio.get_running_loop()
    delays = backoff.delays()
    uncertain = False
    while True:
        try:
            return await attempt()
        except grpc.aio.AioRpcError as error:
            delay = next(delays)
            uncertain = uncertain or (writes and errors.may_have_taken_effect(error))
            if not errors.transient(error) or loop.time() + delay >= until:
                if uncertain and errors.transient(error):
                    raise errors.outcome_unknown(error, request_id) from error
                raise errors.from_rpc(error) from error
            log.info("%s failed (%s); retrying in %.2fs", what, error.code().name, delay)
        await asyncio.sleep(delay)
