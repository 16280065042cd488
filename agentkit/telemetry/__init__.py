"""Telemetry: every turn, plan, model call and tool call as a span, in OpenTelemetry's GenAI
shape — kept by agentkit itself and, when OpenTelemetry is set up, exported through it.

Usage. An agent runtime holds one ``tel = Telemetry(agent_id=…, agent_name=…)``. A turn is
``trace = tel.turn(conversation_id=…, message_id=…, scenario="A", provider="scripted",
model="scripted:inline", secrets=mask, request=text)``, which starts the root
``invoke_agent {agent id}``; inside it, ``trace.plan()`` (``plan {agent id}``, then
``.planned(goal, steps)`` or ``.decided(decision, steps)``; ``trace.span(name, parent=None)``
for any other, None meaning the root), ``trace.model_call(parent, model=…, purpose="plan")``
(``chat {model}``, then ``.sent(messages)``, ``.replied(text)``, ``.usage(in, out)``,
``.finish_reasons``), ``trace.tool_call(parent, name=…, call_id=…)``
(``execute_tool {name}``) and ``trace.memory_update(parent, store=…)``
(``update_memory {store}``) start child spans, each ended by ``.end()`` or by leaving its
``with`` block (an exception sets ``error.type``); ``span.fail(type, message)`` marks a
failure without one, and every other span ends with status OK.
``trace.event(CONSENT_EVENT, {...})`` puts an event on the root, ``trace.content(span,
key, value)`` records contents only when
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` (masked even then), and
``trace.end(status="completed", input_tokens=…, output_tokens=…, answer=…)`` ends the turn.
Messages are written in the GenAI conventions' shape (``parts``), every string masked by
value with *mask* (the turn's :class:`~agentkit.tools.SecretMask`) when its span ends.
``trace.spans`` and ``tel.recorded(trace.trace_id)`` (or ``tel.turn_records(message_id)``)
give the finished :class:`SpanRecord` values TraceView draws. Code that cannot be handed a
parent (the MCP client) reads ``Telemetry.current()``, set by ``with span.activate(): …``;
``span.trace_context()`` is the W3C carrier (``traceparent``) to hand to a callee.

Export. agentkit configures nothing: it uses opentelemetry-api's *global* tracer and meter
providers, so a user who set them up (Phoenix, Langfuse, logfire, an OTLP exporter; the CLI
does it from the standard ``OTEL_*`` variables when the ``otel`` extra is installed) gets
these spans and the ``gen_ai.client.token.usage`` / ``gen_ai.client.operation.duration``
metrics. Without a provider, or without opentelemetry installed, nothing of it is imported or
called; ``import agentkit.telemetry`` never imports it. Names: :mod:`agentkit.telemetry.semconv`.
"""

from agentkit.telemetry import semconv
from agentkit.telemetry._messages import ToolCallPart
from agentkit.telemetry._provider import provider_name
from agentkit.telemetry._records import (
    Attributes,
    AttributeValue,
    SpanEvent,
    SpanKind,
    SpanRecord,
    SpanStatus,
)
from agentkit.telemetry._spans import (
    CAPTURE_ENV,
    Masker,
    ModelCallSpan,
    PlanSpan,
    Secrets,
    Span,
    Trace,
    TurnTrace,
    capture_content,
)
from agentkit.telemetry._telemetry import Telemetry
from agentkit.telemetry._traceparent import format_traceparent, parse_traceparent

__all__ = [
    "CAPTURE_ENV",
    "AttributeValue",
    "Attributes",
    "Masker",
    "ModelCallSpan",
    "PlanSpan",
    "Secrets",
    "Span",
    "SpanEvent",
    "SpanKind",
    "SpanRecord",
    "SpanStatus",
    "Telemetry",
    "Trace",
    "ToolCallPart",
    "TurnTrace",
    "capture_content",
    "format_traceparent",
    "parse_traceparent",
    "provider_name",
    "semconv",
]
