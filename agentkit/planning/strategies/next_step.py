"""Strategy ``next_step``: plan one batch at a time, the next one from the last one's results.

A batch runs without replanning; when it is done the next batch is planned from what it found,
and an empty batch means the goal is reached. An answer to a question drops the rest of the
batch it interrupted (those steps were planned before the answer was known).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from agentkit.events import AgentEvent
from agentkit.memory import ExecutionState
from agentkit.models.base import ChatMessage
from agentkit.planning import context, replies, tool_choice
from agentkit.planning.graph import Stage, Strategy, Turn
from agentkit.planning.prompts import render_prompt
from agentkit.planning.state import skip_pending
from agentkit.planning.steps import Execute, Finish, RunPlan, plan_event

__all__ = ["NextBatch", "NextStep"]


class NextStep(Strategy):
    name = "next_step"

    def start(self, turn: Turn) -> Stage:
        return tool_choice.FirstAction(RunPlan(_batch_messages), then_respond=True)

    def more_steps(self, turn: Turn) -> Stage | None:
        return NextBatch()

    def answered(self, state: ExecutionState) -> ExecutionState:
        return state.with_steps(skip_pending(state), plan_id=state.plan_id)


@dataclass(frozen=True, slots=True)
class NextBatch(Stage):
    """Plan the next batch from what the last one found; no steps means the goal is met."""

    async def run(self, turn: Turn) -> AsyncIterator[AgentEvent | Execute | Finish]:
        state = turn.state
        taken = frozenset(step.id for step in state.steps)
        messages = _batch_messages(turn)
        _, steps, repaired = await replies.request_plan(turn, messages, "next batch", taken)
        if not steps:
            turn.ctx.note("PLAN", "next batch: none (goal reached)")
            yield Finish()
            return
        turn.flow.save(state.with_steps((*state.steps, *steps), plan_id=state.plan_id))
        yield plan_event(turn, state.goal, steps, repaired)
        yield Execute()


def _batch_messages(turn: Turn) -> list[ChatMessage]:
    prompt = render_prompt("next_step", turn.ctx.agent_dir, **turn.prompt.values(turn.state))
    return context.messages(turn.ctx, prompt)
