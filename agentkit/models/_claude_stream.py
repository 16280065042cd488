"""Reading Claude Code's ``--output-format stream-json`` lines into model events.

Each line is one JSON object; anything else is skipped. Streamed deltas (``stream_event``)
become text and thinking pieces; a whole ``assistant`` message adds what was not streamed
already, and its tool calls; ``result`` carries the usage (cached input counted) or the error.
"""

from __future__ import annotations

import json
from typing import Any

from agentkit.models.base import ModelEvent, TextDelta, ThinkingDelta, ToolCallRequest
from agentkit.types import Usage

__all__ = [
    "as_object",
    "assistant_events",
    "parse_line",
    "result_error",
    "stream_events",
    "usage_of",
]


def parse_line(line: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def as_object(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def stream_events(message: dict[str, Any], streamed: set[str]) -> list[ModelEvent]:
    event = as_object(message.get("event"))
    if event.get("type") != "content_block_delta":
        return []
    delta = as_object(event.get("delta"))
    message_id = str(message.get("api_message_id") or "")
    if delta.get("type") == "text_delta" and delta.get("text"):
        streamed.add(message_id)
        return [TextDelta(text=str(delta["text"]))]
    if delta.get("type") == "thinking_delta" and delta.get("thinking"):
        streamed.add(message_id)
        return [ThinkingDelta(text=str(delta["thinking"]))]
    return []


def assistant_events(message: dict[str, Any], streamed: set[str]) -> list[ModelEvent]:
    already_streamed = str(message.get("id") or "") in streamed
    events: list[ModelEvent] = []
    content = message.get("content")
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and block.get("text") and not already_streamed:
            events.append(TextDelta(text=str(block["text"])))
        elif kind == "thinking" and block.get("thinking") and not already_streamed:
            events.append(ThinkingDelta(text=str(block["thinking"])))
        elif kind == "tool_use":
            events.append(
                ToolCallRequest(
                    id=str(block.get("id") or ""),
                    name=str(block.get("name") or ""),
                    arguments=as_object(block.get("input")),
                )
            )
    return events


def usage_of(usage: dict[str, Any]) -> Usage:
    """Input counts cached tokens too: the API reports them apart from ``input_tokens``."""

    def count(name: str) -> int:
        value = usage.get(name)
        return value if isinstance(value, int) else 0

    return Usage(
        input_tokens=count("input_tokens")
        + count("cache_creation_input_tokens")
        + count("cache_read_input_tokens"),
        output_tokens=count("output_tokens"),
    )


def result_error(message: dict[str, Any]) -> str:
    result = message.get("result")
    if isinstance(result, str) and result:
        return result
    errors = message.get("errors")
    if isinstance(errors, list) and errors:
        return "; ".join(str(error) for error in errors)
    return f"the turn failed ({message.get('subtype') or 'error'})"
