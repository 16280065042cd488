"""Spans and traces: agentkit's own cheap records, mirrored to OpenTelemetry when it is set up.

A :class:`Trace` owns the spans of one tree (a turn, an eval sweep, one eval run in a worker):
it hands out ids, keeps the spans in start order and, when it ends, gives their records to
its :class:`~agentkit.telemetry.Telemetry`. A :class:`Span` is started by its trace and ended
once (``end()`` or leaving its ``with`` block); every attribute, event and status it gets is
kept in the record and, when the trace has an OpenTelemetry span beside it, set there too,
with the same start and end times. Parents are always explicit (the trace's root when none is
given); :meth:`Span.activate` is only for code that cannot be handed a parent (the MCP client).

Invariant: no secret value reaches an attribute, an event or a status message. String values
are scrubbed of the trace's known secrets, a secret-named key's value is masked, and contents
(:meth:`Trace.content`) are recorded only when capture is on, masked even then.
"""

from __future__ import annotations

import contextvars
import json
import random
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

from agentkit.telemetry import semconv as sc
from agentkit.telemetry._bridge import Bridge, bridge
from agentkit.telemetry._records import AttributeValue, SpanEvent, SpanKind, SpanRecord
from agentkit.telemetry._traceparent import format_traceparent, parse_traceparent

if TYPE_CHECKING:
    from types import TracebackType

    from opentelemetry.trace import Span as OtelSpan
    from pydantic import JsonValue

__all__ = ["ModelCallSpan", "Span", "Trace", "TurnTrace", "capture_content", "current_span"]

CAPTURE_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

_CURRENT: contextvars.ContextVar[Span | None] = contextvars.ContextVar(
    "agentkit_current_span", default=None
)
_getrandbits = random.getrandbits
_time_ns = time.time_ns

Secrets = Callable[[], Iterable[str]] | Iterable[str]
"""The secret values a trace scrubs: a list, or a function called once, when first needed."""


def capture_content() -> bool:
    """True when message and tool contents may be recorded on spans:
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` (case-insensitive)."""
    import os

    return os.environ.get(CAPTURE_ENV, "").strip().lower() == "true"


def current_span() -> Span | None:
    """The span made current by :meth:`Span.activate` in this context, if any."""
    return _CURRENT.get()


class _Sink(Protocol):
    """Where a trace's records go when it ends (:class:`~agentkit.telemetry.Telemetry`)."""

    def _keep(self, trace_id: str, records: list[SpanRecord], message_id: str | None) -> None: ...


_SECRET_KEYS: dict[str, bool] = {}
_SCALARS: Final = frozenset({str, bool, int, float})


def _secret_key(key: str) -> bool:
    known = _SECRET_KEYS.get(key)
    if known is None:
        from agentkit.tools.secrets import is_secret_key

        # attribute keys are few and fixed; a secret-named one is its last dotted part
        known = is_secret_key(key.rsplit(".", 1)[-1])
        if len(_SECRET_KEYS) < 4096:
            _SECRET_KEYS[key] = known
    return known


#: keys whose values agentkit itself sets from a fixed vocabulary: never scrubbed
_PLAIN_KEYS: Final = frozenset(
    {sc.OPERATION_NAME, sc.PROVIDER_NAME, sc.TOOL_TYPE, sc.PURPOSE, sc.TURN_STATUS, sc.SCENARIO}
)


def _masked(secret: str) -> str:
    from agentkit.tools.secrets import mask_value

    return mask_value(secret)


def _value(value: object) -> AttributeValue | None:
    """*value* as an OpenTelemetry attribute value (lists become tuples), None when it has no
    such form (nested values are written as JSON by :meth:`Trace.content`)."""
    if type(value) in _SCALARS or isinstance(value, str | bool | int | float):
        return value  # type: ignore[return-value]
    if isinstance(value, list | tuple):
        items = tuple(value)
        if all(isinstance(item, str) for item in items):
            return items
        if all(isinstance(item, bool) for item in items):
            return items
        if all(isinstance(item, int) and not isinstance(item, bool) for item in items):
            return items
        if all(isinstance(item, int | float) and not isinstance(item, bool) for item in items):
            return tuple(float(item) for item in items)
    return None


