"""The question asked before a side-effecting call, in the tool's own words.

It names the tool and its arguments (secrets masked) and says what the call does: the
tool's ``consent`` text (``@tool(consent=…)``, or ``"consent"`` in a toolset entry's
``flags`` for an MCP tool), else its description. The frame around those words is in the
conversation's language (Chinese when the request is written in it, else English) and says
nothing about any domain: a note, a reminder or a file are asked about alike.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import JsonValue

from agentkit.tools import Tool, mask_secrets

__all__ = ["consent_question", "conversation_language", "what_it_does"]

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LIMIT = 240


def conversation_language(texts: Sequence[str]) -> str:
    """``zh`` when the latest text with letters in it is mostly Chinese, else ``en``."""
    for text in texts:
        letters = [c for c in text if c.isalpha()]
        if not letters:
            continue  # "2", "?": no language of its own; an earlier message says it
        han = sum(1 for c in letters if _HAN.match(c))
        return "zh" if han * 2 >= len(letters) else "en"
    return "en"


def what_it_does(tool: Tool[Any] | None) -> str:
    """One sentence saying what a call of *tool* does: its consent text, else its
    description (one line, cut), ending with a full stop."""
    if tool is None:
        return ""
    said = " ".join((tool.consent or tool.description).split())
    if len(said) > _LIMIT:
        said = said[: _LIMIT - 3].rstrip() + "..."
    if said and said[-1] not in ".!?\u3002\uff01\uff1f":  # or a Chinese full stop
        said += "."
    return said


def consent_question(
    tool_name: str,
    args: Mapping[str, JsonValue],
    tool: Tool[Any] | None,
    language: str = "en",
) -> str:
    """The consent question for ``tool_name(args)``; *args* are masked here."""
    masked = mask_secrets(dict(args))
    shown = json.dumps(masked, ensure_ascii=False, sort_keys=True)
    does = what_it_does(tool)
    if language == "zh":
        said = f"({does})" if does else ""
        return f"接下来需要运行 {tool_name}, 参数 {shown}. {said}要继续吗? (是 / 否)"
    said = f" {does}" if does else ""
    return f"To continue I need to run {tool_name} with {shown}.{said} Shall I go ahead? (yes / no)"
