"""Strategy ``tool_loop``: one action per model call, until the model answers.

An action is a tool call — the backend's native function calling where it has it, a JSON
action (:class:`~agentkit.planning.plan.ActReply`, one schema variant per tool) otherwise — or
the final answer. Each tool call becomes a step of the ExecutionState, so consent, resume and
events are the same as under the other strategies. Bounded by ``max_steps`` tool calls and
``max_iterations`` model calls. A read repeated with the same arguments is not run again: its
result is already known, so the respond stage answers from it (small local models otherwise
repeat one call until the iteration bound).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from pydantic import JsonValue

from agentkit.errors import ModelError
from agentkit.events import AgentEvent, AgentOutputEvent
from agentkit.memory import Observation, PlanStep
from agentkit.models.base import ChatMessage, ToolSpec
from agentkit.planning import calls, context, tool_choice
from agentkit.planning.errors import TurnFailedError
from agentkit.planning.plan import ActReply, PlanFormatError, check_tool_call, parse_act
from agentkit.planning.prompts import render_prompt
from agentkit.planning.schemas import act_schema
from agentkit.planning.state import Stage, Then, Turn
from agentkit.planning.steps import respond, run_step
from agentkit.planning.strategies.base import Strategy
from agentkit.planning.tracer import error_text
from agentkit.tools import mask_secrets

__all__ = ["ToolLoop"]


class ToolLoop(Strategy):
    name = "tool_loop"

    def start(self, turn: Turn) -> Stage:
        return _start

    def after_step(self, turn: Turn, step_id: str) -> Stage:
        return _act_loop

    def resume(self, turn: Turn, step_id: str) -> Stage:
        return _act_loop


async def _start(turn: Turn) -> AsyncIterator[AgentEvent | Then]:
    turn.flow.save(turn.state.resume())
    yield Then(tool_choice.first_action(_act_loop, then_respond=False))


async def _act_loop(turn: Turn) -> AsyncIterator[AgentEvent | Then]:
    """One action: a tool step (then the loop again, after it ran), or the answer."""
    ctx = turn.ctx
    config, tools = ctx.config, ctx.tools
    state = turn.state
    if state.status != "running":
        return  # paused for consent, or finished
    turn.check_cancel()
    turn.outcome.iterations += 1
    if turn.outcome.iterations > config.max_iterations:
        raise TurnFailedError(
            "iteration_limit", f"stopped after {config.max_iterations} iterations"
        )
    sent = _act_messages(turn)
    problem, action = await _act(turn, sent)
    if problem:
        repair = render_prompt("repair", ctx.agent_dir, problem=problem)
        problem, action = await _act(turn, [*sent, ChatMessage(role="user", content=repair)])
    if problem or action is None:
        raise TurnFailedError(
            "invalid_action", f"no usable action after one repair round: {problem}"
        )
    if action.action == "answer":
        turn.outcome.answer = ctx.scrub(action.text.strip())
        yield AgentOutputEvent(text=turn.outcome.answer)
        turn.flow.save(state.complete(turn.outcome.answer))
        return
    tool_steps = [step for step in state.steps if step.type == "tool"]
    if len(tool_steps) >= config.max_steps:
        raise TurnFailedError("step_limit", f"stopped after {config.max_steps} tool calls")
    repeated = next(
        (
            step
            for step in tool_steps
            if step.status == "done"
            and step.tool_name == action.tool_name
            and step.tool_args == action.tool_args
            and not tools.get(action.tool_name).side_effect
        ),
        None,
    )
    if repeated is not None:  # nothing new to fetch: answer from what is known
        answer = PlanStep(
            id=f"answer_{len(state.steps) + 1}",
            type="respond",
            title="Answer",
            instruction="Answer the request from the observations.",
        )
        note = Observation(
            step_id=repeated.id,
            kind="note",
            content=f"{action.tool_name} asked for again with the same arguments",
        )
        steps = (*state.steps, answer)
        turn.flow.save(state.observe(note).with_steps(steps, plan_id=state.plan_id))
        yield Then(respond(answer))
        return
    step = PlanStep(
        id=f"act_{len(state.steps) + 1}",
        type="tool",
        title=action.tool_name,
        tool_name=action.tool_name,
        tool_args=action.tool_args,
    )
    plan_id = state.plan_id or f"loop-{ctx.message_id}"
    turn.flow.save(state.with_steps((*state.steps, step), plan_id=plan_id))
    yield Then(run_step(step))


def _act_messages(turn: Turn) -> list[ChatMessage]:
    state, ctx = turn.state, turn.ctx
    prompt = render_prompt(
        "act",
        ctx.agent_dir,
        tools=ctx.tools.render() or "(no tools)",
        live_state=context.snapshot(state),
        task_state=context.task_text(turn),
        observations=context.observations(state),
        conversation=context.conversation(turn),
        request=ctx.text,
    )
    return context.messages(turn, prompt)


async def _act(turn: Turn, sent: list[ChatMessage]) -> tuple[str, ActReply | None]:
    """One ``act`` call: ``(problem, action)``, the action checked against the registry."""
    model = turn.calls.chat_model()
    if model.native_tools:
        return await _act_native(turn, sent)
    tools = turn.ctx.tools
    problem, value, _ = await calls.structured(turn, "act", sent, act_schema(tools))
    if problem:
        return problem, None
    try:
        return "", parse_act(value, tools)
    except PlanFormatError as error:
        return error.problem, None


async def _act_native(turn: Turn, sent: list[ChatMessage]) -> tuple[str, ActReply | None]:
    registry = turn.ctx.tools
    tools = [registry.get(name) for name in registry.names()]
    specs = [
        ToolSpec(name=tool.name, description=tool.description, parameters=tool.json_schema())
        for tool in tools
    ]
    offered = {"tools": [spec.name for spec in specs]}
    try:
        async with turn.calls.call("act", sent, offered) as call:
            completion = await call.with_tools(specs)
            if completion.tool_calls:
                first = completion.tool_calls[0]  # one action per call: the rest asked again
                shown: JsonValue = {
                    "tool_calls": [mask_secrets({"name": first.name, "arguments": first.arguments})]
                }
                raw = json.dumps(shown)
                try:
                    check_tool_call(registry, first.name, first.arguments)
                except PlanFormatError as error:
                    call.read(raw=raw, error=error.problem)
                    return error.problem, None
                call.read(raw=raw, parsed=shown)
                return "", ActReply(action="tool", tool_name=first.name, tool_args=first.arguments)
            text = completion.text.strip()
            shown_text = turn.ctx.scrub(text)
            call.read(raw=text, parsed=shown_text)
    except (ModelError, TimeoutError) as error:
        return error_text(error), None
    if not text:
        return "the reply had neither a tool call nor text", None
    return "", ActReply(action="answer", text=text)