class Span:
    """One operation of a trace. Started by :meth:`Trace.span` (or ``model_call``,
    ``tool_call``); ``set``, ``event`` and ``fail`` while it runs; ended once."""

    __slots__ = (
        "_attributes",
        "_events",
        "_message",
        "_otel",
        "_record",
        "_status_error",
        "_trace",
        "kind",
        "name",
        "parent_id",
        "span_id",
        "start_ns",
    )

    def __init__(
        self,
        trace: Trace,
        name: str,
        *,
        kind: SpanKind,
        span_id: str,
        parent_id: str | None,
        start_ns: int,
        attributes: dict[str, AttributeValue],
        otel: OtelSpan | None,
    ) -> None:
        self._trace = trace
        self.name = name
        self.kind: SpanKind = kind
        self.span_id = span_id
        self.parent_id = parent_id
        self.start_ns = start_ns
        self._attributes = attributes
        self._events: list[SpanEvent] = []
        self._status_error = False
        self._message = ""
        self._otel = otel
        self._record: SpanRecord | None = None

    # -- what it is ----------------------------------------------------------------------------

    @property
    def trace(self) -> Trace:
        return self._trace

    @property
    def trace_id(self) -> str:
        return self._trace.trace_id

    @property
    def ended(self) -> bool:
        return self._record is not None

    @property
    def record(self) -> SpanRecord | None:
        """The finished span's record (None while it runs)."""
        return self._record

    @property
    def attributes(self) -> Mapping[str, AttributeValue]:
        """The attributes so far (read-only view; set them with :meth:`set`)."""
        return self._attributes

    @property
    def traceparent(self) -> str:
        """This span as a W3C ``traceparent`` (the parent a callee should use)."""
        return format_traceparent(self._trace.trace_id, self.span_id, self._trace.sampled)

    def trace_context(self) -> dict[str, str]:
        """The W3C carrier for a callee (``traceparent``, and ``tracestate`` / ``baggage``
        when OpenTelemetry's configured propagators write them): what goes into an MCP
        request's ``params._meta`` or an eval task."""
        otel = self._otel
        bridge_ = self._trace._bridge
        if otel is not None and bridge_ is not None:
            carrier = bridge_.inject(otel)
            if "traceparent" in carrier:
                return carrier
        return {"traceparent": self.traceparent}

    # -- while it runs -------------------------------------------------------------------------

    def set(self, key: str, value: object) -> None:
        """Set attribute *key* (None is ignored; a string is scrubbed of known secrets)."""
        if self._record is not None or value is None:
            return
        attribute = self._trace._clean(key, value)
        if attribute is None:
            return
        self._attributes[key] = attribute
        if self._otel is not None:
            self._otel.set_attribute(key, attribute)

    def set_many(self, attributes: Mapping[str, object]) -> None:
        for key, value in attributes.items():
            self.set(key, value)

    def event(self, name: str, attributes: Mapping[str, object] | None = None) -> None:
        """Add a span event now (its string values scrubbed like attributes)."""
        if self._record is not None:
            return
        now = _time_ns()
        clean: dict[str, AttributeValue] = {}
        if attributes:
            for key, value in attributes.items():
                if value is not None:
                    attribute = self._trace._clean(key, value)
                    if attribute is not None:
                        clean[key] = attribute
        self._events.append(SpanEvent(name, now, clean))
        if self._otel is not None:
            self._otel.add_event(name, clean, now)

    def fail(self, error_type: str, message: str = "") -> None:
        """Mark the span failed: ``error.type`` and an error status (the message scrubbed)."""
        if self._record is not None:
            return
        self.set(sc.ERROR_TYPE, error_type or "_OTHER")
        self._status_error = True
        self._message = self._trace._scrub(message) if message else ""
        if self._otel is not None and self._trace._bridge is not None:
            self._trace._bridge.fail(self._otel, self._message)

    def usage(self, input_tokens: int | None, output_tokens: int | None) -> None:
        """``gen_ai.usage.input_tokens`` / ``output_tokens`` (None: not reported)."""
        if self._record is not None:
            return
        usage: dict[str, AttributeValue] = {}
        if input_tokens is not None:
            usage[sc.USAGE_INPUT_TOKENS] = input_tokens
        if output_tokens is not None:
            usage[sc.USAGE_OUTPUT_TOKENS] = output_tokens
        self._attributes.update(usage)
        if self._otel is not None and usage:
            self._otel.set_attributes(usage)

    def child(
        self,
        name: str,
        *,
        kind: SpanKind = "internal",
        attributes: Mapping[str, object] | None = None,
    ) -> Span:
        """A span of this span's trace, with this span as its parent."""
        return self._trace.span(name, parent=self, kind=kind, attributes=attributes)

    def end(self) -> None:
        """End the span now (a second call does nothing)."""
        if self._record is not None:
            return
        end_ns = _time_ns()
        self._record = SpanRecord(
            name=self.name,
            trace_id=self._trace.trace_id,
            span_id=self.span_id,
            parent_id=self.parent_id,
            kind=self.kind,
            start_ns=self.start_ns,
            end_ns=end_ns,
            status="error" if self._status_error else "ok",
            attributes=self._attributes,
            events=tuple(self._events),
            status_message=self._message,
        )
        if self._otel is not None:
            self._otel.end(end_ns)
        self._ended(end_ns)
        self._trace._span_ended(self)

    def _ended(self, end_ns: int) -> None:
        """What a kind of span does when it ends (model calls record their metrics)."""

    # -- as a context ---------------------------------------------------------------------------

    def __enter__(self) -> Span:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc is not None and not self._status_error:
            self.fail(exc_type.__qualname__ if exc_type else "_OTHER", str(exc))
        self.end()

    def activate(self) -> _Activation:
        """``with span.activate(): …`` — the current span (agentkit's and OpenTelemetry's) for
        code that cannot be handed a parent. Never hold it across a ``yield``."""
        return _Activation(self)

    def __repr__(self) -> str:
        return f"Span({self.name!r}, span_id={self.span_id!r}, ended={self.ended})"


