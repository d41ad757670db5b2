"""Attaches a server, or a projector process, to what the process's telemetry installed."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import grpc

from turngate.service.ledger.projector import LedgerProjector
from turngate.service.store.cas import CompareAndSetStore
from turngate.service.telemetry import logs, traces
from turngate.service.telemetry.metrics import Sampler, process_metrics
from turngate.service.watch import WatchHub

Loop = Callable[[], Coroutine[Any, Any, None]]


@dataclass(frozen=True, slots=True)
class Instrumented:
    """What the server adds: interceptors to its gRPC server, loops to its background tasks."""

    interceptors: list[grpc.aio.ServerInterceptor]
    loops: list[Loop]


def server(store: CompareAndSetStore, hub: WatchHub, projector: LedgerProjector | None) -> Instrumented:
    """Logs the store's commits; traces if a tracer provider is installed; counts its decisions
    and samples its gauges if a meter provider is."""
    store.add_listener(logs.log_events)
    traces.enable()
    process = process_metrics()
    if process is not None:
        store.add_observer(process.observe)
    return Instrumented(
        traces.server_interceptors(), sampling(Sampler(store=store, hub=hub, projector=projector))
    )


def sampling(sampler: Sampler) -> list[Loop]:
    """The loop that keeps `sampler` current, reported by the process's gauges from now on; none
    if no meter provider is installed."""
    process = process_metrics()
    if process is None:
        return []
    process.sampler = sampler
    return [sampler.run]
