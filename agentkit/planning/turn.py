"""One planner turn (engine ``planner``; seed 002): intake, the stages, and the turn's end.

Intake reads, once and before anything is written, what the stages share — the recent
history, TaskState, the conversation's records and (through the flow recorder) the
ExecutionState with the last checkpoint — into an :class:`~agentkit.planning.state.Intake`;
a decision the turn carries is checked against that ExecutionState here (an unknown or spent
approval is refused before the turn's first event). Then the user message is persisted and
``session`` is the first event. :func:`drive` runs the stages
(:mod:`agentkit.planning.graph`) — routing (:mod:`agentkit.planning.routing`), the strategy
(:mod:`agentkit.planning.strategies`), the steps (:mod:`agentkit.planning.steps`) — and is the
only loop over them, the only place the answer is set, and the keeper of the loop's counter.
At the end: the assistant message, the status and the turn's checkpoint in one durable commit
(the one every engine ends with: :meth:`~agentkit.planning.state.TurnContext.commit`), memory
upkeep (:mod:`agentkit.planning.upkeep`: in the background when the runtime has one),
and ``result`` as the last event.

No exception escapes :func:`drive` once ``session`` was sent: failures become an ``error``
event, status failed and a ``result``. Every model call is made by the turn's call tracer
(:mod:`agentkit.calls.tracer`): a trace record and a span each.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal

from agentkit.calls.errors import TurnCancelledError, TurnFailedError
from agentkit.calls.records import CallRecord
from agentkit.calls.tracer import CallTracer
from agentkit.events import AgentEvent, ErrorEvent, SessionEvent
from agentkit.planning import approvals, upkeep
from agentkit.planning.context import PromptContext
from agentkit.planning.graph import End, Stage, Strategy, Turn
from agentkit.planning.prompts import render_prompt
from agentkit.planning.recording import FlowRecorder
from agentkit.planning.routing import Route
from agentkit.planning.state import (
    PLANNER_VERSION,
    Intake,
    TurnContext,
    TurnStatus,
    capability_signature,
    intake_limit,
)
from agentkit.planning.strategies import get_strategy
from agentkit.planning.tool_budget import counts_locally, fit_tools
from agentkit.store import off_loop
from agentkit.store.records import ResetRecord, window_start
from agentkit.types import Message, utc_now

__all__ = ["PlannerEngine", "drive"]


class PlannerEngine:
    """Engine ``planner`` (:class:`agentkit.runtime.Engine`): :func:`drive` over the turn's
    context."""

    def run_turn(self, ctx: TurnContext) -> AsyncIterator[AgentEvent]:
        return drive(ctx)


async def drive(ctx: TurnContext) -> AsyncIterator[AgentEvent]:
    """The turn: intake, its stages one after another, the end (see the module docstring)."""
    if ctx.running is not None:
        await ctx.running.on_cancel(ctx.cancel)
    strategy = get_strategy(ctx.config.strategy)
    key, store = ctx.key, ctx.store
    intake, flow = _intake(ctx)
    if ctx.decision is not None:  # under the writer lock, before anything is written
        approvals.check(flow.state, ctx.decision, ctx.tools, key.conversation_id)
    scenario: Literal["A", "C"] = "C" if intake.history else "A"
    question = ctx.question
    await store.aappend(key, question, status="running")  # durable before any model call
    injected = f"planner {PLANNER_VERSION}: system prompt + memory layers"
    store.annotate(key, ctx.message_id, "SESSION", f"scenario {scenario}: {injected}")
    yield SessionEvent(
        agent_id=key.agent_id,
        conversation_id=key.conversation_id,
        message_id=ctx.message_id,
        scenario=scenario,
        injected=injected,
        history_messages=len(intake.history[-2 * ctx.max_turns :]),
        model=ctx.model.spec,
    )
    turn = _turn(ctx, strategy, intake, flow, scenario)
    finished: _Finished | None = None
    async for item in _run(turn):
        if isinstance(item, _Finished):
            finished = item
        else:
            yield item
    assert finished is not None
    answer, status = finished.end.answer, finished.end.status  # the one place it is set
    reply = await off_loop(_persist, turn, answer, status)  # inline when alone, else pooled
    if status == "completed" and not _fast_path(ctx.text):
        added = (question,) if reply is None else (question, reply)
        if not upkeep.queue(ctx, intake, turn.trace, added):  # no background: in the turn
            compressed = await upkeep.upkeep(ctx, intake, turn.tracer, added)
            if compressed is not None:
                yield compressed
    turn.tracer.close()
    yield ctx.result(status, answer, turn.tracer.usage, turn.trace, finished.error_type)


@dataclass(frozen=True, slots=True)
class _Finished:
    """How the stages ended: the :class:`End` (a failure's included) and the error's kind."""

    end: End
    error_type: str | None = None


async def _run(turn: Turn) -> AsyncIterator[AgentEvent | _Finished]:
    """The stages, one after another from routing, until one names the :class:`End`: the only
    loop over them, the keeper of its counter (``max_iterations``) and of its safe points for
    a cancel. Failures end it too (never an exception out of the stream)."""
    ctx = turn.ctx
    iterations = 0
    try:
        await _fit_tools(turn)  # the prompts fit the model's window, or a clear error
        node: Stage = Route()
        while True:
            if node.iteration:
                iterations += 1
                if iterations > ctx.config.max_iterations:
                    bound = ctx.config.max_iterations
                    raise TurnFailedError("iteration_limit", f"stopped after {bound} iterations")
                turn.check_cancel()
            following: Stage | End | None = None
            async for item in node.run(turn):
                if isinstance(item, Stage | End):
                    following = item
                else:
                    yield item
            if following is None:
                raise RuntimeError(f"stage {type(node).__name__} ended naming nothing to follow")
            if isinstance(following, End):
                break
            node = following
    except TurnFailedError as failure:
        event = _failed(turn, failure.code, str(failure))
        yield event
        yield _Finished(
            End(f"Sorry, I could not finish this: {event.message}", "failed"), failure.code
        )
        return
    except TurnCancelledError:
        yield _cancelled(turn)
        yield _Finished(End("Stopped.", "cancelled"), "cancelled")
        return
    except Exception as error:  # the turn boundary: never an exception out of the stream
        event = _failed(turn, "internal_error", f"{type(error).__name__}: {error}")
        yield event
        answer = f"Sorry, I could not finish this: {event.message}"
        yield _Finished(End(answer, "failed"), type(error).__name__)
        return
    if following.status == "cancelled":
        yield _cancelled(turn)
        yield _Finished(End(following.answer or "Stopped.", "cancelled"), "cancelled")
        return
    yield _Finished(following)


def _intake(ctx: TurnContext) -> tuple[Intake, FlowRecorder]:
    """What the turn reads once: the recent history, where its chat window starts (the
    conversation's records), TaskState, and the ExecutionState with the last checkpoint."""
    key, store = ctx.key, ctx.store
    history = tuple(store.recent(key, intake_limit(ctx.max_turns)))
    offset = store.meta(key).stats.message_count - len(history)
    start = max(0, window_start(store.records(key)) - offset)
    task = ctx.memory.load_task_state(key.agent_id, key.conversation_id)
    intake = Intake(history, offset, start, task, ctx.max_turns)
    flow = FlowRecorder(key, ctx.memory, ctx.note, ctx.mask)
    flow.load(store.last_checkpoint(key))
    return intake, flow


def _turn(
    ctx: TurnContext,
    strategy: Strategy,
    intake: Intake,
    flow: FlowRecorder,
    scenario: str,
) -> Turn:
    """The turn's graph state, after intake."""
    trace = ctx.start_trace(scenario)
    return Turn(
        ctx=ctx,
        intake=intake,
        strategy=strategy,
        tools=ctx.tools,
        flow=flow,
        tracer=CallTracer.of(ctx, trace),
        prompt=PromptContext.build(ctx, intake, ctx.tools),
        signature=capability_signature(ctx.tools, strategy.name),
        trace=trace,
    )


async def _fit_tools(turn: Turn) -> None:
    """The turn offers the tools that fit the model's window (all of them when they do);
    a request that cannot fit fails here, before any model call
    (:mod:`agentkit.planning.tool_budget`)."""
    ctx = turn.ctx
    if _fast_path(ctx.text) or not len(turn.tools):  # /clear, /status: no prompt
        return
    state = turn.flow.state
    keep = [step.tool_name for step in state.steps if step.tool_name] if state else []
    values = turn.prompt.values(turn.state, tools="", live_state="")
    prompt = f"{ctx.system_prompt}\n{render_prompt('plan', ctx.agent_dir, **values)}"
    if counts_locally(ctx.model):
        fit = fit_tools(ctx.model, turn.tools, ctx.text, prompt, keep)
    else:  # the model's own tokenizer (another process, maybe): off the loop
        fit = await asyncio.to_thread(fit_tools, ctx.model, turn.tools, ctx.text, prompt, keep)
    if not fit.narrowed and not fit.overflow:
        return
    ctx.note("TOOLS", fit.note())
    turn.tracer.note(CallRecord(purpose="route", messages=[], route=fit.trace()))
    if fit.overflow:
        raise TurnFailedError("context_overflow", fit.overflow)
    turn.tools = fit.tools
    turn.prompt = PromptContext.build(ctx, turn.intake, fit.tools)


def _fast_path(text: str) -> bool:
    return text.strip().lower() in ("/clear", "/status")


def _failed(turn: Turn, code: str, message: str) -> ErrorEvent:
    """The turn failed: the error noted, an active ExecutionState failed."""
    ctx, flow = turn.ctx, turn.flow
    message = ctx.scrub(message)
    ctx.note("ERROR", message)
    state = flow.state
    if state is not None and state.is_active:
        try:
            flow.save(state.fail(message))
        except Exception as error:  # already failing: report both
            message = f"{message} (and the failed state could not be saved: {error})"
    return ErrorEvent(message=message, code=code)


def _cancelled(turn: Turn) -> ErrorEvent:
    """The turn was cancelled: finished steps stay done, the rest are skipped."""
    turn.ctx.note("CANCEL", "cancelled by the user")
    turn.flow.end("cancelled")
    return ErrorEvent(message="the turn was cancelled", code="cancelled")


def _persist(turn: Turn, answer: str, status: TurnStatus) -> Message | None:
    """The turn's end: its one durable commit (:meth:`TurnContext.commit`, with the flow's
    staged ExecutionState) and, after a ``/clear``, where the chat window starts. Returns the
    assistant message."""
    ctx = turn.ctx
    reply, meta = ctx.commit(answer, status, usage=turn.tracer.usage, flow=turn.flow)
    if status == "completed" and ctx.text.strip().lower() == "/clear":
        # the window starts after the command's reply (TaskState was cleared by the command)
        reset = ResetRecord(message_id=ctx.message_id, at=utc_now(), start=meta.stats.message_count)
        ctx.store.add_record(ctx.key, reset)
    return reply
