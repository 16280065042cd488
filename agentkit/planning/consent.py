"""The question asked before a side-effecting call, in the tool's own words.

It names the tool and its arguments (secrets masked) and says what the call does: the
tool's ``consent`` text (``@tool(consent=…)``, or ``"consent"`` in a toolset entry's
``flags`` for an MCP tool), else its description. The frame around those words is a template
in the conversation's language (:func:`agentkit.language.consent`, overridable per agent) and
says nothing about any domain: a note, a reminder or a file are asked about alike.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from agentkit import language
from agentkit.tools import Tool, mask_secrets

__all__ = ["consent_question", "what_it_does"]

_LIMIT = 240


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
    code: str = "en",
    agent_dir: Path | None = None,
) -> str:
    """The consent question for ``tool_name(args)`` in the language *code*; *args* are
    masked here."""
    shown = json.dumps(mask_secrets(dict(args)), ensure_ascii=False, sort_keys=True)
    return language.consent(tool_name, shown, what_it_does(tool), code, agent_dir)
