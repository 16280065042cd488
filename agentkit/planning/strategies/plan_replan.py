"""Strategy ``plan_replan`` (the seed's): plan everything, then decide again after each step.

The whole plan comes from one ``plan`` call. After every tool or reason step a ``replan`` call
decides: ``continue``, ``replace_remaining`` (new steps replace the pending ones),
``ask_user`` (a question step next) or ``finish`` (an answer step next). An unusable decision
is taken as ``continue`` and said so in the ``replan`` event: a bad replan never fails a turn.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from agentkit.events import AgentEvent, ReplanEvent
from agentkit.memory import PlanStep
from agentkit.models.base import ChatMessage
from agentkit.planning import context, grounding, reads, replies, tool_choice
from agentkit.planning.graph import Stage, Strategy, Turn
from agentkit.planning.plan import PlanFormatError, parse_replan
from agentkit.planning.prompts import render_prompt
from agentkit.planning.schemas import replan_schema
from agentkit.planning.state import planned, skip_pending
from agentkit.planning.steps import Execute, RunPlan
from agentkit.telemetry import PlanSpan

__all__ = ["PlanReplan", "Replan"]


class PlanReplan(Strategy):
    name = "plan_replan"

    def start(self, turn: Turn) -> Stage:
        return tool_choice.FirstAction(RunPlan(_plan_messages), then_respond=True)

    def after_step(self, turn: Turn, step_id: str) -> Stage:
        return Replan(step_id)


@dataclass(frozen=True, slots=True)
class Replan(Stage):
    """The replan decision after step *step_id*, recorded and announced; then the plan goes
    on (:class:`~agentkit.planning.steps.Execute`)."""

    step_id: str

    async def run(self, turn: Turn) -> AsyncIterator[AgentEvent | Execute]:
        decided = await _replan(turn, self.step_id)
        if decided is not None:
            yield decided
        yield Execute()


def _plan_messages(turn: Turn) -> list[ChatMessage]:
    prompt = render_prompt("plan", turn.ctx.agent_dir, **turn.prompt.values(turn.state))
    return context.messages(turn.ctx, prompt)


async def _replan(turn: Turn, step_id: str) -> ReplanEvent | None:
    """The replan decision after *step_id*, recorded; its event (None: the flow is not
    running). Its plan span says the decision."""
    if turn.state.status != "running":
        return None
    span = turn.trace.plan() if turn.trace is not None else None
    try:
        event = await _decision(turn, step_id, span)
        if span is not None:
            span.decided(event.action, len(event.steps))
        return event
    finally:
        if span is not None:
            span.end()


async def _decision(turn: Turn, step_id: str, span: PlanSpan | None) -> ReplanEvent:
    state, ctx = turn.state, turn.ctx
    tools, max_steps = turn.tools, ctx.config.max_steps
    prompt = render_prompt("replan", ctx.agent_dir, **turn.prompt.values(state, last_step=step_id))
    taken = frozenset(step.id for step in state.steps)
    sent = context.messages(ctx, prompt)
    schema = replan_schema(tools, max_steps, grounding.said(turn))
    problem, value, _ = await replies.structured(turn, "replan", sent, schema, span)
    if value is None:
        return ReplanEvent(action="continue", note=f"invalid decision taken as continue: {problem}")
    try:
        decision, new_steps = parse_replan(value, tools, max_steps, taken)
    except PlanFormatError as error:
        return ReplanEvent(
            action="continue", note=f"invalid decision taken as continue: {error.problem}"
        )
    if decision.action == "continue":
        return ReplanEvent(action="continue", reason=decision.reason)
    suffix = len(state.steps) + 1
    if decision.action == "finish":
        new_steps = (
            PlanStep(
                id=f"finish_{suffix}", type="respond", title="Answer", instruction=decision.reason
            ),
        )
    elif decision.action == "ask_user":
        new_steps = (
            PlanStep(
                id=f"ask_{suffix}", type="ask_user", title="Question", instruction=decision.question
            ),
        )
    new_steps = reads.keep_reads(turn, new_steps, "replan")
    pending = sum(1 for step in state.steps if step.status == "pending")
    kept = skip_pending(state, keep=state.current_step_id)
    if len(new_steps) > max_steps:
        return ReplanEvent(action="continue", note="too many new steps; taken as continue")
    turn.flow.save(state.with_steps((*kept, *new_steps), plan_id=state.plan_id))
    ctx.note("REPLAN", f"{decision.action}: {pending} pending step(s) replaced by {len(new_steps)}")
    return ReplanEvent(
        action=decision.action,
        reason=decision.reason,
        steps=[planned(step, ctx.mask) for step in new_steps],
    )
