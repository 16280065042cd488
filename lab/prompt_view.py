"""What the prompt lab shows, as plain functions (testable without a kernel).

The trace of a turn (:class:`~agentkit.planning.CallRecord`) and its replay
(:class:`~agentkit.planning.replay.ReplayedCall`) become pandas tables; a plan (the JSON a
``plan`` call returned) becomes one line per step, so an old and a new plan can be read side by
side. Plans are shown as the model wrote them, whether or not they validated: the table is for
reading, validation problems are shown next to it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
from agentkit import Agent
from agentkit.errors import UsageError
from agentkit.models.base import ChatMessage
from agentkit.planning import CallRecord
from agentkit.planning.replay import ReplayedCall
from pydantic import JsonValue

__all__ = [
    "calls_frame",
    "messages_text",
    "plan_lines",
    "plans_side_by_side",
    "replay_frame",
    "call_records_dir",
]

_REPLY_CHARS = 160


def _cut(text: str, limit: int = _REPLY_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def call_records_dir(agent: Agent, conversation_id: str) -> Path:
    """The conversation's folder, where each turn's ``calls.jsonl`` lives."""
    folder = agent.call_records_dir(conversation_id)
    if folder is None:
        raise UsageError("this agent's store keeps no files, so it keeps no call records on disk")
    return folder


def calls_frame(records: Sequence[CallRecord]) -> pd.DataFrame:
    """One row per model call of the turn: purpose, size, reply, tokens, latency, error."""
    return pd.DataFrame(
        [
            {
                "call": index,
                "purpose": record.purpose,
                "messages": len(record.messages),
                "prompt_chars": sum(len(m.get("content", "")) for m in record.messages),
                "reply": _cut(record.raw),
                "input_tokens": record.input_tokens,
                "output_tokens": record.output_tokens,
                "latency_ms": record.latency_ms,
                "error": record.error,
            }
            for index, record in enumerate(records)
        ],
        columns=[
            "call",
            "purpose",
            "messages",
            "prompt_chars",
            "reply",
            "input_tokens",
            "output_tokens",
            "latency_ms",
            "error",
        ],
    )


def messages_text(messages: Sequence[Mapping[str, str] | ChatMessage]) -> str:
    """The exact messages of a call, each under a ``── role ──`` rule."""
    blocks = []
    for message in messages:
        role, content = (
            (message.role, message.content)
            if isinstance(message, ChatMessage)
            else (message.get("role", "?"), message.get("content", ""))
        )
        blocks.append(f"── {role} ──\n{content}")
    return "\n\n".join(blocks)


def _step_line(step: JsonValue) -> str:
    if not isinstance(step, dict):
        return f"(not a step: {_cut(json.dumps(step, ensure_ascii=False), 80)})"
    kind = step.get("type", "?")
    line = f"{step.get('id', '?')} [{kind}]"
    if kind == "tool":
        arguments = json.dumps(step.get("tool_args", {}), ensure_ascii=False, sort_keys=True)
        line += f" {step.get('tool_name', '?')}({_cut(arguments, 80)})"
    title = step.get("title") or step.get("instruction") or ""
    if isinstance(title, str) and title:
        line += f" {_cut(title, 100)}"
    return line


def plan_lines(value: JsonValue) -> list[str]:
    """``goal: …`` then one line per step; a reply that is no plan is one line saying so."""
    if not isinstance(value, dict):
        shown = "(none)" if value is None else _cut(json.dumps(value, ensure_ascii=False), 120)
        return [f"(no plan: {shown})"]
    lines = [f"goal: {_cut(str(value.get('goal', '')), 120)}"]
    steps = value.get("steps", [])
    if not isinstance(steps, list):
        return [*lines, "(steps is not a list)"]
    return lines + [_step_line(step) for step in steps]


def plans_side_by_side(old: JsonValue, new: JsonValue) -> pd.DataFrame:
    """The recorded plan and the replayed one, line by line (the shorter padded with "")."""
    before, after = plan_lines(old), plan_lines(new)
    size = max(len(before), len(after))
    return pd.DataFrame(
        {
            "recorded plan": before + [""] * (size - len(before)),
            "replayed plan": after + [""] * (size - len(after)),
        }
    )


def _reply_text(value: JsonValue, raw: str) -> str:
    if isinstance(value, dict | list):
        return _cut(json.dumps(value, ensure_ascii=False))
    return _cut(raw)


def replay_frame(replayed: Sequence[ReplayedCall]) -> pd.DataFrame:
    """One row per replayed call: recorded reply vs new reply, and what went wrong."""
    return pd.DataFrame(
        [
            {
                "call": call.index,
                "purpose": call.purpose,
                "template": call.template or "(as recorded)",
                "recorded reply": _reply_text(call.old_parsed, call.old_raw),
                "new reply": _reply_text(call.new_parsed, call.new_raw),
                "problem": call.problem,
                "error": call.error,
                "repaired": call.repaired,
                "input_tokens": call.input_tokens,
                "output_tokens": call.output_tokens,
                "latency_ms": call.latency_ms,
            }
            for call in replayed
        ],
        columns=[
            "call",
            "purpose",
            "template",
            "recorded reply",
            "new reply",
            "problem",
            "error",
            "repaired",
            "input_tokens",
            "output_tokens",
            "latency_ms",
        ],
    )
