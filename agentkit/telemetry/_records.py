"""What a finished span leaves: :class:`SpanRecord`, a frozen value TraceView renders.

A record is made once, when its span ends, from what agentkit itself kept (never read back
from an OpenTelemetry exporter), so a turn's records are the same whether or not a tracer
provider is configured. Attribute values are the OpenTelemetry attribute types (a string,
a bool, an int, a float, or a tuple of one of them); message contents are JSON strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

__all__ = ["AttributeValue", "Attributes", "SpanEvent", "SpanKind", "SpanRecord", "SpanStatus"]

AttributeValue: TypeAlias = (
    str
    | bool
    | int
    | float
    | tuple[str, ...]
    | tuple[bool, ...]
    | tuple[int, ...]
    | tuple[float, ...]
)
"""An OpenTelemetry attribute value, as a record holds it (sequences are tuples)."""

Attributes: TypeAlias = Mapping[str, AttributeValue]

SpanKind: TypeAlias = Literal["internal", "client", "server", "producer", "consumer"]
SpanStatus: TypeAlias = Literal["ok", "error"]


@dataclass(frozen=True, slots=True)
class SpanEvent:
    """A span event: a name, when it happened (Unix ns), its attributes."""

    name: str
    time_ns: int
    attributes: Attributes = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """One finished span of a turn (or of an eval sweep): ids are lowercase hex, as in OTLP
    JSON and W3C ``traceparent`` (32 characters for the trace, 16 for a span); a span whose
    parent is outside agentkit (a caller's span, a remote parent) keeps that parent's id."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str | None
    kind: SpanKind
    start_ns: int
    end_ns: int
    status: SpanStatus
    attributes: Attributes
    events: tuple[SpanEvent, ...] = ()
    #: the error's description (secrets scrubbed); "" when the span did not fail
    status_message: str = ""

    @property
    def duration_ms(self) -> float:
        """How long the span ran, in milliseconds."""
        return (self.end_ns - self.start_ns) / 1e6

    @property
    def error_type(self) -> str | None:
        """The span's ``error.type``, when it failed."""
        value = self.attributes.get("error.type")
        return value if isinstance(value, str) else None
