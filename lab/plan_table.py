"""What the plan view shows, as plain values: an ExecutionState as a table and its pause.

Invariant: nothing secret leaves here. A step waiting for consent keeps its raw tool arguments
in the stored ExecutionState (the tool needs them once approved), so every argument is masked
with :func:`~agentkit.tools.mask_secrets`, and the secret values found in any step's arguments
are scrubbed from the summaries, observations and questions shown next to them.

"Is it waiting, and for what?" is read from the stored state (its ``status`` and ``waiting``),
never from the widget: :func:`pending_request` derives it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

import pandas as pd
from agentkit import ExecutionState
from agentkit.tools import is_secret_key, mask_secrets, scrub_text
from pydantic import JsonValue

__all__ = [
    "PLAN_COLUMNS",
    "PendingRequest",
    "known_secrets",
    "pending_request",
    "plan_frame",
    "plan_summary",
]

PLAN_COLUMNS = ("step", "type", "status", "title", "tool", "arguments", "observation")
_SUMMARY_CHARS = 160


@dataclass(frozen=True)
class PendingRequest:
    """What a paused flow waits for: an answer to a question, or consent for a tool call."""

    kind: Literal["question", "confirmation"]
    text: str
    step_id: str


def known_secrets(state: ExecutionState) -> list[str]:
    """The string values held under secret-named keys in any step's arguments."""
    found: list[str] = []

    def walk(value: JsonValue) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if is_secret_key(key) and isinstance(item, str):
                    found.append(item)
                else:
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for step in state.steps:
        walk(dict(step.tool_args))
    return found


def _cut(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _SUMMARY_CHARS else flat[: _SUMMARY_CHARS - 1] + "…"


def plan_frame(state: ExecutionState | None) -> pd.DataFrame:
    """One row per plan step: status, tool, masked arguments and what it observed."""
    if state is None or not state.steps:
        return pd.DataFrame(columns=list(PLAN_COLUMNS))
    secrets = known_secrets(state)
    latest: dict[str, str] = {}
    for observation in state.observations:
        if observation.step_id:
            latest[observation.step_id] = observation.content
    rows = []
    for step in state.steps:
        arguments = ""
        if step.type == "tool":
            masked = mask_secrets(dict(step.tool_args), secrets)
            arguments = json.dumps(masked, ensure_ascii=False, sort_keys=True)
        observed = step.error or step.result_summary or latest.get(step.id, "")
        marker = "▶ " if step.id == state.current_step_id and state.is_active else ""
        rows.append(
            {
                "step": marker + step.id,
                "type": step.type,
                "status": step.status,
                "title": step.title,
                "tool": step.tool_name,
                "arguments": arguments,
                "observation": _cut(scrub_text(observed, secrets)),
            }
        )
    return pd.DataFrame(rows, columns=list(PLAN_COLUMNS))


def pending_request(state: ExecutionState | None) -> PendingRequest | None:
    """The question or consent request the flow is paused on, or None when it is not paused."""
    if state is None or state.waiting is None or not state.is_waiting:
        return None
    secrets = known_secrets(state)
    kind: Literal["question", "confirmation"] = (
        "confirmation" if state.status == "waiting_confirmation" else "question"
    )
    text = state.waiting.question or state.waiting.confirmation_target
    return PendingRequest(kind=kind, text=scrub_text(text, secrets), step_id=state.current_step_id)


def plan_summary(state: ExecutionState | None) -> str:
    """One line above the table: goal, status, and the last error if any."""
    if state is None:
        return "No plan yet: send the planner a request."
    line = f"{state.status} · goal: {_cut(state.goal) or '-'}"
    if state.last_error:
        line += f" · last error: {_cut(scrub_text(state.last_error, known_secrets(state)))}"
    return line