class _Activation:
    __slots__ = ("_otel_token", "_span", "_token")

    def __init__(self, span: Span) -> None:
        self._span = span
        self._token: contextvars.Token[Span | None] | None = None
        self._otel_token: object = None

    def __enter__(self) -> Span:
        span = self._span
        self._token = _CURRENT.set(span)
        bridge_ = span._trace._bridge
        if span._otel is not None and bridge_ is not None:
            self._otel_token = bridge_.attach(span._otel)
        return span

    def __exit__(self, *exc_info: object) -> None:
        bridge_ = self._span._trace._bridge
        if self._otel_token is not None and bridge_ is not None:
            bridge_.detach(self._otel_token)
            self._otel_token = None
        if self._token is not None:
            _CURRENT.reset(self._token)
            self._token = None


class ModelCallSpan(Span):
    """A model call (``{operation} {model}``, CLIENT): usage, finish reasons, and the two
    ``gen_ai.client.*`` histograms recorded when it ends."""

    __slots__ = ()

    def finish_reasons(self, reasons: Iterable[str]) -> None:
        self.set(sc.RESPONSE_FINISH_REASONS, tuple(reasons))

    def _ended(self, end_ns: int) -> None:
        bridge_ = self._trace._meter
        if bridge_ is None:
            return
        attributes = self._attributes
        common: dict[str, AttributeValue] = {
            key: attributes[key]
            for key in (sc.OPERATION_NAME, sc.PROVIDER_NAME, sc.REQUEST_MODEL, sc.ERROR_TYPE)
            if key in attributes
        }
        if sc.RESPONSE_MODEL in attributes:
            common[sc.RESPONSE_MODEL] = attributes[sc.RESPONSE_MODEL]
        usage, duration = bridge_.histograms()
        duration.record((end_ns - self.start_ns) / 1e9, common)
        for key, kind in ((sc.USAGE_INPUT_TOKENS, "input"), (sc.USAGE_OUTPUT_TOKENS, "output")):
            tokens = attributes.get(key)
            if isinstance(tokens, int) and not isinstance(tokens, bool):
                usage.record(tokens, {**common, sc.TOKEN_TYPE: kind})


