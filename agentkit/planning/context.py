"""Prompt context: what every planner prompt of a turn is filled with, assembled in one place.

The templates themselves are files (:mod:`agentkit.planning.prompts`). :class:`PromptContext`
holds the parts that do not change while a turn runs — the tool listing, TaskState (left out
when a request is about live configuration, whose stored facts may be stale), the previous
flow, the conversation lines, the request — built once per turn at intake and once more when
routing has decided what the request is; :meth:`PromptContext.values` adds what the
ExecutionState says now (live-state snapshot, steps, observations, goal). Every message sent
is masked of the secrets the turn knows.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from agentkit.memory import ExecutionState, TaskState
from agentkit.models.base import ChatMessage
from agentkit.planning.state import Intake, Request, TurnContext, cut
from agentkit.tools import ToolRegistry

__all__ = [
    "PromptContext",
    "fallback_answer",
    "messages",
    "observations",
    "previous_text",
    "snapshot",
    "status_text",
    "steps_text",
]

_PROMPT_OBSERVATIONS = 16
_LEFT_OUT = "(left out: this request is about live configuration)"


@dataclass(frozen=True, slots=True)
class PromptContext:
    """The parts of a turn's prompts that do not change while it runs (see the module
    docstring)."""

    max_steps: str
    tools: str
    task_state: str
    previous: str
    conversation: str
    request: str
    #: TaskState as rendered, kept for a request that turns out not to be live
    task_rendered: str

    @classmethod
    def build(cls, ctx: TurnContext, intake: Intake, tools: ToolRegistry) -> PromptContext:
        task = intake.task.value
        rendered = task.render() if not task.is_empty else "(empty)"
        return cls(
            max_steps=str(ctx.config.max_steps),
            tools=tools.render() or "(no tools)",
            task_state=rendered,
            previous="(none)",
            conversation=intake.conversation,
            request=ctx.said,  # a decision: its display line, as the history shows it
            task_rendered=rendered,
        )

    def for_request(self, request: Request) -> PromptContext:
        """The context once routing decided what the request is."""
        return dataclasses.replace(
            self,
            task_state=_LEFT_OUT if request.live else self.task_rendered,
            previous=previous_text(request.previous),
        )

    def values(self, state: ExecutionState, **more: str) -> dict[str, str]:
        """Every placeholder a planner template may name, for the flow *state* (a template
        uses those it names: :func:`~agentkit.planning.prompts.render_prompt`)."""
        return {
            "max_steps": self.max_steps,
            "tools": self.tools,
            "task_state": self.task_state,
            "previous": self.previous,
            "conversation": self.conversation,
            "request": self.request,
            "live_state": snapshot(state),
            "steps": steps_text(state),
            "observations": observations(state),
            "goal": state.goal,
            **more,
        }


def messages(ctx: TurnContext, prompt: str) -> list[ChatMessage]:
    """The system prompt (if any) and the rendered *prompt* as the user's message: the
    secrets the store holds and the turn has planned with masked, but not what the secret
    patterns match (the model needs a key the user just typed to plan with it; the call's
    record and span are masked whole)."""
    sent = [ChatMessage(role="user", content=ctx.mask.values_only().text(prompt))]
    if ctx.system_prompt:
        sent.insert(0, ChatMessage(role="system", content=ctx.system_prompt))
    return sent


def snapshot(state: ExecutionState) -> str:
    """The live-state tools' fresh results, when this request refreshed them."""
    shown = [obs.content for obs in state.observations if obs.kind == "live_state"]
    return "\n".join(shown) or "(not refreshed for this request)"


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


def observations(state: ExecutionState) -> str:
    shown = state.observations[-_PROMPT_OBSERVATIONS:]
    return (
        "\n".join(f"- [{o.kind}{' ' + o.step_id if o.step_id else ''}] {o.content}" for o in shown)
        or "(none)"
    )


def steps_text(state: ExecutionState) -> str:
    return (
        "\n".join(
            f"- {s.id} [{s.status}] {s.type} {s.tool_name or ''} {s.title}".rstrip()
            for s in state.steps
        )
        or "(none yet)"
    )


def fallback_answer(state: ExecutionState) -> str:
    """The answer when the model gave none: what the flow did."""
    done = [step for step in state.steps if step.status == "done" and step.type == "tool"]
    if not done:
        return "Done."
    return "Completed:\n" + "\n".join(f"- {step.title or step.tool_name}" for step in done)


def status_text(ctx: TurnContext, state: ExecutionState | None, task: TaskState) -> str:
    """The ``/status`` answer: where the flow stands, and TaskState."""
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
    return ctx.scrub("\n".join(lines))
