"""Model-call contents in the GenAI semantic conventions' shape.

The conventions (``gen_ai.input.messages``, ``gen_ai.output.messages``,
``gen_ai.system_instructions``; JSON schemas published with semantic-conventions v1.41.0, and
since then in the GenAI conventions' own repository) write a message as
``{"role", "parts": [...]}``: a ``text`` part for text, a ``tool_call`` part for a call the
model asked for, a ``tool_call_response`` part for a tool's result sent back; an output message
also names its ``finish_reason``. Viewers read this shape (Phoenix turns it into its chat
cards and drops what does not validate), so agentkit's ``{"role", "content"}`` messages are
written in it here, in one place, for every model call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from pydantic import JsonValue

__all__ = ["ToolCallPart", "input_messages", "output_messages", "text_message"]

#: the conventions' finish reasons for the backends' own words
_FINISH: Final = {
    "stop": "stop",
    "end_turn": "stop",
    "length": "length",
    "max_tokens": "length",
    "tool_calls": "tool_call",
    "tool_use": "tool_call",
    "content_filter": "content_filter",
}


@dataclass(frozen=True, slots=True)
class ToolCallPart:
    """A tool call the model asked for (its arguments as the model gave them)."""

    name: str
    arguments: JsonValue = None
    id: str | None = None


def _text(content: str) -> dict[str, JsonValue]:
    return {"type": "text", "content": content}


def input_messages(
    messages: Iterable[Mapping[str, str]],
) -> tuple[list[JsonValue], list[JsonValue]]:
    """``(system instructions, input messages)`` for the ``{"role", "content"}`` messages a
    model was sent: the leading system messages are the instructions (text parts), the rest
    the chat history; a ``tool`` message is a ``tool_call_response`` part."""
    instructions: list[JsonValue] = []
    history: list[JsonValue] = []
    for message in messages:
        role, content = message.get("role", "user"), message.get("content", "")
        if role == "system" and not history:
            instructions.append(_text(content))
        elif role == "tool":
            part: dict[str, JsonValue] = {"type": "tool_call_response", "response": content}
            history.append({"role": "tool", "parts": [part]})
        else:
            history.append({"role": role, "parts": [_text(content)]})
    return instructions, history


def output_messages(
    text: str, *, tool_calls: Sequence[ToolCallPart] = (), finish_reason: str = "stop"
) -> list[JsonValue]:
    """The model's reply as one assistant output message: its text (when any) and the tool
    calls it asked for."""
    parts: list[JsonValue] = [_text(text)] if text or not tool_calls else []
    for call in tool_calls:
        parts.append({"type": "tool_call", "id": call.id, "name": call.name,
                      "arguments": call.arguments})  # fmt: skip
    reason = _FINISH.get(finish_reason, finish_reason or "stop")
    return [{"role": "assistant", "parts": parts, "finish_reason": reason}]


def text_message(role: str, text: str, *, finish_reason: str | None = None) -> list[JsonValue]:
    """One message of one text part (an agent span's request or answer)."""
    message: dict[str, JsonValue] = {"role": role, "parts": [_text(text)]}
    if finish_reason is not None:
        message["finish_reason"] = finish_reason
    return [message]
