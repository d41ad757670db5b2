"""The test process's OpenTelemetry providers: an in-memory span exporter and metric reader,
installed once (a process can set its global providers only once), and servers started after
them, which therefore trace and count."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import grpc
import pytest
from opentelemetry import metrics, trace
from opentelemetry.instrumentation.grpc import aio_client_interceptors
from opentelemetry.metrics import _internal as metrics_internal
from opentelemetry.metrics._internal import _ProxyMeterProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import ProxyTracerProvider
from opentelemetry.util._once import Once

from tests.support.servers import Client, client_for, running, settings_for
from tests.telemetry.recorded import Recorded
from turngate.service.server import TurngateServer
from turngate.service.telemetry import metrics as service_metrics
from turngate.service.telemetry import traces as service_traces
from turngate.v1 import turngate_pb2 as pb


@pytest.fixture(scope="package")
def installed() -> Iterator[Recorded]:
    """The providers, installed for the tests of this directory, and uninstalled after them: the
    tests of other directories that run in this process after them (in any order, under xdist)
    see no provider, so their clients and servers trace nothing."""
    recorded = Recorded(InMemorySpanExporter(), InMemoryMetricReader())
    tracer_provider = TracerProvider()
    # Exported as each span ends, so a test sees a span as soon as it has ended.
    tracer_provider.add_span_processor(SimpleSpanProcessor(recorded.spans))
    meter_provider = MeterProvider(metric_readers=[recorded.reader])
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    yield recorded
    tracer_provider.shutdown()
    meter_provider.shutdown()
    _uninstall()


def _uninstall() -> None:
    """Leaves the process as it was before any provider was set, as OpenTelemetry's own test
    utilities (opentelemetry-test-utils' reset_*_globals) do; forgets the instruments the
    service made on the meter provider, which the next one installed replaces; and turns the
    service's tracing off, whose tracer would otherwise end spans on the shut-down provider."""
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    trace._PROXY_TRACER_PROVIDER = ProxyTracerProvider()
    metrics_internal._METER_PROVIDER_SET_ONCE = Once()
    metrics_internal._METER_PROVIDER = None
    metrics_internal._PROXY_METER_PROVIDER = _ProxyMeterProvider()
    service_metrics._metrics = None
    service_traces.enable()


@pytest.fixture
def recorded(installed: Recorded) -> Recorded:
    """The process's telemetry, with no span from an earlier test."""
    installed.spans.clear()
    return installed


@pytest.fixture(scope="module")
async def traced(
    installed: Recorded, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[TurngateServer, Client]]:
    """A server started after the providers were installed, and a client whose calls carry the
    current span's context (the gRPC client interceptor)."""
    async for server, _ in running(settings_for(str(tmp_path_factory.mktemp("traced")))):
        target = f"127.0.0.1:{server.port}"
        interceptors = aio_client_interceptors()  # type: ignore[no-untyped-call]
        async with grpc.aio.insecure_channel(target, interceptors=interceptors) as channel:
            yield server, client_for(channel)


@pytest.fixture
def session() -> pb.SessionRef:
    return pb.SessionRef(project_id="p-telemetry", session_id=f"s-{uuid.uuid4().hex[:16]}")
