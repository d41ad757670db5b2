"""The Redis store's clock: an estimate of Redis `TIME` (I10), never behind it, and how far a
decision's `now` may stray from `TIME` when its script runs."""

from __future__ import annotations

import time
from typing import Any

_US = 1_000_000
# How far behind and ahead of Redis TIME a decision's `now` may be at its commit (µs): behind
# covers the trip from the decision to the script under load (measured: docs/performance.md, Redis clock);
# ahead only estimation error.
BEHIND_LIMIT_US = 5_000
AHEAD_LIMIT_US = 5_000


def monotonic_us() -> int:
    return time.monotonic_ns() // 1000


class StoreClock:
    """Redis TIME, estimated so that it is never behind it, however late a busy event loop reads
    a reply. A reply's TIME was read after its request was sent and before it was received, so
    TIME - sent bounds TIME's offset from the monotonic clock from above, TIME - received from
    below. The estimate keeps the tightest bound from above; a bound from below beyond it shows
    that TIME moved on (a step, or drift), and the new bound from above replaces it. It does not
    run backwards between decisions, except to correct an estimate ahead by more than half of
    what the store accepts."""

    def __init__(self) -> None:
        self._offset: int | None = None
        self._last = 0

    @property
    def calibrated(self) -> bool:
        return self._offset is not None

    def now(self) -> int:
        assert self._offset is not None, "observe the store's TIME first"
        estimate = monotonic_us() + self._offset
        if estimate < self._last <= estimate + AHEAD_LIMIT_US // 2:
            return self._last
        self._last = estimate
        return estimate

    def observe(self, store_now: int, sent: int, received: int) -> None:
        above, below = store_now - sent, store_now - received
        if self._offset is None or below > self._offset:
            self._offset = above
        else:
            self._offset = min(self._offset, above)


def time_of(reply: Any) -> int:
    """A TIME reply (seconds, microseconds) in µs."""
    seconds, micros = reply
    return int(seconds) * _US + int(micros)
