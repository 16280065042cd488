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

import asyncio
import json
import time
from collections.abc import AsyncIterator

from agentkit.errors import ModelError
from agentkit.events import AgentEvent, AgentOutputEvent
from agentkit.memory import Observation, PlanStep
from agentkit.models.base import ChatMessage, ChatModel, ToolSpec
from agentkit.planning import calls, context, recording, tool_choice
from agentkit.planning.plan import ActReply, PlanFormatError, check_tool_call, parse_act
from agentkit.planning.prompts import render_prompt
from agentkit.planning.schemas import act_schema
from agentkit.planning.state import TurnFailedError, TurnState
from agentkit.planning.steps import respond, run_step
from agentkit.planning.strategies.base import Strategy
from agentkit.planning.trace import CallRecord
from agentkit.tools import mask_secrets

__all__ = ["ToolLoop"]


class ToolLoop(Strategy):
    name = "tool_loop"

    async def start(self, turn: TurnState) -> AsyncIterator[AgentEvent]:
        recording.save(turn, turn.current.resume())
        first = tool_choice.first_action(
            turn, _act_loop, lambda: _act_loop(turn), then_respond=False
        )
        async for event in first:
            yield event

    async def resume(self, turn: TurnState, step_id: str) -> AsyncIterator[AgentEvent]:
        async for event in _act_loop(turn):
            yield event


async def _act_loop(turn: TurnState) -> AsyncIterator[AgentEvent]:
    config, tools = turn.deps.config, turn.deps.tools
    iterations = 0
    while True:
        state = turn.current
        if state.status != "running":
            return  # paused for consent, or finished
        turn.check_cancel()
        iterations += 1
        if iterations > config.max_iterations:
            raise TurnFailedError(
                "iteration_limit", f"stopped after {config.max_iterations} iterations"
            )
        sent = _act_messages(turn)
        problem, action = await _act(turn, sent)
        if problem:
            repair = render_prompt("repair", turn.deps.agent_dir, problem=problem)
            problem, action = await _act(turn, [*sent, ChatMessage(role="user", content=repair)])
        if problem or action is None:
            raise TurnFailedError(
                "invalid_action", f"no usable action after one repair round: {problem}"
            )
        if action.action == "answer":
            turn.answer = turn.scrub(action.text.strip())
            yield AgentOutputEvent(text=turn.answer)
            recording.save(turn, state.complete(turn.answer))
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
            recording.save(turn, state.observe(note).with_steps(steps, plan_id=state.plan_id))
            async for event in respond(turn, answer):
                yield event
            return
        step = PlanStep(
            id=f"act_{len(state.steps) + 1}",
            type="tool",
            title=action.tool_name,
            tool_name=action.tool_name,
            tool_args=action.tool_args,
        )
        plan_id = state.plan_id or f"loop-{turn.message_id}"
        recording.save(turn, state.with_steps((*state.steps, step), plan_id=plan_id))
        async for event in run_step(turn, step):
            yield event


def _act_messages(turn: TurnState) -> list[ChatMessage]:
    state, deps = turn.current, turn.deps
    prompt = render_prompt(
        "act",
        deps.agent_dir,
        tools=deps.tools.render() or "(no tools)",
        live_state=context.snapshot(state),
        task_state=context.task_text(turn),
        observations=context.observations(state),
        conversation=context.conversation(turn),
        request=deps.text,
    )
    return context.messages(turn, prompt)


async def _act(turn: TurnState, sent: list[ChatMessage]) -> tuple[str, ActReply | None]:
    """One ``act`` call: ``(problem, action)``, the action checked against the registry."""
    model = calls.chat_model(turn)
    if model.native_tools:
        return await _act_native(turn, model, sent)
    tools = turn.deps.tools
    problem, value = await calls.structured(turn, "act", sent, act_schema(tools))
    if problem:
        return problem, None
    try:
        return "", parse_act(value, tools)
    except PlanFormatError as error:
        return error.problem, None


async def _act_native(
    turn: TurnState, model: ChatModel, sent: list[ChatMessage]
) -> tuple[str, ActReply | None]:
    registry = turn.deps.tools
    tools = [registry.get(name) for name in registry.names()]
    specs = [
        ToolSpec(name=tool.name, description=tool.description, parameters=tool.json_schema())
        for tool in tools
    ]
    started = time.perf_counter()
    record = CallRecord(
        purpose="act",
        messages=[m.model_dump() for m in sent],
        schema_={"tools": [spec.name for spec in specs]},
    )
    try:
        async with asyncio.timeout(calls.timeout(turn, "act")):
            completion = await calls.interruptible(
                turn, model.complete_with_tools(sent, tools=specs, purpose="act")
            )
    except (ModelError, TimeoutError) as error:
        problem = calls.error_text(error)
        calls.record(turn, record.model_copy(update={"error": problem}))
        return problem, None
    latency = round((time.perf_counter() - started) * 1000, 3)
    turn.add_usage(completion.usage)
    record = record.model_copy(update={
        "latency_ms": latency,
        "input_tokens": completion.usage.input_tokens,
        "output_tokens": completion.usage.output_tokens,
    })  # fmt: skip
    if completion.tool_calls:
        call = completion.tool_calls[0]  # one action per call: the rest are asked again
        shown = {"tool_calls": [mask_secrets({"name": call.name, "arguments": call.arguments})]}
        record = record.model_copy(update={"raw": turn.scrub(json.dumps(shown))})
        try:
            check_tool_call(registry, call.name, call.arguments)
        except PlanFormatError as error:
            calls.record(turn, record.model_copy(update={"error": error.problem}))
            return error.problem, None
        calls.record(turn, record.model_copy(update={"parsed": shown}))
        return "", ActReply(action="tool", tool_name=call.name, tool_args=call.arguments)
    text = completion.text.strip()
    shown_text = turn.scrub(text)
    calls.record(turn, record.model_copy(update={"raw": shown_text, "parsed": shown_text}))
    if not text:
        return "the reply had neither a tool call nor text", None
    return "", ActReply(action="answer", text=text)
