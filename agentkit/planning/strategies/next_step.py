"""Strategy ``next_step``: plan one batch at a time, the next one from the last one's results.

A batch runs without replanning; when it is done the next batch is planned from what it found,
and an empty batch means the goal is reached. An answer to a question drops the rest of the
batch it interrupted (those steps were planned before the answer was known).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from agentkit.events import AgentEvent
from agentkit.memory import ExecutionState
from agentkit.models.base import ChatMessage
from agentkit.planning import calls, context, tool_choice
from agentkit.planning.prompts import render_prompt
from agentkit.planning.state import Stage, Then, Turn, skip_pending
from agentkit.planning.steps import execute, plan_event, run_plan
from agentkit.planning.strategies.base import Strategy

__all__ = ["NextStep"]


class NextStep(Strategy):
    name = "next_step"

    def start(self, turn: Turn) -> Stage:
        return tool_choice.first_action(run_plan(_batch_messages), then_respond=True)

    def more_steps(self, turn: Turn) -> Stage | None:
        return _next_batch

    def answered(self, state: ExecutionState) -> ExecutionState:
        return state.with_steps(skip_pending(state), plan_id=state.plan_id)


async def _next_batch(turn: Turn) -> AsyncIterator[AgentEvent | Then]:
    """Plan the next batch from what the last one found; no steps means the goal is met."""
    state = turn.state
    taken = frozenset(step.id for step in state.steps)
    _, steps, repaired = await calls.request_plan(turn, _batch_messages(turn), "next batch", taken)
    if not steps:
        turn.outcome.goal_reached = True
        turn.ctx.note("PLAN", "next batch: none (goal reached)")
    else:
        turn.flow.save(state.with_steps((*state.steps, *steps), plan_id=state.plan_id))
        yield plan_event(turn, state.goal, steps, repaired)
    yield Then(execute)


def _batch_messages(turn: Turn) -> list[ChatMessage]:
    state, ctx = turn.state, turn.ctx
    prompt = render_prompt(
        "next_step",
        ctx.agent_dir,
        max_steps=str(ctx.config.max_steps),
        tools=ctx.tools.render() or "(no tools)",
        live_state=context.snapshot(state),
        task_state=context.task_text(turn),
        steps=context.steps_text(state) or "(none yet)",
        observations=context.observations(state),
        conversation=context.conversation(turn),
        request=ctx.text,
    )
    return context.messages(turn, prompt)
