"""gRPC health checking (grpc.health.v1) for one replica, and what it reports.

Service names: "" and each turngate service are SERVING while nothing readiness waits for is
wrong (the store answers and takes writes, the ledger has this release's schema, no background
loop has been failing too long: each is a condition reported by what follows it) and the replica
is not draining (readiness: send it calls); `liveness` is SERVING from start to exit, draining
included (restarting the process would not help). A drain turns the first group NOT_SERVING at
once, telling every watcher; `close()` then ends every Watch stream with UNAVAILABLE, after its
last status, so health-checking clients move to another replica instead of holding this one's
shutdown open.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeAlias

import grpc
from grpc_health.v1 import health_pb2

from turngate.service.ports.store import StoreUnavailable

log = logging.getLogger("turngate.server")

LIVENESS = "liveness"
# The readiness condition `follow_store` reports.
STORE = "store"
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVICE_UNKNOWN = health_pb2.HealthCheckResponse.SERVICE_UNKNOWN
Status: TypeAlias = health_pb2.HealthCheckResponse.ServingStatus.ValueType
Context = grpc.aio.ServicerContext[Any, Any]


class _Changes:
    """Wakes every waiter at each `notify`: each change has an event of its own, so a waiter that
    checked the status and then waits cannot miss the change after its check."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self) -> None:
        await self._event.wait()


class Health:
    """The servicer of grpc.health.v1.Health (`health_pb2_grpc.add_HealthServicer_to_server`): the
    statuses of "", `services` and `LIVENESS`. Readiness starts NOT_SERVING, waiting for the
    conditions `waiting_for` names (condition → what is wrong), and follows `report`."""

    def __init__(self, services: Iterable[str], waiting_for: Mapping[str, str]) -> None:
        self._ready_names = ("", *services)
        self._problems = dict(waiting_for)
        ready = NOT_SERVING if self._problems else SERVING
        self._status: dict[str, Status] = {name: ready for name in self._ready_names}
        self._status[LIVENESS] = SERVING
        self._changes = _Changes()
        self._draining = False
        self._closed = False

    async def Check(
        self, request: health_pb2.HealthCheckRequest, context: Context
    ) -> health_pb2.HealthCheckResponse:
        status = self._status.get(request.service)
        if status is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"no health status for {request.service!r}")
        return health_pb2.HealthCheckResponse(status=status)

    async def List(
        self, request: health_pb2.HealthListRequest, context: Context
    ) -> health_pb2.HealthListResponse:
        reply = health_pb2.HealthListResponse()
        for name, status in self._status.items():
            reply.statuses[name].status = status
        return reply

    async def Watch(self, request: health_pb2.HealthCheckRequest, context: Context) -> None:
        sent: Status | None = None
        while True:
            while not self._closed and self._of(request.service) == sent:
                await self._changes.wait()
            status, closed = self._of(request.service), self._closed
            if status != sent:
                await context.write(health_pb2.HealthCheckResponse(status=status))
                sent = status
            if closed:
                await context.abort(grpc.StatusCode.UNAVAILABLE, "this replica is shutting down: use another")

    def serving(self, service: str) -> bool:
        """Whether `service` ("": readiness, `LIVENESS`) is SERVING."""
        return bool(self._of(service) == SERVING)

    def report(self, condition: str, problem: str | None) -> None:
        """What is wrong with `condition` (None: nothing; whoever reports it logs it). Readiness is
        SERVING while nothing is wrong with any condition, until a drain starts (then it stays
        NOT_SERVING)."""
        if self._problems.get(condition) == problem:
            return
        if problem is None:
            del self._problems[condition]
        else:
            self._problems[condition] = problem
        ready = NOT_SERVING if self._problems else SERVING
        if not self._draining and self._status[""] != ready:
            self._set(self._ready_names, ready)

    def drain(self) -> None:
        """NOT_SERVING for every name but `LIVENESS`, for good; watchers are told at once."""
        self._draining = True
        self._set(self._ready_names, NOT_SERVING)

    def close(self) -> None:
        """Ends every Watch stream, and any later one, with UNAVAILABLE after its last status."""
        self._draining = self._closed = True
        self._changes.notify()

    def _of(self, service: str) -> Status:
        return self._status.get(service, SERVICE_UNKNOWN)

    def _set(self, names: Iterable[str], status: Status) -> None:
        for name in names:
            self._status[name] = status
        self._changes.notify()


async def follow_store(health: Health, probe: Callable[[], Awaitable[None]], interval: float) -> None:
    """Reports the store ready while `probe` succeeds within two intervals; any failure of it (the
    store unreachable, refusing writes, or failing in a way no one expected) makes it not ready."""
    ready: bool | None = None
    while True:
        try:
            await asyncio.wait_for(probe(), timeout=interval * 2)
        except TimeoutError:
            problem: str | None = f"store down: no answer within {interval * 2:g}s"
        except StoreUnavailable as error:
            problem = f"store down: {error}"
        except Exception as error:
            # Unexpected (a Redis Cluster redirect, say): the store is not ready all the same.
            problem = f"store down: {error!r}"
        else:
            problem = None
        # Reported when readiness changes, not at every new error text of a store that stays down.
        if (problem is None) != ready:
            ready = problem is None
            health.report(STORE, problem)
            log.log(logging.INFO if ready else logging.WARNING, "%s", problem or "store answers")
        await asyncio.sleep(interval)
