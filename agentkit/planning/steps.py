"""The execute loop and the steps it runs: tool, reason, respond, ask_user.

The loop is bounded by ``max_iterations`` and checks for a cancel before every step; when no
step is pending the strategy may plan more (``next_step``), and after a tool or reason step it
may decide again (``plan_replan``). **A side-effecting tool never runs without consent**,
whatever ``requires_confirmation`` says: the turn ends in waiting_confirmation naming the exact
tool and arguments, and the stored call runs only after a confirmation. A running tool is never
interrupted (a write is never cut in half); finished steps are never run again.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator

from agentkit.errors import ModelError
from agentkit.events import (
    AgentEvent,
    AgentOutputEvent,
    AskUserEvent,
    StepCompleteEvent,
    StepStartEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from agentkit.memory import ExecutionState, Observation, PlanStep, Waiting
from agentkit.models.base import ChatMessage, Completion, TextDelta
from agentkit.planning import calls, context, recording
from agentkit.planning.prompts import render_prompt
from agentkit.planning.state import (
    TurnCancelledError,
    TurnFailedError,
    TurnState,
    cut,
    planned,
)
from agentkit.planning.trace import CallRecord
from agentkit.tools import mask_secrets
from agentkit.tools.registry import ToolArgumentsError, ToolCrashedError, UnknownToolError

__all__ = ["execute", "refresh_live_state", "respond", "run_plan", "run_step", "run_tool"]


async def run_plan(turn: TurnState, sent: list[ChatMessage]) -> AsyncIterator[AgentEvent]:
    """Ask for a whole plan (or a first batch), store and announce it, then execute it."""
    goal, steps, repaired = await calls.request_plan(turn, sent, "plan")
    stored = turn.current.with_steps(steps, plan_id=f"plan-{turn.message_id}")
    fields = {name: getattr(stored, name) for name in type(stored).model_fields}
    fields["goal"] = goal or cut(turn.deps.text, 500)
    state = recording.save(turn, ExecutionState.model_validate(fields))
    yield recording.plan_event(turn, state.goal, steps, repaired)
    async for event in execute(turn):
        yield event


async def execute(turn: TurnState) -> AsyncIterator[AgentEvent]:
    """Run pending steps until none is left, the flow pauses, or a bound is reached."""
    config, strategy = turn.deps.config, turn.deps.strategy
    iterations = 0
    while True:
        step = turn.current.next_pending_step()
        if step is None:
            async for event in strategy.more_steps(turn):
                yield event
            step = turn.current.next_pending_step()
        if step is None:
            state = turn.current
            turn.answer = context.fallback_answer(state)
            recording.save(turn, state.complete(turn.answer))
            return
        iterations += 1
        if iterations > config.max_iterations:
            raise TurnFailedError(
                "iteration_limit", f"stopped after {config.max_iterations} iterations"
            )
        turn.check_cancel()
        async for event in run_step(turn, step):
            yield event
        if turn.state is None or turn.state.status != "running":
            return  # paused for the user, or finished


async def run_step(turn: TurnState, step: PlanStep) -> AsyncIterator[AgentEvent]:
    """Run one step; a tool or reason step is followed by the strategy's decision."""
    if step.type == "ask_user":
        yield _ask(turn, step)
        return
    if step.type == "respond":
        async for event in respond(turn, step):
            yield event
        return
    if step.type == "tool":
        tools = turn.deps.tools
        tool = tools.get(step.tool_name) if step.tool_name in tools else None
        if tool is not None and tool.side_effect:
            yield _ask_consent(turn, step)  # whatever requires_confirmation says
            return
        async for event in run_tool(turn, step):
            yield event
    else:
        async for event in _reason(turn, step):
            yield event
    async for event in turn.deps.strategy.after_step(turn, step.id):
        yield event


def _ask_consent(turn: TurnState, step: PlanStep) -> AskUserEvent:
    args = mask_secrets(dict(step.tool_args))
    shown = json.dumps(args, ensure_ascii=False, sort_keys=True)
    question = (
        f"To continue I need to run {step.tool_name} with {shown}. "
        "This changes your configuration. Shall I go ahead? (yes / no)"
    )
    waiting = Waiting(
        question=question,
        intent="confirm_action",
        confirmation_target=f"{step.tool_name} {shown}",
    )
    state = turn.current.mark_step_running(step.id)
    recording.save(turn, state.pause(waiting, confirmation=True))
    turn.answer = question
    return AskUserEvent(
        question=question,
        kind="confirmation",
        tool_name=step.tool_name,
        tool_args=args if isinstance(args, dict) else {},
    )


def _ask(turn: TurnState, step: PlanStep) -> AskUserEvent:
    question = step.instruction or step.title
    state = turn.current.mark_step_running(step.id)
    waiting = Waiting(question=question, intent="provide_missing_information")
    recording.save(turn, state.pause(waiting))
    turn.answer = question
    return AskUserEvent(question=question)


