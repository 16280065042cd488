"""Spans and traces: agentkit's own cheap records, mirrored to OpenTelemetry when it is set up.

A :class:`Trace` owns the spans of one tree (a turn, an eval sweep, one eval run in a worker):
it hands out ids, keeps the spans in start order and, when it ends, gives their records to
its :class:`~agentkit.telemetry.Telemetry`. A :class:`Span` is started by its trace and ended
once (``end()`` or leaving its ``with`` block); every attribute, event and status it gets is
kept in the record and, when the trace has an OpenTelemetry span beside it, set there too,
with the same start and end times. Parents are always explicit (the trace's root when none is
given); :meth:`Span.activate` is only for code that cannot be handed a parent (the MCP client).

Invariant: no secret value reaches an attribute, an event or a status message. A secret-named
key's value is masked when it is set; every other string — attribute values, event attributes,
the status message, contents and the JSON strings inside them — is masked by value with the
trace's mask (the one :class:`~agentkit.calls.secrets.SecretMask`: the secret store's values, what
the turn has learned, the toolsets' secret patterns) when the span ends, so a secret the turn
met after a value was set is masked in it too; only then does the span reach OpenTelemetry.
Contents (:meth:`Trace.content`) are recorded only when capture is on, masked even then.

Every span ends with a status: an error (:meth:`Span.fail`, or an exception out of its
``with`` block) or OK, and declares its OpenInference kind (``openinference.span.kind``).
"""

from __future__ import annotations

import contextvars
import json
import random
import time
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Final, Protocol

from pydantic import JsonValue

from agentkit.calls.secrets import SecretMask, Secrets, is_secret_key, mask_secrets, mask_value
from agentkit.telemetry import semconv as sc
from agentkit.telemetry._bridge import Bridge, bridge
from agentkit.telemetry._messages import (
    ToolCallPart,
    input_messages,
    output_messages,
    text_message,
)
from agentkit.telemetry._records import AttributeValue, SpanEvent, SpanKind, SpanRecord
from agentkit.telemetry._traceparent import format_traceparent, parse_traceparent

if TYPE_CHECKING:
    from types import TracebackType

    from opentelemetry.trace import Span as OtelSpan

__all__ = [
    "Masker",
    "Secrets",
    "ModelCallSpan",
    "PlanSpan",
    "Span",
    "Trace",
    "TurnTrace",
    "capture_content",
    "current_span",
]

CAPTURE_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

_CURRENT: contextvars.ContextVar[Span | None] = contextvars.ContextVar(
    "agentkit_current_span", default=None
)
_getrandbits = random.getrandbits
_time_ns = time.time_ns


Masker = SecretMask
"""What masks the text a trace exports: the one secret mask (a turn's, asked again each
time: it learns the turn's secrets as the turn goes)."""


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


_SCALARS: Final = frozenset({str, bool, int, float})


@lru_cache(maxsize=4096)  # attribute keys are few and fixed
def _secret_key(key: str) -> bool:
    """A secret-named attribute key: its last dotted part names a secret."""
    return is_secret_key(key.rsplit(".", 1)[-1])