class Trace:
    """The spans of one tree under one root span; made by :class:`~agentkit.telemetry.
    Telemetry` (``turn``, ``workflow``, ``trace``)."""

    def __init__(
        self,
        sink: _Sink,
        name: str,
        *,
        kind: SpanKind = "internal",
        attributes: Mapping[str, object] | None = None,
        traceparent: str | Mapping[str, str] | None = None,
        secrets: Secrets = (),
        message_id: str | None = None,
    ) -> None:
        self._sink = sink
        self._message_id = message_id
        self._secrets_source: Secrets | None = secrets
        self._secrets: list[str] | None = None
        self._spans: list[Span] = []
        self._done = False
        self.capture = capture_content()
        b = bridge()
        self._bridge: Bridge | None = b if b is not None and b.tracing() else None
        self._meter: Bridge | None = b if b is not None and b.metering() else None
        self.sampled = True

        # the parent: a carrier handed over (eval workers), the activated span, the caller's
        # own OpenTelemetry span, or none (a new trace)
        parent_ids: tuple[str, str, bool] | None = None
        otel_parent: OtelSpan | None = None
        ambient = False
        if traceparent is not None:
            carrier = {"traceparent": traceparent} if isinstance(traceparent, str) else traceparent
            parent_ids = parse_traceparent(carrier.get("traceparent", ""))
            if self._bridge is not None and parent_ids is not None:
                otel_parent = self._bridge.extract(carrier)
        else:
            active = _CURRENT.get()
            if active is not None and not active.ended:
                parent_ids = (active.trace_id, active.span_id, active._trace.sampled)
                otel_parent = active._otel
            elif self._bridge is not None:
                caller = self._bridge.current()
                if caller is not None:
                    found = self._bridge.ids(caller)
                    if found is not None:
                        parent_ids = (f"{found[0]:032x}", f"{found[1]:016x}", found[2])
                        otel_parent, ambient = None, True
        if self._bridge is not None and otel_parent is None and parent_ids and not ambient:
            otel_parent = self._bridge.remote(
                int(parent_ids[0], 16), int(parent_ids[1], 16), parent_ids[2]
            )
        if parent_ids is not None:
            self.trace_id, parent_span, self.sampled = parent_ids
        else:
            self.trace_id, parent_span = f"{_getrandbits(128) or 1:032x}", None
        self.root: Span = self._start(
            name, kind, attributes, parent_span, otel_parent, ambient=ambient
        )

    # -- spans ---------------------------------------------------------------------------------

    def span(
        self,
        name: str,
        *,
        parent: Span | None = None,
        kind: SpanKind = "internal",
        attributes: Mapping[str, object] | None = None,
    ) -> Span:
        """Start a span, child of *parent* (None: of the root)."""
        parent = parent or self.root
        return self._start(name, kind, attributes, parent.span_id, parent._otel)

    def model_call(
        self,
        parent: Span | None,
        *,
        operation: str = "chat",
        model: str,
        purpose: str,
        stream: bool = False,
        provider: str | None = None,
    ) -> ModelCallSpan:
        """Start a model call span ``{operation} {model}`` (CLIENT)."""
        parent = parent or self.root
        attributes: dict[str, object] = {
            sc.OPERATION_NAME: operation,
            sc.PROVIDER_NAME: provider or self.root._attributes.get(sc.PROVIDER_NAME),
            sc.REQUEST_MODEL: model,
            sc.PURPOSE: purpose,
            sc.REQUEST_STREAM: stream,
            sc.CONVERSATION_ID: self.root._attributes.get(sc.CONVERSATION_ID),
        }
        span = self._start(
            f"{operation} {model}", "client", attributes, parent.span_id, parent._otel,
            cls=ModelCallSpan,
        )  # fmt: skip
        assert isinstance(span, ModelCallSpan)
        return span

    def tool_call(
        self,
        parent: Span | None,
        *,
        name: str,
        call_id: str | None = None,
        tool_type: str = "function",
        description: str | None = None,
    ) -> Span:
        """Start a tool run span ``execute_tool {name}`` (INTERNAL)."""
        parent = parent or self.root
        attributes: dict[str, object] = {
            sc.OPERATION_NAME: "execute_tool",
            sc.TOOL_NAME: name,
            sc.TOOL_CALL_ID: call_id,
            sc.TOOL_TYPE: tool_type,
            "gen_ai.tool.description": description,
        }
        return self._start(
            f"execute_tool {name}", "internal", attributes, parent.span_id, parent._otel
        )

    def memory_update(
        self,
        parent: Span | None,
        *,
        store: str,
        strategy: str | None = None,
        provider: str | None = None,
    ) -> Span:
        """Start a memory update span ``update_memory {store}`` (e.g. compression into
        ``task_state``)."""
        parent = parent or self.root
        attributes: dict[str, object] = {
            sc.OPERATION_NAME: "update_memory",
            sc.PROVIDER_NAME: provider or self.root._attributes.get(sc.PROVIDER_NAME),
            sc.MEMORY_STORE_NAME: store,
            sc.MEMORY_UPDATE_STRATEGY: strategy,
            sc.CONVERSATION_ID: self.root._attributes.get(sc.CONVERSATION_ID),
        }
        return self._start(
            f"update_memory {store}", "internal", attributes, parent.span_id, parent._otel
        )

    def event(self, name: str, attributes: Mapping[str, object] | None = None) -> None:
        """A span event on the root span (a consent request, a question)."""
        self.root.event(name, attributes)

    def content(self, span: Span, key: str, value: JsonValue) -> bool:
        """Record a content attribute (``gen_ai.input.messages``, ``gen_ai.tool.call.
        arguments`` …) on *span*, only when content capture is on; secret-named keys are
        masked and known secret values scrubbed even then. True when it was recorded."""
        if not self.capture or span.ended:
            return False
        from agentkit.tools.secrets import mask_secrets

        masked = mask_secrets(value, self._known())
        text = masked if isinstance(masked, str) else json.dumps(masked, ensure_ascii=False)
        span._attributes[key] = text
        if span._otel is not None:
            span._otel.set_attribute(key, text)
        return True

    @property
    def spans(self) -> list[SpanRecord]:
        """The finished spans of this trace, in start order."""
        return [span._record for span in self._spans if span._record is not None]

    @property
    def ended(self) -> bool:
        return self._done

    def end(self, *, error_type: str | None = None, message: str = "") -> None:
        """End the root (and any span still open, at the same moment) and keep the records."""
        if self._done:
            return
        if error_type:
            self.root.fail(error_type, message)
        for span in reversed(self._spans):
            if span is not self.root:
                span.end()
        self._done = True
        self.root.end()
        self._sink._keep(self.trace_id, self.spans, self._message_id)

    # -- inside --------------------------------------------------------------------------------

    def _start(
        self,
        name: str,
        kind: SpanKind,
        attributes: Mapping[str, object] | None,
        parent_id: str | None,
        otel_parent: OtelSpan | None,
        *,
        ambient: bool = False,
        cls: type[Span] = Span,
    ) -> Span:
        clean: dict[str, AttributeValue] = {}
        if attributes:
            for key, value in attributes.items():
                if value is not None:
                    attribute = self._clean(key, value)
                    if attribute is not None:
                        clean[key] = attribute
        start_ns = _time_ns()
        otel: OtelSpan | None = None
        span_id = ""
        if self._bridge is not None:
            otel = self._bridge.start(name, otel_parent, kind, clean, start_ns, ambient=ambient)
            ids = self._bridge.ids(otel)
            if ids is not None:
                own = f"{ids[1]:016x}"
                if own != parent_id:  # a no-op span repeats its parent's ids
                    span_id = own
                    if not self._spans:  # the root: its trace is OpenTelemetry's
                        self.trace_id, self.sampled = f"{ids[0]:032x}", ids[2]
        if not span_id:
            span_id = f"{_getrandbits(64) or 1:016x}"
        span = cls(
            self, name, kind=kind, span_id=span_id, parent_id=parent_id, start_ns=start_ns,
            attributes=clean, otel=otel,
        )  # fmt: skip
        self._spans.append(span)
        return span

    def _span_ended(self, span: Span) -> None:
        if self._done and span is not self.root and span._record is not None:
            self._sink._keep(self.trace_id, [span._record], None)  # ended after the trace

    def _known(self) -> list[str]:
        secrets = self._secrets
        if secrets is None:
            source = self._secrets_source
            self._secrets_source = None
            values = source() if callable(source) else (source or ())
            secrets = sorted({s for s in values if len(s) >= 4}, key=len, reverse=True)
            self._secrets = secrets
        return secrets

    def _scrub(self, text: str) -> str:
        for secret in self._known():
            if secret in text:
                text = text.replace(secret, _masked(secret))
        return text

    def _clean(self, key: str, value: object) -> AttributeValue | None:
        if type(value) is str:
            secret_key = _SECRET_KEYS.get(key)
            if secret_key is None:
                secret_key = _secret_key(key)
            if secret_key:
                return _masked(value)
            if len(value) < 4 or key in _PLAIN_KEYS:
                return value
            secrets = self._secrets if self._secrets is not None else self._known()
            for secret in secrets:
                if secret in value:
                    value = value.replace(secret, _masked(secret))
            return value
        attribute = _value(value)
        if isinstance(attribute, tuple) and attribute and isinstance(attribute[0], str):
            if self._known():
                return tuple(self._scrub(str(item)) for item in attribute)
        elif attribute is None and isinstance(value, dict | list):
            from agentkit.tools.secrets import mask_secrets

            masked: Any = mask_secrets(value, self._known())
            return json.dumps(masked, ensure_ascii=False, default=str)
        return attribute


