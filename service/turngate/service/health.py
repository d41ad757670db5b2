"""gRPC health checking (grpc.health.v1) for one replica, and what it reports.

Service names: "" and each turngate service are SERVING while the store answers and the replica
is not draining (readiness: send it calls); `liveness` is SERVING from start to exit, draining
included (restarting the process would not help). A drain turns the first group NOT_SERVING at
once, telling every watcher; `close()` then ends every Watch stream with UNAVAILABLE, after its
last status, so health-checking clients move to another replica instead of holding this one's
shutdown open.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeAlias

import grpc
from grpc_health.v1 import health_pb2

from turngate.service.ports.store import StoreUnavailable

log = logging.getLogger("turngate.server")

LIVENESS = "liveness"
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVICE_UNKNOWN = health_pb2.HealthCheckResponse.SERVICE_UNKNOWN
Status: TypeAlias = health_pb2.HealthCheckResponse.ServingStatus.ValueType
Context = grpc.aio.ServicerContext[Any, Any]


class Health:
    """The servicer of grpc.health.v1.Health (`health_pb2_grpc.add_HealthServicer_to_server`): the
    statuses of "", `services` and `LIVENESS`; NOT_SERVING but `LIVENESS` until `serving(True)`."""

    def __init__(self, services: Iterable[str]) -> None:
        self._ready_names = ("", *services)
        self._status: dict[str, Status] = {name: NOT_SERVING for name in self._ready_names}
        self._status[LIVENESS] = SERVING
        self._changed = asyncio.Condition()
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
            async with self._changed:
                while not self._closed and self._of(request.service) == sent:
                    await self._changed.wait()
                status, closed = self._of(request.service), self._closed
            # Written outside the lock: a slow watcher must not hold up the others.
            if status != sent:
                await context.write(health_pb2.HealthCheckResponse(status=status))
                sent = status
            if closed:
                await context.abort(grpc.StatusCode.UNAVAILABLE, "this replica is shutting down: use another")

    async def serving(self, ready: bool) -> None:
        """Readiness follows the store, until a drain starts (then it stays NOT_SERVING)."""
        if not self._draining:
            await self._set(self._ready_names, SERVING if ready else NOT_SERVING)

    async def drain(self) -> None:
        """NOT_SERVING for every name but `LIVENESS`, for good; watchers are told at once."""
        self._draining = True
        await self._set(self._ready_names, NOT_SERVING)

    async def close(self) -> None:
        """Ends every Watch stream, and any later one, with UNAVAILABLE after its last status."""
        async with self._changed:
            self._draining = self._closed = True
            self._changed.notify_all()

    def _of(self, service: str) -> Status:
        return self._status.get(service, SERVICE_UNKNOWN)

    async def _set(self, names: Iterable[str], status: Status) -> None:
        async with self._changed:
            for name in names:
                self._status[name] = status
            self._changed.notify_all()


async def follow_store(health: Health, ping: Callable[[], Awaitable[None]], interval: float) -> None:
    """Keeps readiness SERVING while `ping` answers within two intervals, NOT_SERVING otherwise."""
    ready: bool | None = None
    while True:
        try:
            await asyncio.wait_for(ping(), timeout=interval * 2)
        except (StoreUnavailable, TimeoutError):
            now_ready = False
        else:
            now_ready = True
        if now_ready != ready:
            ready = now_ready
            await health.serving(ready)
            log.log(logging.INFO if ready else logging.WARNING, "store %s", "answers" if ready else "down")
        await asyncio.sleep(interval)
