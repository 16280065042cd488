"""Setting up the OpenTelemetry SDK from the standard ``OTEL_*`` variables, for agentkit's
own processes (the CLI's ``send``, ``chat``, ``serve``, ``acp``, ``eval`` and its eval workers).

A library never configures telemetry for its users: :mod:`agentkit.telemetry` only uses the
global providers. A *program* does, and ``agentkit`` is one: when the ``otel`` extra is
installed and the environment asks for OTLP (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``), :func:`exporting` installs an SDK tracer provider
(a ``BatchSpanProcessor`` into an OTLP/HTTP protobuf exporter, which reads its endpoint,
headers, timeout and compression from the same variables) and, unless
``OTEL_METRICS_EXPORTER=none``, a meter provider exporting the GenAI histograms the same way;
it flushes and shuts both down when the command ends. A viewer that takes traces only
(Phoenix, Jaeger) answers the metrics with 404 or 405: the first such answer turns metrics
off for the rest of the command with one line on stderr, and the traces go on. The service
name is ``OTEL_SERVICE_NAME`` (or ``service.name`` in ``OTEL_RESOURCE_ATTRIBUTES``), else
``agentkit``; other resource attributes come from ``OTEL_RESOURCE_ATTRIBUTES`` (Phoenix's
project: ``openinference.project.name=…``). Nothing is done when
``OTEL_SDK_DISABLED=true``, when ``OTEL_TRACES_EXPORTER`` names no ``otlp``, when a tracer
provider is already set (``opentelemetry-instrument``, the caller's own), or without the
extra — then one line on stderr says what to install.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["SdkSetup", "configure_from_env", "exporting", "flush", "wanted"]

_ENDPOINTS: Final = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
_METRIC_ENDPOINTS: Final = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
_MODULES: Final = ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http")
_DEFAULT_SERVICE: Final = "agentkit"
_FLUSH_MS: Final = 10_000
#: what a traces-only endpoint answers to metrics
_NO_METRICS: Final = frozenset({404, 405})
#: the loggers the OTLP/HTTP metric exporter reports a failed export on
_METRIC_LOGGERS: Final = (
    "opentelemetry.exporter.otlp.proto.http.metric_exporter",
    "opentelemetry.exporter.otlp.common.http",
)


class _MetricsRefused(logging.Filter):
    """Watches the metric exporter's HTTP answers (a ``requests`` response hook): the first
    404 or 405 turns metrics off, says so once on stderr, and silences the exporter's own
    error line about it."""

    def __init__(self) -> None:
        super().__init__()
        self.off = False

    def response(self, response: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: ANN401
        code = getattr(response, "status_code", None)
        if not self.off and code in _NO_METRICS:
            self.off = True
            print(  # the one line; traces go on
                f"agentkit: {getattr(response, 'url', 'the endpoint')} takes no metrics "
                f"(HTTP {code}): metrics are off, traces are still exported",
                file=sys.stderr,
            )
        return response

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.off


def _metric_exporter() -> Any:  # noqa: ANN401
    """The OTLP/HTTP metric exporter, turned off by the endpoint's first 404/405."""
    import requests
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.sdk.metrics.export import MetricExportResult, MetricsData

    refused = _MetricsRefused()
    session = requests.Session()
    session.hooks["response"].append(refused.response)
    for name in _METRIC_LOGGERS:
        logging.getLogger(name).addFilter(refused)

    class Exporter(OTLPMetricExporter):
        def export(
            self, metrics_data: MetricsData, timeout_millis: float | None = 10_000, **kwargs: object
        ) -> MetricExportResult:
            if refused.off:
                return MetricExportResult.SUCCESS  # dropped: the endpoint takes none
            return super().export(metrics_data, timeout_millis, **kwargs)

    return Exporter(session=session)


@dataclass
class SdkSetup:
    """The providers :func:`configure_from_env` installed (to flush and shut down)."""

    tracer_provider: Any
    meter_provider: Any | None

    def shutdown(self) -> None:
        """Export what is buffered, then stop (what a command does before it exits)."""
        self.tracer_provider.force_flush(_FLUSH_MS)
        self.tracer_provider.shutdown()
        if self.meter_provider is not None:
            self.meter_provider.shutdown()


def _exporters(variable: str) -> set[str]:
    value = os.environ.get(variable)
    return {"otlp"} if value is None else {part.strip() for part in value.lower().split(",")}


def wanted() -> bool:
    """True when the environment asks for OTLP traces and the SDK is not disabled."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if "otlp" not in _exporters("OTEL_TRACES_EXPORTER"):
        return False
    return any(os.environ.get(name, "").strip() for name in _ENDPOINTS)


def _installed() -> bool:
    try:
        return all(importlib.util.find_spec(module) is not None for module in _MODULES)
    except ModuleNotFoundError:  # a parent package missing
        return False


def configure_from_env(*, warn: bool = True) -> SdkSetup | None:
    """Install the SDK providers the environment asks for (see the module); None when it asks
    for none, a provider is already set, or the extra is missing (*warn*: say so on stderr)."""
    if not wanted():
        return None
    if not _installed():
        if warn:
            print(  # the CLI's one-line notice; the command goes on
                "agentkit: OTEL_EXPORTER_OTLP_* is set but the spans cannot be exported: "
                "pip install 'agentkit[otel]'",
                file=sys.stderr,
            )
        return None
    from opentelemetry import metrics, trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    current = trace.get_tracer_provider()
    if not isinstance(current, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None  # somebody else set it up
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: _DEFAULT_SERVICE}))
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(tracer_provider)

    meter_provider = None
    metrics_wanted = "otlp" in _exporters("OTEL_METRICS_EXPORTER") and any(
        os.environ.get(name, "").strip() for name in _METRIC_ENDPOINTS
    )
    if metrics_wanted:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        reader = PeriodicExportingMetricReader(_metric_exporter())
        meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
        metrics.set_meter_provider(meter_provider)
    return SdkSetup(tracer_provider, meter_provider)


@contextmanager
def exporting(*, warn: bool = True) -> Iterator[SdkSetup | None]:
    """``with exporting(): …`` — :func:`configure_from_env` for the block's length, then
    flush and shut down (spans of a command that fails are exported too)."""
    setup = configure_from_env(warn=warn)
    try:
        yield setup
    finally:
        if setup is not None:
            setup.shutdown()


def flush(timeout_ms: int = _FLUSH_MS) -> None:
    """Export what the global providers buffer, when they can (an SDK's; the API's proxies
    cannot, and then nothing is imported or done): what an eval worker does after each run,
    since a pool's worker process ends without running ``atexit``."""
    if "opentelemetry.trace" not in sys.modules:
        return
    from opentelemetry import metrics, trace

    for provider in (trace.get_tracer_provider(), metrics.get_meter_provider()):
        force_flush = getattr(provider, "force_flush", None)
        if callable(force_flush):
            force_flush(timeout_ms)
