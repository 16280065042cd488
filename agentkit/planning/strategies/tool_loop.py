"""Strategy ``tool_loop``: one action per model call, until the model answers.

An action is a tool call — the backend's native function calling where it has it, a JSON
action (:class:`~agentkit.planning.plan.ActReply`, one schema variant per tool) otherwise — or
the final answer. Each tool call becomes a step of the ExecutionState, so consent, resume and
events are the same as under the other strategies. Bounded by ``max_steps`` tool calls and
``max_iterations`` model calls. Every action passes the gate (:mod:`agentkit.planning.gate`)
like any planned step: a read asked for again with no new value, or (router on) a follow-up
the router would not route, is held and the answer comes from what is known (small local
models otherwise repeat one call, or permute its values, until the iteration bound).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

from pydantic import JsonValue

from agentkit.calls.errors import TurnFailedError
from agentkit.calls.tracer import error_text
from agentkit.errors import ModelError
from agentkit.events import AgentEvent, AgentOutputEvent
from agentkit.memory import PlanStep
from agentkit.models.base import ChatMessage, ToolSpec
from agentkit.planning import context, grounding, replies, tool_choice
from agentkit.planning.graph import End, Stage, Strategy, Turn
from agentkit.planning.observed import observed_answer
from agentkit.planning.plan import ActReply, PlanFormatError, check_tool_call, parse_act
from agentkit.planning.prompts import render_prompt
from agentkit.planning.schemas import act_schema, tool_args_schema
from agentkit.planning.steps import run_step

__all__ = ["Act", "ToolLoop"]


class ToolLoop(Strategy):
    name = "tool_loop"

    def start(self, turn: Turn) -> Stage:
        return LoopStart()

    def after_step(self, turn: Turn, step_id: str) -> Stage:
        return Act()


@dataclass(frozen=True, slots=True)
class LoopStart(Stage):
    """The flow runs at once (no plan); the router's first action, else the loop."""

    async def run(self, turn: Turn) -> AsyncIterator[AgentEvent | Stage]:
        turn.flow.save(turn.state.resume())
        yield tool_choice.FirstAction(Act(), then_respond=False)


@dataclass(frozen=True, slots=True)
class Act(Stage):
    """One action: a tool step (then the loop again, after it ran), or the answer."""

    iteration = True

    async def run(self, turn: Turn) -> AsyncIterator[AgentEvent | Stage | End]:
        async for item in _act_loop(turn):
            yield item


async def _act_loop(turn: Turn) -> AsyncIterator[AgentEvent | Stage | End]:
    ctx = turn.ctx
    config = ctx.config
    state = turn.state
    if state.status != "running":  # paused for consent, or finished
        yield End(state.final_answer)
        return
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
        told = observed_answer(turn) if config.answers == "observed" else None
        said = told if told is not None else ctx.scrub(action.text.strip())
        yield AgentOutputEvent(text=said)
        turn.flow.save(state.complete(said))
        yield End(said)
        return
    tool_steps = [step for step in state.steps if step.type == "tool"]
    if len(tool_steps) >= config.max_steps:
        raise TurnFailedError("step_limit", f"stopped after {config.max_steps} tool calls")
    step = PlanStep(
        id=f"act_{len(state.steps) + 1}",
        type="tool",
        title=action.tool_name,
        tool_name=action.tool_name,
        tool_args=action.tool_args,
    )
    plan_id = state.plan_id or f"loop-{ctx.message_id}"
    turn.flow.save(state.with_steps((*state.steps, step), plan_id=plan_id))
    yield run_step(step)


def _act_messages(turn: Turn) -> list[ChatMessage]:
    prompt = render_prompt("act", turn.ctx.agent_dir, **turn.prompt.values(turn.state))
    return context.messages(turn.ctx, prompt)


async def _act(turn: Turn, sent: list[ChatMessage]) -> tuple[str, ActReply | None]:
    """One ``act`` call: ``(problem, action)``, the action checked against the registry."""
    model = turn.tracer.chat_model()
    if model.native_tools:
        return await _act_native(turn, sent)
    tools = turn.tools
    problem, value, _ = await replies.structured(
        turn, "act", sent, act_schema(tools, grounding.said(turn))
    )
    if problem:
        return problem, None
    try:
        return "", parse_act(value, tools)
    except PlanFormatError as error:
        return error.problem, None


async def _act_native(turn: Turn, sent: list[ChatMessage]) -> tuple[str, ActReply | None]:
    registry = turn.tools
    tools = [registry.get(name) for name in registry.names()]
    said = grounding.said(turn)
    specs = [
        ToolSpec(
            name=tool.name,
            description=tool.description,
            parameters=tool.json_schema()
            if said is None
            else tool_args_schema(tool.json_schema(), said),
        )
        for tool in tools
    ]
    offered = {"tools": [spec.name for spec in specs]}
    try:
        async with turn.tracer.call("act", sent, offered) as call:
            completion = await call.with_tools(specs)
            if completion.tool_calls:
                first = completion.tool_calls[0]  # one action per call: the rest asked again
                shown: JsonValue = {
                    "tool_calls": [
                        turn.ctx.mask.json({"name": first.name, "arguments": first.arguments})
                    ]
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
