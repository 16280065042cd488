"""W3C Trace Context ``traceparent`` values, without opentelemetry: ``00-{trace}-{span}-{flags}``.

agentkit passes its spans' context to callees that may run without agentkit's process (an MCP
server, an eval worker) as this string; when OpenTelemetry is set up, its configured
propagators write the carrier instead (:meth:`agentkit.telemetry.Span.trace_context`).
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["format_traceparent", "parse_traceparent"]

_TRACEPARENT: Final = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_ZERO_TRACE: Final = "0" * 32
_ZERO_SPAN: Final = "0" * 16


def format_traceparent(trace_id: str, span_id: str, sampled: bool = True) -> str:
    """``00-{trace_id}-{span_id}-01`` (``-00`` when not sampled)."""
    return f"00-{trace_id}-{span_id}-{'01' if sampled else '00'}"


def parse_traceparent(value: str) -> tuple[str, str, bool] | None:
    """(trace id, parent span id, sampled) of a valid ``traceparent``, else None (a version
    other than ``00`` is read by its first four fields, as the W3C spec asks)."""
    match = _TRACEPARENT.match(value.strip().lower())
    if match is None:
        return None
    version, trace_id, span_id, flags = match.groups()
    if version == "ff" or trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN:
        return None
    if version == "00" and len(value.strip()) != 55:
        return None
    return trace_id, span_id, bool(int(flags, 16) & 0x01)