async def run_tool(turn: TurnState, step: PlanStep) -> AsyncIterator[AgentEvent]:
    """Run a tool step (consent, if it needed any, was given); its result is observed.

    A side-effecting step is durable as running before its tool runs and as done after, so
    a crash in between is seen on restart and the tool is never run twice."""
    side_effect = step.tool_name in turn.deps.tools and (
        turn.deps.tools.get(step.tool_name).side_effect
    )
    state = recording.save(turn, turn.current.mark_step_running(step.id), durable=side_effect)
    yield StepStartEvent(step_id=step.id, step_type=step.type, title=step.title)
    yield ToolCallEvent(id=step.id, name=step.tool_name, arguments=planned(step).tool_args)
    try:
        result = await turn.deps.tools.arun(step.tool_name, recording.tool_args(turn, step))
        ok, text = result.ok, result.text
    except (UnknownToolError, ToolArgumentsError, ToolCrashedError) as error:
        ok, text = False, json.dumps({"error": turn.scrub(str(error))}, ensure_ascii=False)
    summary = cut(text)
    state = state.observe(Observation(step_id=step.id, kind="tool_result", content=summary))
    if ok:
        state = state.mark_step_done(step.id, cut(text, 300))
    else:
        state = state.mark_step_failed(step.id, cut(text, 300))
    recording.save(turn, state, durable=side_effect)
    yield ToolResultEvent(id=step.id, name=step.tool_name, output=summary, ok=ok)
    yield StepCompleteEvent(
        step_id=step.id, status="done" if ok else "failed", summary=cut(text, 300)
    )


async def _reason(turn: TurnState, step: PlanStep) -> AsyncIterator[AgentEvent]:
    state = recording.save(turn, turn.current.mark_step_running(step.id))
    yield StepStartEvent(step_id=step.id, step_type=step.type, title=step.title)
    prompt = render_prompt(
        "reason",
        turn.deps.agent_dir,
        goal=state.goal,
        observations=context.observations(state),
        instruction=step.instruction or step.title,
    )
    try:
        completion = await calls.call(turn, "reason", context.messages(turn, prompt), None)
        text, ok = completion.text.strip(), True
    except (ModelError, TimeoutError) as error:
        text, ok = f"reasoning failed: {calls.error_text(error)}", False
    state = state.observe(Observation(step_id=step.id, kind="reasoning", content=cut(text)))
    state = (
        state.mark_step_done(step.id, cut(text, 300))
        if ok
        else state.mark_step_failed(step.id, text)
    )
    recording.save(turn, state)
    yield StepCompleteEvent(
        step_id=step.id, status="done" if ok else "failed", summary=cut(text, 300)
    )


async def respond(turn: TurnState, step: PlanStep) -> AsyncIterator[AgentEvent]:
    """The answer, streamed; a cancel keeps what was said so far."""
    state = recording.save(turn, turn.current.mark_step_running(step.id))
    yield StepStartEvent(step_id=step.id, step_type=step.type, title=step.title)
    prompt = render_prompt(
        "respond",
        turn.deps.agent_dir,
        request=turn.scrub(turn.deps.text),
        goal=state.goal,
        instruction=step.instruction or step.title,
        observations=context.observations(state),
        conversation=context.conversation(turn),
    )
    sent = context.messages(turn, prompt)
    pieces: list[str] = []
    started = time.perf_counter()
    call_record = CallRecord(purpose="respond", messages=[m.model_dump() for m in sent])
    try:
        model = calls.chat_model(turn)
        async with asyncio.timeout(calls.timeout(turn, "respond")):
            async for event in model.stream(sent, purpose="respond"):
                if turn.cancel_requested:
                    break  # keep what was said so far
                if isinstance(event, TextDelta):
                    pieces.append(event.text)
                    yield AgentOutputEvent(text=event.text)
                elif isinstance(event, Completion):
                    turn.add_usage(event.usage)
                    call_record = call_record.model_copy(update={
                        "input_tokens": event.usage.input_tokens,
                        "output_tokens": event.usage.output_tokens,
                    })  # fmt: skip
        answer = turn.scrub("".join(pieces).strip())
        call_record = call_record.model_copy(update={"raw": answer, "parsed": answer})
        if turn.cancel_requested:
            turn.answer = answer
            calls.record(turn, call_record.model_copy(update={"error": "cancelled by the user"}))
            raise TurnCancelledError("cancelled by the user")
    except (ModelError, TimeoutError) as error:
        answer = context.fallback_answer(state)
        call_record = call_record.model_copy(update={"error": calls.error_text(error)})
        if not pieces:
            yield AgentOutputEvent(text=answer)
    latency = round((time.perf_counter() - started) * 1000, 3)
    calls.record(turn, call_record.model_copy(update={"latency_ms": latency}))
    answer = answer or context.fallback_answer(state)
    turn.answer = answer
    state = state.mark_step_done(step.id, cut(answer, 300))
    recording.save(turn, state.complete(answer))
    yield StepCompleteEvent(step_id=step.id, status="done", summary=cut(answer, 300))


def refresh_live_state(turn: TurnState) -> Iterator[AgentEvent]:
    """Re-run the argument-free ``live_state`` tools; their results become observations the
    plan prompt shows instead of (possibly stale) TaskState."""
    tools = turn.deps.tools
    for tool in tools.live_state_tools():
        try:
            tools.validate(tool.name, {})
        except ToolArgumentsError:
            continue  # only argument-free snapshots can be re-run blindly
        call_id = f"live-{tool.name}"
        yield ToolCallEvent(id=call_id, name=tool.name, arguments={})
        result = tools.run(tool.name, {})
        content = cut(f"{tool.name}: {result.text}")
        recording.save(turn, turn.current.observe(Observation(kind="live_state", content=content)))
        yield ToolResultEvent(id=call_id, name=tool.name, output=result.text, ok=result.ok)
