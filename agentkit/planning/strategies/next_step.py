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
from agentkit.planning import calls, context, recording, tool_choice
from agentkit.planning.prompts import render_prompt
from agentkit.planning.state import TurnState, skip_pending
from agentkit.planning.steps import execute, run_plan
from agentkit.planning.strategies.base import Strategy

__all__ = ["NextStep"]


class NextStep(Strategy):
    name = "next_step"

    async def start(self, turn: TurnState) -> AsyncIterator[AgentEvent]:
        first = tool_choice.first_action(
            turn, execute, lambda: run_plan(turn, _batch_messages(turn)), then_respond=True
        )
        async for event in first:
            yield event

    async def more_steps(self, turn: TurnState) -> AsyncIterator[AgentEvent]:
        """Plan the next batch from what the last one found; no steps means the goal is met."""
        if turn.goal_reached:
            return
        state = turn.current
        taken = frozenset(step.id for step in state.steps)
        _, steps, repaired = await calls.request_plan(
            turn, _batch_messages(turn), "next batch", taken
        )
        if not steps:
            turn.goal_reached = True
            turn.note("PLAN", "next batch: none (goal reached)")
            return
        recording.save(turn, state.with_steps((*state.steps, *steps), plan_id=state.plan_id))
        yield recording.plan_event(turn, state.goal, steps, repaired)

    def answered(self, state: ExecutionState) -> ExecutionState:
        return state.with_steps(skip_pending(state), plan_id=state.plan_id)


def _batch_messages(turn: TurnState) -> list[ChatMessage]:
    state, deps = turn.current, turn.deps
    prompt = render_prompt(
        "next_step",
        deps.agent_dir,
        max_steps=str(deps.config.max_steps),
        tools=deps.tools.render() or "(no tools)",
        live_state=context.snapshot(state),
        task_state=context.task_text(turn),
        steps=context.steps_text(state) or "(none yet)",
        observations=context.observations(state),
        conversation=context.conversation(turn),
        request=deps.text,
    )
    return context.messages(turn, prompt)
