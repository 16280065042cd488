"""``Telemetry``: one per agent runtime — starts its traces and keeps the last few in memory."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping

from agentkit.telemetry import semconv as sc
from agentkit.telemetry._records import SpanKind, SpanRecord
from agentkit.telemetry._spans import Secrets, Span, Trace, TurnTrace, current_span

__all__ = ["Telemetry"]


class Telemetry:
    """Starts an agent's traces and keeps the span records of its last *keep* traces.

    The records are agentkit's own (TraceView reads them): they are the same whether or not
    an OpenTelemetry provider is configured. ``agent_id`` / ``agent_name`` name the agent on
    every turn's root span; a Telemetry that runs no turns (an eval sweep) may leave them out.
    """

    def __init__(
        self, *, agent_id: str | None = None, agent_name: str | None = None, keep: int = 256
    ) -> None:
        if keep < 1:
            raise ValueError("keep must be at least 1")
        self.agent_id = agent_id
        self.agent_name = agent_name
        self.keep = keep
        self._records: OrderedDict[str, list[SpanRecord]] = OrderedDict()
        self._messages: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    # -- starting traces -----------------------------------------------------------------------

    def turn(
        self,
        *,
        conversation_id: str,
        message_id: str,
        scenario: str | None = None,
        provider: str | None = None,
        model: str | None = None,
        secrets: Secrets = (),
        request: str | None = None,
    ) -> TurnTrace:
        """Start a turn's trace: its root ``invoke_agent {agent id}`` (INTERNAL) is started now.

        The root's parent is the span activated around the call, if any (an eval run), else
        the caller's current OpenTelemetry span, if any; otherwise the turn is a new trace.
        *secrets* masks every string attribute, event, status message and content of the
        trace by value: the turn's :class:`~agentkit.tools.SecretMask` (asked when each span
        ends, so what the turn learns on the way counts), or secret values (a list, or a
        function returning them, called once when first needed). *request* is the user's
        text, recorded on the root with content capture on (:meth:`TurnTrace.request`).
        """
        agent = self.agent_id or "agent"
        attributes: dict[str, object] = {
            sc.OPERATION_NAME: "invoke_agent",
            sc.PROVIDER_NAME: provider,
            sc.AGENT_ID: self.agent_id,
            sc.AGENT_NAME: self.agent_name,
            sc.CONVERSATION_ID: conversation_id,
            sc.REQUEST_MODEL: model,
            sc.SCENARIO: scenario,
            sc.MESSAGE_ID: message_id,
        }
        trace = TurnTrace(
            self,
            f"invoke_agent {agent}",
            attributes=attributes,
            secrets=secrets,
            message_id=message_id,
        )
        if request is not None:
            trace.request(request)
        return trace

    def workflow(
        self,
        name: str,
        *,
        attributes: Mapping[str, object] | None = None,
        traceparent: str | Mapping[str, str] | None = None,
    ) -> Trace:
        """Start a workflow's trace: its root ``invoke_workflow {name}`` (an eval sweep)."""
        root: dict[str, object] = {sc.OPERATION_NAME: "invoke_workflow", sc.WORKFLOW_NAME: name}
        root.update(attributes or {})
        return Trace(self, f"invoke_workflow {name}", attributes=root, traceparent=traceparent)

    def trace(
        self,
        name: str,
        *,
        kind: SpanKind = "internal",
        attributes: Mapping[str, object] | None = None,
        traceparent: str | Mapping[str, str] | None = None,
        secrets: Secrets = (),
    ) -> Trace:
        """Start a trace whose root is *name*: a child of *traceparent* (a W3C ``traceparent``
        string or carrier, e.g. an eval run in a worker process) when one is given, else of
        the activated span or the caller's OpenTelemetry span, like :meth:`turn`."""
        return Trace(
            self, name, kind=kind, attributes=attributes, traceparent=traceparent, secrets=secrets
        )

    @staticmethod
    def current() -> Span | None:
        """The span activated (:meth:`Span.activate`) in this context, if any."""
        return current_span()

    # -- what was recorded ---------------------------------------------------------------------

    def recorded(self, trace_id: str) -> list[SpanRecord] | None:
        """The finished spans kept for *trace_id*, in start order (None: not kept). Several
        traces may share one trace id (an eval run's turns are children of the run span)."""
        with self._lock:
            records = self._records.get(trace_id)
            return None if records is None else sorted(records, key=_start)

    def turn_records(self, message_id: str) -> list[SpanRecord] | None:
        """The spans of the turn that answered *message_id* (the user message's id)."""
        with self._lock:
            trace_id = self._messages.get(message_id)
        return None if trace_id is None else self.recorded(trace_id)

    def trace_id_of(self, message_id: str) -> str | None:
        """The trace id of the turn that answered *message_id*, while it is kept."""
        with self._lock:
            return self._messages.get(message_id)

    def trace_ids(self) -> list[str]:
        """The kept trace ids, oldest first."""
        with self._lock:
            return list(self._records)

    def clear(self) -> None:
        with self._lock:
            self._records.clear()
            self._messages.clear()

    def _keep(self, trace_id: str, records: list[SpanRecord], message_id: str | None) -> None:
        with self._lock:
            kept = self._records.get(trace_id)
            if kept is None:
                self._records[trace_id] = list(records)
                while len(self._records) > self.keep:
                    self._records.popitem(last=False)
            else:
                kept.extend(records)
                self._records.move_to_end(trace_id)
            if message_id is not None:
                self._messages[message_id] = trace_id
                while len(self._messages) > self.keep:
                    self._messages.popitem(last=False)


def _start(record: SpanRecord) -> int:
    return record.start_ns