#: keys whose values agentkit itself sets, from a fixed vocabulary or checked identifiers:
#: never masked (a secret pattern may match a long id)
_PLAIN_KEYS: Final = frozenset({
    sc.OPERATION_NAME, sc.PROVIDER_NAME, sc.TOOL_TYPE, sc.PURPOSE, sc.TURN_STATUS, sc.SCENARIO,
    sc.OPENINFERENCE_SPAN_KIND, sc.AGENT_ID, sc.CONVERSATION_ID, sc.MESSAGE_ID, sc.TOOL_NAME,
    sc.TOOL_CALL_ID, sc.REQUEST_MODEL, sc.RESPONSE_MODEL, sc.INPUT_MIME_TYPE, sc.OUTPUT_MIME_TYPE,
    sc.WORKFLOW_NAME, sc.MEMORY_STORE_NAME, sc.ERROR_TYPE, sc.PLAN_DECISION, sc.EVAL_OUTCOME,
})  # fmt: skip


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
        "_content",
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
        #: contents to record when the span ends (masked then)
        self._content: dict[str, JsonValue] = {}
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
        """The attributes so far (read-only view; set them with :meth:`set`): their text is
        masked by value when the span ends (:attr:`record` holds what was exported)."""
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
        """Set attribute *key* (None is ignored; strings are masked when the span ends)."""
        if self._record is not None or value is None:
            return
        attribute = self._trace._convert(key, value)
        if attribute is not None:
            self._attributes[key] = attribute

    def set_many(self, attributes: Mapping[str, object]) -> None:
        for key, value in attributes.items():
            self.set(key, value)

    def event(self, name: str, attributes: Mapping[str, object] | None = None) -> None:
        """Add a span event now (its strings masked like attributes, when the span ends)."""
        if self._record is not None:
            return
        self._events.append(SpanEvent(name, _time_ns(), self._trace._converted(attributes)))

    def fail(self, error_type: str, message: str = "") -> None:
        """Mark the span failed: ``error.type`` and an error status (the message masked)."""
        if self._record is not None:
            return
        self.set(sc.ERROR_TYPE, error_type or "_OTHER")
        self._status_error = True
        self._message = message

    def usage(self, input_tokens: int | None, output_tokens: int | None) -> None:
        """``gen_ai.usage.input_tokens`` / ``output_tokens`` (None: not reported)."""
        if self._record is not None:
            return
        if input_tokens is not None:
            self._attributes[sc.USAGE_INPUT_TOKENS] = input_tokens
        if output_tokens is not None:
            self._attributes[sc.USAGE_OUTPUT_TOKENS] = output_tokens

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
        """End the span now (a second call does nothing): its text is masked with what the
        trace's masker knows now, its contents recorded, and then it reaches OpenTelemetry."""
        if self._record is not None:
            return
        end_ns = _time_ns()
        trace = self._trace
        for value in self._content.values():
            trace._mask.learn_json(value)
        attributes = trace._masked_all(self._attributes)
        for key, value in self._content.items():
            attributes[key] = trace._masked_content(value)
        events = tuple(
            SpanEvent(event.name, event.time_ns, trace._masked_all(event.attributes))
            for event in self._events
        )
        message = trace._mask.json_text(self._message) if self._message else ""
        self._attributes = attributes
        self._record = SpanRecord(
            name=self.name,
            trace_id=trace.trace_id,
            span_id=self.span_id,
            parent_id=self.parent_id,
            kind=self.kind,
            start_ns=self.start_ns,
            end_ns=end_ns,
            status="error" if self._status_error else "ok",
            attributes=attributes,
            events=events,
            status_message=message,
        )
        otel, bridge_ = self._otel, trace._bridge
        if otel is not None and bridge_ is not None:
            otel.set_attributes(attributes)
            for event in events:
                otel.add_event(event.name, event.attributes, event.time_ns)
            bridge_.status(otel, error=self._status_error, message=message)
            otel.end(end_ns)
        self._ended(end_ns)
        trace._span_ended(self)

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

    def sent(self, messages: Iterable[Mapping[str, str]]) -> bool:
        """The ``{"role", "content"}`` messages the model was sent, recorded (capture on) as
        ``gen_ai.system_instructions`` (the leading system messages) and
        ``gen_ai.input.messages``, in the conventions' shape. True when recorded."""
        trace = self._trace
        if not trace.capture or self._record is not None:
            return False
        instructions, history = input_messages(messages)
        if instructions:
            trace.content(self, sc.SYSTEM_INSTRUCTIONS, instructions)
        return trace.content(self, sc.INPUT_MESSAGES, history)

    def replied(
        self, text: str, *, tool_calls: Sequence[ToolCallPart] = (), finish_reason: str = "stop"
    ) -> bool:
        """The model's reply, recorded (capture on) as ``gen_ai.output.messages``: its text
        and the tool calls it asked for. True when recorded."""
        if not self._trace.capture or self._record is not None:
            return False
        replied = output_messages(text, tool_calls=tool_calls, finish_reason=finish_reason)
        return self._trace.content(self, sc.OUTPUT_MESSAGES, replied)

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


