"""Attaches a server, or a projector process, to what the process's telemetry installed."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import grpc

from turngate.client._version import __version__
from turngate.service.ports.store import Store
from turngate.service.telemetry import logs, probes, traces
from turngate.service.telemetry.attributes import prefixed
from turngate.service.telemetry.metrics import Sampler, Sources, process_metrics
from turngate.service.telemetry.rpc import Measured

Loop = Callable[[], Coroutine[Any, Any, None]]


@dataclass(frozen=True, slots=True)
class Instrumented:
    """What the server adds: interceptors to its gRPC server, loops (by name) to its background tasks."""

    interceptors: list[grpc.aio.ServerInterceptor]
    loops: dict[str, Loop]


def server(
    store: Store, sources: Sources, *, store_kind: str, live: probes.Probe, ready: probes.Probe
) -> Instrumented:
    """Logs the store's commits; traces if a tracer provider is installed; counts its decisions,
    measures its RPCs, reports its build and samples `sources` for the gauges if a meter provider
    is. The metrics listener's `/healthz` and `/readyz` answer `live()` and `ready()`."""
    store.add_listener(logs.log_events)
    probes.follow(live=live, ready=ready)
    traces.enable()
    interceptors = traces.server_interceptors()
    process = process_metrics()
    if process is not None:
        store.add_observer(process.observe)
        process.build = prefixed({"version": __version__, "store": store_kind})
        interceptors.append(Measured(process.rpc_duration))
    return Instrumented(interceptors, sampling(sources))


def sampling(sources: Sources) -> dict[str, Loop]:
    """The loop that keeps a sampler of `sources` current, reported by the process's gauges from
    now on; none if no meter provider is installed."""
    process = process_metrics()
    if process is None:
        return {}
    process.sampler = sampler = Sampler(sources)
    return {"sampler": sampler.run}
