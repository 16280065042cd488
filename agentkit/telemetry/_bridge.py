"""The one place agentkit touches opentelemetry-api: imported lazily, used only when set up.

agentkit never configures a provider in the library: it asks the *global* tracer and meter
providers (``opentelemetry.trace.get_tracer("agentkit")``), so whatever the user configured —
Phoenix, Langfuse, logfire, an OTLP exporter, the CLI's own setup — receives agentkit's spans.
When opentelemetry is not installed, or nobody imported it (a configured provider means
``opentelemetry.trace`` was imported), or the global provider is still the API's proxy (no
SDK set), a trace makes no OpenTelemetry call at all and costs only agentkit's own records.
The decision is taken once per trace, so a provider set up later applies from the next turn.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.metrics import Histogram, Meter
    from opentelemetry.trace import Span as OtelSpan

__all__ = ["Bridge", "bridge"]

_SCOPE: Final = "agentkit"
_TRACER_ENV: Final = "OTEL_PYTHON_TRACER_PROVIDER"
_METER_ENV: Final = "OTEL_PYTHON_METER_PROVIDER"
#: the bucket boundaries the GenAI conventions advise for the two client histograms
_TOKEN_BUCKETS: Final = (
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
)  # fmt: skip
_DURATION_BUCKETS: Final = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip


class Bridge:
    """opentelemetry-api, once imported: the tracer, the two histograms, the calls used."""

    def __init__(self) -> None:
        from opentelemetry import context, metrics, propagate, trace
        from opentelemetry.trace import (
            NonRecordingSpan,
            SpanContext,
            SpanKind,
            Status,
            StatusCode,
            TraceFlags,
        )

        self._trace = trace
        self._metrics = metrics
        self._context = context
        self._propagate = propagate
        self._non_recording = NonRecordingSpan
        self._span_context = SpanContext
        self._flags = TraceFlags
        self._error = Status(StatusCode.ERROR)
        self._ok = Status(StatusCode.OK)
        self._status = Status
        self._status_error = StatusCode.ERROR
        self.kinds: Final = {
            "internal": SpanKind.INTERNAL,
            "client": SpanKind.CLIENT,
            "server": SpanKind.SERVER,
            "producer": SpanKind.PRODUCER,
            "consumer": SpanKind.CONSUMER,
        }
        from agentkit import __version__

        self.tracer = trace.get_tracer(_SCOPE, __version__)
        self._token_usage: Histogram | None = None
        self._duration: Histogram | None = None

    # -- is anything set up? -------------------------------------------------------------------

    def tracing(self) -> bool:
        """True when the global tracer provider is a real one (not the API's proxy or no-op)."""
        provider = self._trace.get_tracer_provider()
        return not isinstance(
            provider, self._trace.ProxyTracerProvider | self._trace.NoOpTracerProvider
        )

    def metering(self) -> bool:
        """True when the global meter provider is a real one."""
        from opentelemetry.metrics import NoOpMeterProvider
        from opentelemetry.metrics._internal import _ProxyMeterProvider

        provider = self._metrics.get_meter_provider()
        return not isinstance(provider, _ProxyMeterProvider | NoOpMeterProvider)

    # -- spans ---------------------------------------------------------------------------------

    def start(
        self,
        name: str,
        parent: OtelSpan | None,
        kind: str,
        attributes: Mapping[str, Any],
        start_ns: int,
        *,
        ambient: bool = False,
    ) -> OtelSpan:
        """A started OpenTelemetry span, child of *parent* (None and *ambient*: of the current
        OpenTelemetry context, i.e. a span the caller has open; None: a new trace)."""
        if parent is not None:
            context: Context | None = self._trace.set_span_in_context(parent)
        elif ambient:
            context = None
        else:
            context = self._context.Context()
        return self.tracer.start_span(
            name, context=context, kind=self.kinds[kind], attributes=attributes, start_time=start_ns
        )

    def status(self, span: OtelSpan, *, error: bool, message: str = "") -> None:
        """A span's final status: an error (with its description), else OK."""
        if not error:
            span.set_status(self._ok)
        else:
            span.set_status(self._status(self._status_error, message) if message else self._error)

    def ids(self, span: OtelSpan) -> tuple[int, int, bool] | None:
        """(trace id, span id, sampled) of a span that has ids of its own, else None."""
        ctx = span.get_span_context()
        if not ctx.is_valid:
            return None
        return ctx.trace_id, ctx.span_id, bool(ctx.trace_flags & 0x01)

    def current(self) -> OtelSpan | None:
        """The caller's current OpenTelemetry span, when it is a valid one."""
        span = self._trace.get_current_span()
        return span if span.get_span_context().is_valid else None

    def remote(self, trace_id: int, span_id: int, sampled: bool) -> OtelSpan:
        """A stand-in for a parent known only by its ids (a remote or agentkit-only span)."""
        flags = self._flags(0x01 if sampled else 0x00)
        context = self._span_context(trace_id, span_id, is_remote=True, trace_flags=flags)
        return self._non_recording(context)

    def extract(self, carrier: Mapping[str, str]) -> OtelSpan | None:
        """The parent a W3C carrier (``traceparent``, ``tracestate``) names, by the configured
        propagators; None when it names none."""
        context = self._propagate.extract(dict(carrier))
        span = self._trace.get_current_span(context)
        return span if span.get_span_context().is_valid else None

    def inject(self, span: OtelSpan) -> dict[str, str]:
        """The carrier (``traceparent`` …) the configured propagators write for *span*."""
        carrier: dict[str, str] = {}
        self._propagate.inject(carrier, context=self._trace.set_span_in_context(span))
        return carrier

    def attach(self, span: OtelSpan) -> object:
        return self._context.attach(self._trace.set_span_in_context(span))

    def detach(self, token: object) -> None:
        self._context.detach(token)  # type: ignore[arg-type]

    # -- metrics -------------------------------------------------------------------------------

    def histograms(self) -> tuple[Histogram, Histogram]:
        """``gen_ai.client.token.usage`` and ``gen_ai.client.operation.duration``."""
        if self._token_usage is None or self._duration is None:
            from agentkit import __version__
            from agentkit.telemetry.semconv import METRIC_OPERATION_DURATION, METRIC_TOKEN_USAGE

            meter = self._metrics.get_meter(_SCOPE, __version__)
            self._token_usage = _histogram(
                meter, METRIC_TOKEN_USAGE, "{token}", "Number of input and output tokens used",
                _TOKEN_BUCKETS,
            )  # fmt: skip
            self._duration = _histogram(
                meter, METRIC_OPERATION_DURATION, "s", "GenAI operation duration",
                _DURATION_BUCKETS,
            )  # fmt: skip
        return self._token_usage, self._duration


def _histogram(
    meter: Meter, name: str, unit: str, description: str, buckets: tuple[float, ...]
) -> Histogram:
    try:
        histogram: Histogram = meter.create_histogram(
            name, unit=unit, description=description, explicit_bucket_boundaries_advisory=buckets
        )
    except TypeError:  # an API older than the advisory parameter (1.23)
        histogram = meter.create_histogram(name, unit=unit, description=description)
    return histogram


_UNSET: Final = object()
_bridge: Bridge | object | None = _UNSET


def bridge() -> Bridge | None:
    """The bridge, when opentelemetry-api is importable and somebody may have set it up
    (imported ``opentelemetry.trace`` or ``.metrics``, or named a provider in the
    environment); None otherwise — then nothing of opentelemetry is imported."""
    global _bridge  # noqa: PLW0603  # one import of an optional library per process
    if _bridge is _UNSET:
        if (
            "opentelemetry.trace" not in sys.modules
            and "opentelemetry.metrics" not in sys.modules
            and _TRACER_ENV not in os.environ
            and _METER_ENV not in os.environ
        ):
            return None
        try:
            _bridge = Bridge()
        except ImportError:
            _bridge = None
    return _bridge  # type: ignore[return-value]
