"""What the test doubles share about a request: token estimates and the JSON tool-call form.

:class:`~agentkit.models.base.ModelRequest` (re-exported here) is the one value every model
call is; :class:`~agentkit.models.scripted.ScriptedModel` and
:class:`~agentkit.models.function.FunctionModel` record each one they get.
"""

from __future__ import annotations

import json

from agentkit.language import count_cjk
from agentkit.models.base import ModelRequest, ToolCallRequest

__all__ = ["ModelRequest", "estimate_tokens", "tool_calls_of"]


def estimate_tokens(text: str) -> int:
    """A rough count for usage figures: about 4 characters per token, CJK 1 per character."""
    if text.isascii():  # the common case, without a pass over the characters in Python
        return (len(text) + 3) // 4
    cjk = count_cjk(text)
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
