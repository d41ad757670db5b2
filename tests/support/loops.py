"""Background loops of a server made to fail: watchdog sweeps that fail as a Redis Cluster redirect
would, and servers whose supervisor restarts loops with a backoff the test chooses."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import grpc
import pytest
from redis.exceptions import ResponseError

from tests.support.servers import Client, client_for, settings_for
from turngate.service.server import TurngateServer
from turngate.service.supervise import Backoff
from turngate.service.watchdog import Watchdog

# Restarts at once; a run after a failure is stable as soon as it has started.
AT_ONCE = Backoff(first=0.001, cap=0.002, stable_after=0.001)


class BreakableSweeps:
    """Makes every sweep of the watchdogs made from now on fail while `broken`, and their next
    `failures` sweeps (other servers of the test session keep sweeping as they do)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, failures: int = 0) -> None:
        self.broken = False
        self.failures = failures
        self.failed = 0
        ours: set[int] = set()
        init, sweep = Watchdog.__init__, Watchdog.sweep

        def tracked(watchdog: Watchdog, *args: Any, **kwargs: Any) -> None:
            init(watchdog, *args, **kwargs)
            ours.add(id(watchdog))

        async def breakable(watchdog: Watchdog) -> int:
            if id(watchdog) in ours and (self.broken or self.failures):
                self.failures = max(0, self.failures - 1)
                self.failed += 1
                raise ResponseError("MOVED 12182 10.0.0.7:6379")
            return await sweep(watchdog)

        monkeypatch.setattr(Watchdog, "__init__", tracked)
        monkeypatch.setattr(Watchdog, "sweep", breakable)


@asynccontextmanager
async def server_restarting(
    tmp: str, backoff: Backoff, **overrides: object
) -> AsyncIterator[tuple[TurngateServer, Client]]:
    """A server of the test's own (`settings_for(tmp, **overrides)`) whose supervisor restarts
    loops with `backoff`."""
    server = TurngateServer(settings_for(tmp, **overrides))
    server.supervisor.backoff = backoff
    async with server, grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        yield server, client_for(channel)
