"""Prompt context: the parts a planner prompt is filled with, each bounded and scrubbed.

The templates themselves are files (:mod:`agentkit.planning.prompts`); this module renders the
values they take: the chat window (:mod:`agentkit.memory.history`), TaskState (left out when a
request is about live configuration, whose stored facts may be stale), the live-state
snapshot, observations, steps and the previous flow. Every message sent is scrubbed of the
tools' secret values.
"""

from __future__ import annotations

from agentkit.memory import ExecutionState, TaskState
from agentkit.models.base import ChatMessage
from agentkit.planning.state import Turn, cut

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

_PROMPT_OBSERVATIONS = 16


def messages(turn: Turn, prompt: str) -> list[ChatMessage]:
    """The system prompt (if any) and the rendered *prompt* as the user's message."""
    ctx = turn.ctx
    sent = [ChatMessage(role="user", content=ctx.scrub(prompt))]
    if ctx.system_prompt:
        sent.insert(0, ChatMessage(role="system", content=ctx.system_prompt))
    return sent


def snapshot(state: ExecutionState) -> str:
    """The live-state tools' fresh results, when this request refreshed them."""
    shown = [obs.content for obs in state.observations if obs.kind == "live_state"]
    return "\n".join(shown) or "(not refreshed for this request)"


def task_text(turn: Turn, task: TaskState | None = None, live: bool | None = None) -> str:
    task = turn.ctx.task.value if task is None else task
    if turn.request.live if live is None else live:
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


def conversation(turn: Turn) -> str:
    """The last lines of the chat window, each cut to a bound (built once per turn: the
    history a turn reads does not change while it runs)."""
    return turn.ctx.conversation


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


def status_text(turn: Turn, task: TaskState) -> str:
    """The ``/status`` answer: where the flow stands, and TaskState."""
    state = turn.flow.state
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
    return turn.ctx.scrub("\n".join(lines))
