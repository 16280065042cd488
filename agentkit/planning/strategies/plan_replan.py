"""Strategy ``plan_replan`` (the seed's): plan everything, then decide again after each step.

The whole plan comes from one ``plan`` call. After every tool or reason step a ``replan`` call
decides: ``continue``, ``replace_remaining`` (new steps replace the pending ones),
``ask_user`` (a question step next) or ``finish`` (an answer step next). An unusable decision
is taken as ``continue`` and said so in the ``replan`` event: a bad replan never fails a turn.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from agentkit.events import AgentEvent, ReplanEvent
from agentkit.memory import PlanStep
from agentkit.models.base import ChatMessage
from agentkit.planning import calls, context, recording, tool_choice
from agentkit.planning.plan import PlanFormatError, parse_replan
from agentkit.planning.prompts import render_prompt
from agentkit.planning.schemas import replan_schema
from agentkit.planning.state import TurnState, planned, skip_pending
from agentkit.planning.steps import execute, run_plan
from agentkit.planning.strategies.base import Strategy

__all__ = ["PlanReplan"]


class PlanReplan(Strategy):
    name = "plan_replan"

    async def start(self, turn: TurnState) -> AsyncIterator[AgentEvent]:
        first = tool_choice.first_action(
            turn, execute, lambda: run_plan(turn, _plan_messages(turn)), then_respond=True
        )
        async for event in first:
            yield event

    async def after_step(self, turn: TurnState, step_id: str) -> AsyncIterator[AgentEvent]:
        async for event in _replan(turn, step_id):
            yield event


def _plan_messages(turn: TurnState) -> list[ChatMessage]:
    state, deps = turn.current, turn.deps
    prompt = render_prompt(
        "plan",
        deps.agent_dir,
        max_steps=str(deps.config.max_steps),
        tools=deps.tools.render() or "(no tools)",
        live_state=context.snapshot(state),
        task_state=context.task_text(turn),
        previous=context.previous_text(turn.previous),
        conversation=context.conversation(turn),
        request=deps.text,
    )
    return context.messages(turn, prompt)


async def _replan(turn: TurnState, step_id: str) -> AsyncIterator[AgentEvent]:
    state, deps = turn.current, turn.deps
    if state.status != "running":
        return
    tools, max_steps = deps.tools, deps.config.max_steps
    prompt = render_prompt(
        "replan",
        deps.agent_dir,
        tools=tools.render(),
        goal=state.goal,
        steps=context.steps_text(state),
        observations=context.observations(state),
        last_step=step_id,
    )
    taken = frozenset(step.id for step in state.steps)
    sent = context.messages(turn, prompt)
    problem, value = await calls.structured(turn, "replan", sent, replan_schema(tools, max_steps))
    if value is None:
        yield ReplanEvent(action="continue", note=f"invalid decision taken as continue: {problem}")
        return
    try:
        decision, new_steps = parse_replan(value, tools, max_steps, taken)
    except PlanFormatError as error:
        yield ReplanEvent(
            action="continue", note=f"invalid decision taken as continue: {error.problem}"
        )
        return
    if decision.action == "continue":
        yield ReplanEvent(action="continue", reason=decision.reason)
        return
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
    pending = sum(1 for step in state.steps if step.status == "pending")
    kept = skip_pending(state, keep=state.current_step_id)
    if len(new_steps) > max_steps:
        yield ReplanEvent(action="continue", note="too many new steps; taken as continue")
        return
    recording.save(turn, state.with_steps((*kept, *new_steps), plan_id=state.plan_id))
    turn.note(
        "REPLAN", f"{decision.action}: {pending} pending step(s) replaced by {len(new_steps)}"
    )
    yield ReplanEvent(
        action=decision.action,
        reason=decision.reason,
        steps=[planned(step) for step in new_steps],
    )
