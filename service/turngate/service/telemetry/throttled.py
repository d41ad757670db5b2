"""A log line for something that may happen thousands of times a second (a refused connection, a
failed accept): the first occurrence is logged at once, the next ones are counted and reported
in one line per interval, so a flood costs a line every few seconds, never a line (or a
traceback) each."""

from __future__ import annotations

import asyncio
import logging

INTERVAL_S = 10.0


class Throttled:
    """Logs `message` (with `note`'s arguments) at `level` at most once per `interval` seconds,
    adding how many more occurrences there were since the last line. Called from the event loop."""

    def __init__(
        self, logger: logging.Logger, level: int, message: str, interval: float = INTERVAL_S
    ) -> None:
        self._logger = logger
        self._level = level
        self._message = message
        self._interval = interval
        self._unreported = 0
        self._last: tuple[object, ...] = ()
        self._timer: asyncio.TimerHandle | None = None

    def note(self, *args: object) -> None:
        if self._timer is None:
            self._logger.log(self._level, self._message, *args)
            self._timer = asyncio.get_running_loop().call_later(self._interval, self._report)
            return
        self._unreported += 1
        self._last = args

    def _report(self) -> None:
        if not self._unreported:
            self._timer = None
            return
        count, self._unreported = self._unreported, 0
        more = f" ({count} more in the last {self._interval:g}s)"
        self._logger.log(self._level, self._message + more, *self._last)
        self._timer = asyncio.get_running_loop().call_later(self._interval, self._report)