class TurnTrace(Trace):
    """The trace of one agent turn: its root is ``invoke_agent {agent id}``."""

    def plan(self, parent: Span | None = None) -> Span:
        """Start a planning span ``plan {agent id}`` (a plan or a replan decision; its model
        call is its child)."""
        root = self.root._attributes
        agent = root.get(sc.AGENT_ID) or "agent"
        attributes: dict[str, object] = {
            sc.OPERATION_NAME: "plan",
            sc.PROVIDER_NAME: root.get(sc.PROVIDER_NAME),
            sc.AGENT_ID: root.get(sc.AGENT_ID),
            sc.AGENT_NAME: root.get(sc.AGENT_NAME),
            sc.CONVERSATION_ID: root.get(sc.CONVERSATION_ID),
        }
        return self.span(f"plan {agent}", parent=parent, attributes=attributes)

    def end(
        self,
        status: str = "completed",
        *,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        error_type: str | None = None,
        message: str = "",
    ) -> None:
        """End the turn: ``agentkit.turn.status``, the turn's ``gen_ai.usage.*`` and, when it
        failed, ``error.type``; then the root ends and the records are kept."""
        if self.ended:
            return
        root = self.root
        root.set(sc.TURN_STATUS, status)
        root.usage(input_tokens, output_tokens)
        super().end(error_type=error_type, message=message)
