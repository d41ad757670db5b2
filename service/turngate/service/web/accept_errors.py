"""An event loop's failures to accept a connection for want of resources (file descriptors,
memory) logged once per interval with a count, instead of asyncio's traceback at every attempt:
a process at its file limit must not also flood its log."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from turngate.service.telemetry.throttled import INTERVAL_S, Throttled

log = logging.getLogger("turngate.http")
# What asyncio's selector loop reports when accept() fails with EMFILE, ENFILE, ENOBUFS or ENOMEM
# (it then stops accepting on that socket for a second and tries again).
_OUT_OF_RESOURCES = "socket.accept() out of system resource"

Handler = Any  # the loop's exception handler: (loop, context) -> None, or None for the default


def quiet_accept_errors(loop: asyncio.AbstractEventLoop) -> None:
    """From now on `loop` reports accept failures for want of resources throttled, and passes
    anything else to the handler it had. Installing it twice changes nothing."""
    previous: Handler = loop.get_exception_handler()
    if not isinstance(previous, AcceptErrors):
        loop.set_exception_handler(AcceptErrors(previous))


class AcceptErrors:
    """An event loop exception handler: accept failures for want of resources throttled (one
    line per `interval` seconds), anything else to `previous` (None: the loop's default)."""

    def __init__(self, previous: Handler, interval: float = INTERVAL_S) -> None:
        self._previous = previous
        self._throttled = Throttled(
            log,
            logging.ERROR,
            "cannot accept connections: %s (the process is out of file descriptors or memory)",
            interval,
        )

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        error = context.get("exception")
        if context.get("message") == _OUT_OF_RESOURCES and isinstance(error, OSError):
            self._throttled.note(error.strerror)
        elif self._previous is None:
            loop.default_exception_handler(context)
        else:
            self._previous(loop, context)
