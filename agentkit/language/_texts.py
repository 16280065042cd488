"""What agentkit says to the user in its own words — the question for a call's missing
arguments and the consent before a side effect — as templates per language
(``prompts/ask_arguments.en.md``, ``consent.zh.md`` …), which an agent overrides like its
planner prompts (a file of the same name in ``agents/{agentId}/prompts/``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agentkit.language._registry import language
from agentkit.language._script import words
from agentkit.templates import render_template

__all__ = ["answer_line", "ask_arguments", "consent", "field_label", "listed", "which_tool"]

_PACKAGE = "agentkit.language"


def field_label(name: str) -> str:
    """``account_name`` → ``account name``."""
    return " ".join(words(name)) or name


def listed(items: Sequence[str], code: str) -> str:
    """*items* written as a list in the language *code* (``a, b and c``; ``a、b、c``)."""
    lang = language(code)
    if len(items) <= 1:
        return "".join(items)
    return lang.list_separator.join(items[:-1]) + lang.list_last + items[-1]


def _template(kind: str, code: str, agent_dir: Path | None, **values: str) -> str:
    name = f"{kind}.{language(code).code}"
    return render_template(name, agent_dir, _PACKAGE, **values)


def ask_arguments(
    tool: str, does: str, fields: Sequence[str], code: str, agent_dir: Path | None = None
) -> str:
    """The question asking for *fields* of a call of *tool* (which *does* something)."""
    labels = [field_label(name) for name in fields]
    shown = f" ({does.rstrip('.')})" if does else ""
    return _template(
        "ask_arguments", code, agent_dir, tool=tool, does=shown, fields=listed(labels, code)
    )


def consent(tool: str, args: str, does: str, code: str, agent_dir: Path | None = None) -> str:
    """The consent question for ``tool(args)`` (*args* already masked and shown as JSON)."""
    shown = f" {does}" if does else ""
    return _template("consent", code, agent_dir, tool=tool, args=args, does=shown)


def which_tool(options: str, code: str, agent_dir: Path | None = None) -> str:
    """The question asking which of several tools (*options*, one per line) was meant."""
    return _template("which_tool", code, agent_dir, options=options)


def answer_line(kind: str, code: str, agent_dir: Path | None = None, **values: str) -> str:
    """One line of an answer told from what the tools returned: ``answer_empty`` ($what),
    ``answer_list`` ($count, $what, $items), ``answer_done`` ($tool, $result),
    ``answer_failed`` ($tool, $error)."""
    return _template(kind, code, agent_dir, **values)
