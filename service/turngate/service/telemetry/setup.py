"""What telemetry a process exports, from the standard `OTEL_*` variables and `metrics_listen`.

* `OTEL_SDK_DISABLED=true`: nothing at all.
* Traces go by OTLP over gRPC when `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
  `OTEL_EXPORTER_OTLP_ENDPOINT` is set, unless `OTEL_TRACES_EXPORTER=none`; metrics likewise
  (`…_METRICS_ENDPOINT`, `OTEL_METRICS_EXPORTER`), every `OTEL_METRIC_EXPORT_INTERVAL`.
* With `metrics_listen`, metrics are also kept for Prometheus, with the process's CPU, memory,
  open files and start time (prometheus_client's ProcessCollector): the server serves them at
  http://HOST:PORT/metrics, with `/healthz` and `/readyz` (`listener`).

Without any of these no provider is installed: the OpenTelemetry API stays a no-op and turngate
starts no span at all. The exporters, the batch span processor and the sampler read their own
variables (headers, certificates, timeout, compression, `OTEL_BSP_*`, `OTEL_TRACES_SAMPLER`…); the
resource comes from `OTEL_RESOURCE_ATTRIBUTES` and `OTEL_SERVICE_NAME` (`turngate` by default),
with `service.version` turngate's version.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from opentelemetry import metrics, trace
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.environment_variables import OTEL_SDK_DISABLED
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.semconv.attributes.service_attributes import SERVICE_VERSION
from prometheus_client import CollectorRegistry, ProcessCollector

from turngate.client._version import __version__
from turngate.service.config import Settings

log = logging.getLogger("turngate.telemetry")
DEFAULT_SERVICE_NAME = "turngate"
_SUPPORTED_EXPORTERS = {"otlp", "none"}


@dataclass
class Exporting:
    """The providers to install (None: that signal is not exported) and, with `metrics_listen`,
    the registry its Prometheus reader fills."""

    tracer_provider: TracerProvider | None = None
    meter_provider: MeterProvider | None = None
    prometheus: CollectorRegistry | None = None

    def shutdown(self) -> None:
        """Exports what is left."""
        if self.tracer_provider is not None:
            self.tracer_provider.shutdown()
        if self.meter_provider is not None:
            self.meter_provider.shutdown()


def exporting(settings: Settings) -> Exporting:
    """The providers this process's environment and settings ask for (nothing is installed)."""
    if os.environ.get(OTEL_SDK_DISABLED, "").strip().lower() == "true":
        if settings.metrics_listen:
            log.warning("%s is true: not serving metrics on %s", OTEL_SDK_DISABLED, settings.metrics_listen)
        return Exporting()
    resource = _resource()
    chosen = Exporting()
    if _otlp("TRACES"):
        chosen.tracer_provider = TracerProvider(resource=resource)
        chosen.tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    readers: list[MetricReader] = []
    if _otlp("METRICS"):
        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
    if settings.metrics_listen:
        chosen.prometheus = CollectorRegistry()
        ProcessCollector(registry=chosen.prometheus)
        # One meter makes every metric: scope labels would say nothing, and the empty
        # otel_scope_schema_url the exporter adds would only clutter each series.
        readers.append(PrometheusMetricReader(registry=chosen.prometheus, scope_info_enabled=False))
    if readers:
        chosen.meter_provider = MeterProvider(metric_readers=readers, resource=resource)
    return chosen


@contextmanager
def configured(settings: Settings) -> Iterator[CollectorRegistry | None]:
    """Installs what `exporting` chooses as the process's providers for the block, which gets the
    registry to serve as Prometheus text (None without `metrics_listen`); exports what is left
    at its end."""
    chosen = exporting(settings)
    try:
        if chosen.tracer_provider is not None:
            trace.set_tracer_provider(chosen.tracer_provider)
        if chosen.meter_provider is not None:
            metrics.set_meter_provider(chosen.meter_provider)
        yield chosen.prometheus
    finally:
        chosen.shutdown()


def _otlp(signal: str) -> bool:
    """Whether `signal` (TRACES or METRICS) goes by OTLP: an endpoint is set and it is not off."""
    env = os.environ
    variable = f"OTEL_{signal}_EXPORTER"
    names = {name.strip() for name in env.get(variable, "otlp").split(",")}
    for unsupported in names - _SUPPORTED_EXPORTERS:
        log.warning("%s=%s is not supported (otlp or none); ignored", variable, unsupported)
    endpoint = env.get(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if "otlp" not in names or not endpoint:
        return False
    protocol = env.get(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    if protocol not in (None, "grpc"):
        log.warning("OTLP %s go over gRPC: the protocol %r is not supported", signal.lower(), protocol)
    return True


def _resource() -> Resource:
    """From OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME, named `turngate` if they name nothing,
    with turngate's version."""
    resource = Resource.create({SERVICE_VERSION: __version__})
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    return resource