class PlanSpan(Span):
    """A planning span (``plan {agent id}``, a CHAIN): what was planned or decided."""

    __slots__ = ()

    def planned(self, goal: str, steps: int) -> None:
        """A plan: its number of steps and (capture on: it is the model's text) its goal,
        also as the span's ``output.value``."""
        self.set(sc.PLAN_STEPS, steps)
        self._trace.content(self, sc.PLAN_GOAL, goal)
        self._trace.content(self, sc.OUTPUT_VALUE, goal)

    def decided(self, decision: str, steps: int = 0) -> None:
        """A replan decision (``continue``, ``replace_remaining``, ``finish``, ``ask_user``)
        and the number of steps it put in the plan."""
        self.set(sc.PLAN_DECISION, decision)
        self.set(sc.PLAN_STEPS, steps)
        self._trace.content(self, sc.OUTPUT_VALUE, decision)


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
        #: the mask of *secrets*, learning apart from it the secret-named values met in the
        #: trace's contents (a planned call's ``api_key``): masked wherever the trace writes
        #: them after that, the request included
        given = SecretMask.of(secrets)
        # a mask the caller shares (a turn's) is read live and learned apart from; one made
        # here from values is the trace's own
        self._mask = given.apart() if given is secrets else given
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
        arguments`` …) on *span*, only when content capture is on; written when the span ends
        (a string as it is, anything else as JSON), masked then: secret-named keys' values,
        and every string — JSON strings inside it included — by value. True when it will be
        recorded."""
        if not self.capture or span.ended:
            return False
        span._content[key] = value
        return True

    def evaluation(
        self,
        *,
        passed: bool,
        outcome: str | None = None,
        checks: int | None = None,
        checks_failed: int | None = None,
        verdicts: Mapping[str, bool] | None = None,
    ) -> None:
        """An evaluation's outcome as attributes of the root (an eval run's span), to filter
        and chart by: ``agentkit.eval.passed``, ``.outcome``, ``.checks``, ``.checks_failed``
        and ``agentkit.eval.verdict.{kind}`` per judged kind."""
        root = self.root
        root.set(sc.EVAL_PASSED, passed)
        root.set(sc.EVAL_OUTCOME, outcome)
        root.set(sc.EVAL_CHECKS, checks)
        root.set(sc.EVAL_CHECKS_FAILED, checks_failed)
        for kind, verdict in (verdicts or {}).items():
            root.set(f"{sc.EVAL_VERDICT}.{kind}", verdict)

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
        clean = self._converted(attributes)
        if sc.OPENINFERENCE_SPAN_KIND not in clean:
            operation = clean.get(sc.OPERATION_NAME)
            named = sc.SPAN_KINDS.get(operation) if isinstance(operation, str) else None
            clean[sc.OPENINFERENCE_SPAN_KIND] = named or "CHAIN"
        if self._bridge is not None:  # what OpenTelemetry sees at the start (samplers)
            clean = self._masked_all(clean)
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

    # -- masking (the one mask: agentkit.calls.secrets) ---------------------------------------

    def _convert(self, key: str, value: object) -> AttributeValue | None:
        """*value* as an attribute value (a dict or list as JSON text), a secret-named key's
        value masked; other text is masked when the span ends (:meth:`_masked_all`)."""
        if type(value) is str:
            return mask_value(value) if _secret_key(key) else value
        attribute = _value(value)
        if attribute is None and isinstance(value, dict | list):
            return json.dumps(mask_secrets(value), ensure_ascii=False, default=str)
        return attribute

    def _converted(self, attributes: Mapping[str, object] | None) -> dict[str, AttributeValue]:
        converted: dict[str, AttributeValue] = {}
        for key, value in (attributes or {}).items():
            if value is not None:
                attribute = self._convert(key, value)
                if attribute is not None:
                    converted[key] = attribute
        return converted

    def _masked_all(self, attributes: Mapping[str, AttributeValue]) -> dict[str, AttributeValue]:
        """*attributes* with their text masked by value (plain keys' values as they are)."""
        mask = self._mask
        if mask.known is None and not mask.patterns and not mask.learned:
            return dict(attributes)
        masked = dict(attributes)
        for key, value in attributes.items():
            if key in _PLAIN_KEYS:
                continue
            if type(value) is str:
                if len(value) >= 4:
                    masked[key] = mask.json_text(value)
            elif type(value) is tuple and value and type(value[0]) is str:
                masked[key] = tuple(mask.json_text(str(item)) for item in value)
        return masked

    def _masked_content(self, value: JsonValue) -> str:
        """A content attribute's text: a string masked as it is, anything else as JSON."""
        if isinstance(value, str):
            return self._mask.json_text(value)
        return json.dumps(self._mask.deep(value), ensure_ascii=False, default=str)


class TurnTrace(Trace):
    """The trace of one agent turn: its root is ``invoke_agent {agent id}``."""

    def request(self, text: str) -> None:
        """The user's request (capture on): the agent span's ``input.value`` and
        ``gen_ai.input.messages``."""
        root = self.root
        if self.content(root, sc.INPUT_VALUE, text):
            self.content(root, sc.INPUT_MIME_TYPE, "text/plain")
            self.content(root, sc.INPUT_MESSAGES, text_message("user", text))

    def plan(self, parent: Span | None = None) -> PlanSpan:
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
        parent = parent or self.root
        span = self._start(
            f"plan {agent}", "internal", attributes, parent.span_id, parent._otel, cls=PlanSpan
        )
        assert isinstance(span, PlanSpan)
        return span

    def end(
        self,
        status: str = "completed",
        *,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        error_type: str | None = None,
        message: str = "",
        answer: str | None = None,
    ) -> None:
        """End the turn: ``agentkit.turn.status``, the turn's ``gen_ai.usage.*``, the
        *answer* (capture on: ``output.value`` and ``gen_ai.output.messages``) and, when it
        failed, ``error.type``; then the root ends and the records are kept."""
        if self.ended:
            return
        root = self.root
        if answer is not None and self.content(root, sc.OUTPUT_VALUE, answer):
            self.content(root, sc.OUTPUT_MIME_TYPE, "text/plain")
            reason = "error" if error_type else "stop"
            self.content(root, sc.OUTPUT_MESSAGES, text_message("assistant", answer,
                                                                finish_reason=reason))  # fmt: skip
        root.set(sc.TURN_STATUS, status)
        root.usage(input_tokens, output_tokens)
        super().end(error_type=error_type, message=message)
