"""An answer told from what the tools returned (``planner.answers: observed``).

Why: a small model asked to answer from a tool's result ignores or contradicts it ("My name is
[Your Name]…" after ``{"items": []}``), so under the ``small_model`` preset the answer of a
turn that ran tools is rendered from their results — lists with their count, records by their
name and short fields, "none found" for an empty list, "done" with the record a write returned,
the error of a call that failed — in the conversation's language (templates
``answer_*.{en,zh}.md`` of :mod:`agentkit.language`, overridable per agent). Nothing in it
comes from anywhere but the results, so it cannot invent or contradict them. A turn that ran
no tool is answered by the model as before.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import JsonValue

from agentkit import language
from agentkit.planning.graph import Turn

__all__ = ["observed_answer", "render_result"]

#: the fields that name a record, in the order one is looked for
_NAMES = ("title", "name", "label", "summary", "text", "id")
#: at most this many items of a list are shown, this many other fields of a record
_ITEMS = 20
_FIELDS = 4
_VALUE_CHARS = 60


def _short(value: JsonValue) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= _VALUE_CHARS else text[: _VALUE_CHARS - 3] + "..."


def _record(record: Mapping[str, JsonValue]) -> str:
    """A record in one line: its name, then a few short scalar fields."""
    name_key = next((k for k in _NAMES if isinstance(record.get(k), str | int)), None)
    scalars = [
        (k, v)
        for k, v in record.items()
        if k != name_key and isinstance(v, str | int | float | bool) and v != ""
    ]
    shown = ", ".join(f"{k}: {_short(v)}" for k, v in scalars[:_FIELDS])
    if name_key is None:
        return shown or _short(dict(record))
    head = _short(record[name_key])
    return f"{head} ({shown})" if shown else head


def _item(value: JsonValue) -> str:
    return _record(value) if isinstance(value, dict) else _short(value)


def _what(key: str) -> str:
    return " ".join(language.words(key)) or key


def render_result(
    tool: str, result: str, ok: bool, code: str, agent_dir: Path | None = None
) -> str:
    """What one call returned, told in the language *code*."""
    try:
        value: JsonValue = json.loads(result)
    except ValueError:
        value = result.strip()
    if not ok or (isinstance(value, dict) and set(value) == {"error"}):
        error = _short((value.get("error") if isinstance(value, dict) else value) or "")
        return language.answer_line("answer_failed", code, agent_dir, tool=tool, error=error)
    lists: dict[str, list[JsonValue]] = {}
    if isinstance(value, dict) and len(value) == 1:  # {"notes": [...]}: a list, not a record
        lists = {k: v for k, v in value.items() if isinstance(v, list)}
    if isinstance(value, list):
        lists = {tool: value}
    if len(lists) == 1:
        key, items = next(iter(lists.items()))
        if not items:
            return language.answer_line("answer_empty", code, agent_dir, what=_what(key))
        shown = [f"- {_item(item)}" for item in items[:_ITEMS]]
        if len(items) > _ITEMS:
            shown.append(f"- … (+{len(items) - _ITEMS})")
        return language.answer_line(
            "answer_list",
            code,
            agent_dir,
            count=str(len(items)),
            what=_what(key),
            items="\n".join(shown),
        )
    if isinstance(value, dict):
        return _record(value)
    return _short(value)


def _calls(turn: Turn) -> Sequence[tuple[str, str, bool]]:
    """This flow's tool calls that ran: ``(tool, result, ok)`` in order."""
    state = turn.state
    results = {o.step_id: o.content for o in state.observations if o.kind == "tool_result"}
    return [
        (step.tool_name, results[step.id], step.status == "done")
        for step in state.steps
        if step.type == "tool" and step.status in ("done", "failed") and step.id in results
    ]


def observed_answer(turn: Turn) -> str | None:
    """The answer from what this flow's tools returned, or None when none ran."""
    calls = _calls(turn)
    if not calls:
        return None
    ctx = turn.ctx
    user = [m.content for m in reversed(turn.intake.window) if m.role == "user"]
    code = language.detect([ctx.text, *user])
    writes = turn.tools
    parts = []
    for tool, result, ok in calls:
        told = render_result(tool, result, ok, code, ctx.agent_dir)
        side_effect = tool in writes and writes.get(tool).side_effect
        if ok and side_effect:
            done = {"tool": tool, "result": f"\n{told}"}
            told = language.answer_line("answer_done", code, ctx.agent_dir, **done)
        parts.append(told)
    return ctx.scrub("\n\n".join(parts))
