"""Prompt context: the parts a planner prompt is filled with, each bounded and scrubbed.

The templates themselves are files (:mod:`agentkit.planning.prompts`); this module renders the
values they take: the chat window (:mod:`agentkit.memory.history`), TaskState (left out when a
request is about live configuration, whose stored facts may be stale), the live-state
snapshot, observations, steps and the previous flow. Every message sent is scrubbed of the
tools' secret values.
"""

from __future__ import annotations

from agentkit.memory import ChatHistory, ExecutionState, TaskState
from agentkit.models.base import ChatMessage
from agentkit.planning.state import TurnState, cut

__all__ = [
    "conversation",
    "fallback_answer",
    "messages",
    "observations",
    "previous_text",
    "snapshot",
    "status_text",
    "steps_text",
    "task_text",
]

_CONVERSATION_LINES = 12
_CONVERSATION_LINE_CHARS = 500
_PROMPT_OBSERVATIONS = 16


def messages(turn: TurnState, prompt: str) -> list[ChatMessage]:
    """The system prompt (if any) and the rendered *prompt* as the user's message."""
    sent = [ChatMessage(role="user", content=turn.scrub(prompt))]
    if turn.deps.system_prompt:
        sent.insert(0, ChatMessage(role="system", content=turn.deps.system_prompt))
    return sent


def snapshot(state: ExecutionState) -> str:
    """The live-state tools' fresh results, when this request refreshed them."""
    shown = [obs.content for obs in state.observations if obs.kind == "live_state"]
    return "\n".join(shown) or "(not refreshed for this request)"


def task_text(turn: TurnState, task: TaskState | None = None, live: bool | None = None) -> str:
    task = turn.task if task is None else task
    if turn.live if live is None else live:
        return "(left out: this request is about live configuration)"
    return task.render() if not task.is_empty else "(empty)"


def previous_text(previous: ExecutionState | None) -> str:
    """The flow before this request (a plan may build on it)."""
    if previous is None:
        return "(none)"
    lines = [f"goal: {previous.goal}", f"status: {previous.status}"]
    lines.extend(
        f"- {step.id} [{step.status}] {step.title}: {step.result_summary}"
        for step in previous.steps
    )
    if previous.final_answer:
        lines.append(f"answer: {cut(previous.final_answer, 300)}")
    return "\n".join(lines)


def conversation(turn: TurnState) -> str:
    """The last lines of the chat window, each cut to a bound (built once per turn: the
    history a turn reads does not change while it runs)."""
    cached = turn.conversation_text
    if cached is not None and cached[0] is turn.history:
        return cached[1]
    window = ChatHistory.of(turn.history, turn.deps.max_turns).messages
    lines = [
        f"{m.role.capitalize()}: {cut(m.content, _CONVERSATION_LINE_CHARS)}"
        for m in window[-_CONVERSATION_LINES:]
        if m.role in ("user", "assistant") and m.content
    ]
    text = "\n".join(lines) or "(none)"
    turn.conversation_text = (turn.history, text)
    return text


def observations(state: ExecutionState) -> str:
    shown = state.observations[-_PROMPT_OBSERVATIONS:]
    return (
        "\n".join(f"- [{o.kind}{' ' + o.step_id if o.step_id else ''}] {o.content}" for o in shown)
        or "(none)"
    )


def steps_text(state: ExecutionState) -> str:
    return "\n".join(
        f"- {s.id} [{s.status}] {s.type} {s.tool_name or ''} {s.title}".rstrip()
        for s in state.steps
    )


def fallback_answer(state: ExecutionState) -> str:
    """The answer when the model gave none: what the flow did."""
    done = [step for step in state.steps if step.status == "done" and step.type == "tool"]
    if not done:
        return "Done."
    return "Completed:\n" + "\n".join(f"- {step.title or step.tool_name}" for step in done)


def status_text(turn: TurnState, task: TaskState) -> str:
    """The ``/status`` answer: where the flow stands, and TaskState."""
    state = turn.state
    lines = ["Execution state: none" if state is None else f"Execution state: {state.status}"]
    if state is not None:
        lines.append(f"goal: {state.goal}")
        lines.extend(
            f"- {s.id} [{s.status}] {s.type} {s.tool_name} {s.title}".rstrip() for s in state.steps
        )
        if state.waiting is not None:
            lines.append(f"waiting for: {state.waiting.question}")
        if state.last_error:
            lines.append(f"last error: {state.last_error}")
    lines.append("Task state: " + ("empty" if task.is_empty else "\n" + task.render()))
    return turn.scrub("\n".join(lines))
