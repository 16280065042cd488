"""One OpenTelemetry SDK for the whole test process, with in-memory exporters.

OpenTelemetry's global tracer and meter providers can be set only once per process, so no
test sets its own: :func:`capture` installs one SDK provider (an ``InMemorySpanExporter``
behind a ``SimpleSpanProcessor``, an ``InMemoryMetricReader``) the first time it is called
in a worker, and clears the exported spans each time. Test files wrap it in a fixture::

    @pytest.fixture
    def otel() -> OtelCapture:
        return capture()
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@dataclass
class OtelCapture:
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader

    def spans(self) -> list[ReadableSpan]:
        """The spans exported since the test began, in end order."""
        return list(self.exporter.get_finished_spans())

    def by_name(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.spans() if span.name == name]

    def points(self, metric: str, **attributes: Any) -> list[Any]:
        """The data points of *metric* whose attributes include *attributes* (the reader is
        cumulative and shared: select by an attribute unique to the test, e.g. its model)."""
        data = self.reader.get_metrics_data()
        found = []
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for item in scope.metrics:
                    if item.name != metric:
                        continue
                    for point in item.data.data_points:
                        if all(point.attributes.get(k) == v for k, v in attributes.items()):
                            found.append(point)
        return found


_CAPTURE: OtelCapture | None = None


def capture() -> OtelCapture:
    """The process's SDK capture (installed on first use), with no spans exported yet."""
    global _CAPTURE  # noqa: PLW0603
    if _CAPTURE is None:
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        reader = InMemoryMetricReader()
        trace.set_tracer_provider(provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        if trace.get_tracer_provider() is not provider:
            pytest.fail("another tracer provider was set in this process before tests/_otel.py")
        _CAPTURE = OtelCapture(exporter, reader)
    _CAPTURE.exporter.clear()
    return _CAPTURE


def hex_id(value: int, width: int) -> str:
    return f"{value:0{width}x}"
