"""What a test double is asked: one :class:`ModelRequest` per model call.

:class:`~agentkit.models.scripted.ScriptedModel` and
:class:`~agentkit.models.function.FunctionModel` record every call as one of these (a
function model also passes it to its function), so a test reads what a model was sent the
same way whichever double it used.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from agentkit.models.base import ChatMessage, JsonSchema, Purpose, ToolCallRequest, ToolSpec

__all__ = ["ModelRequest", "estimate_tokens", "tool_calls_of"]

_NO_SETTINGS: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True)
class ModelRequest:
    """One model call: why it was made, what was sent, and what the reply must be."""

    #: why the caller asks: ``chat``, ``plan``, ``replan``, ``respond``, ``route``, ``summarize``…
    purpose: Purpose
    #: the messages sent, in order (each has ``role`` and ``content``)
    messages: tuple[ChatMessage, ...]
    #: the JSON schema the reply must follow, or None for free text
    json_schema: JsonSchema | None = None
    #: the tools offered for native function calling (name, description, argument schema)
    tools: tuple[ToolSpec, ...] = ()
    #: the model's settings (a :class:`FunctionModel`'s ``settings``), read-only
    settings: Mapping[str, Any] = field(default_factory=lambda: _NO_SETTINGS)
    #: the call's number on its model, from 0
    index: int = 0

    @property
    def schema(self) -> JsonSchema | None:
        """The schema asked for (:attr:`json_schema`), or ``{"tools": […]}`` for a tool call."""
        if self.tools:
            return {"tools": [tool.model_dump() for tool in self.tools]}
        return self.json_schema

    @property
    def prompt(self) -> str:
        """The last user message's text ("" when there is none)."""
        for message in reversed(self.messages):
            if message.role == "user":
                return message.content
        return ""

    @property
    def system(self) -> str:
        """The system message's text ("" when there is none)."""
        return next((m.content for m in self.messages if m.role == "system"), "")

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The names of the tools offered natively, or listed in a plan schema's ``tool_name``."""
        if self.tools:
            return tuple(tool.name for tool in self.tools)
        return tuple(sorted(_enum_values(self.json_schema, "tool_name")))


def _enum_values(schema: object, key: str) -> set[str]:
    """Every string in an ``enum`` of a property named *key*, anywhere in *schema*."""
    found: set[str] = set()
    if isinstance(schema, dict):
        for name, value in schema.items():
            if name == key and isinstance(value, dict):
                found.update(v for v in _enums(value) if isinstance(v, str))
            else:
                found |= _enum_values(value, key)
    elif isinstance(schema, list):
        for item in schema:
            found |= _enum_values(item, key)
    return found


def _enums(schema: dict[str, Any]) -> list[object]:
    values: list[object] = list(schema.get("enum", []))
    if "const" in schema:
        values.append(schema["const"])
    for option in schema.get("anyOf", []) + schema.get("oneOf", []):
        if isinstance(option, dict):
            values.extend(_enums(option))
    return values


_CJK = re.compile("[\u3000-\u9fff\uac00-\ud7af]")


def estimate_tokens(text: str) -> int:
    """A rough count for usage figures: about 4 characters per token, CJK 1 per character."""
    if text.isascii():  # the common case, without a pass over the characters in Python
        return (len(text) + 3) // 4
    cjk = len(_CJK.findall(text))
    return cjk + (len(text) - cjk + 3) // 4


def tool_calls_of(text: str) -> tuple[ToolCallRequest, ...] | None:
    """The calls of a ``{"tool_calls": [{"name": …, "arguments": {…}}, …]}`` reply; None for
    any other reply."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(value, dict) or set(value) != {"tool_calls"}:
        return None
    raw_calls = value["tool_calls"]
    if not isinstance(raw_calls, list):
        return None
    calls: list[ToolCallRequest] = []
    for index, call in enumerate(raw_calls):
        if not isinstance(call, dict):
            return None
        arguments = call.get("arguments", {})
        calls.append(
            ToolCallRequest(
                id=str(call.get("id") or f"call_{index + 1}"),
                name=str(call.get("name", "")),
                arguments=arguments if isinstance(arguments, dict) else {"_raw": arguments},
            )
        )
    return tuple(calls)
