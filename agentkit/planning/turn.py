"""One planner turn (engine ``planner``; seed 002): intake, the stages, and the turn's end.

Intake: the user message is persisted first and ``session`` is the first event (as in chat);
the turn then reads, once, what its stages share (the recent history, TaskState, the last
ExecutionState and checkpoint) into a frozen :class:`~agentkit.planning.state.TurnContext`.
:func:`drive` runs the stages — routing (:mod:`agentkit.planning.routing`), the strategy
(:mod:`agentkit.planning.strategies`), the steps (:mod:`agentkit.planning.steps`) — one after
another, each naming the next, and re-yields their events: a tool's events climb two
generators to ``Agent.send_message``. At the end: the assistant message, the status and the
turn's checkpoint in one durable commit, memory upkeep (:mod:`agentkit.planning.upkeep`), and
``result`` as the last event.

No exception escapes :func:`drive`: failures become an ``error`` event, status failed and a
``result``. Every model call is made by the turn's call tracer
(:mod:`agentkit.planning.tracer`): ``{messageId}/calls.jsonl`` and a span each.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from agentkit.config import CompressionConfig, PlannerConfig
from agentkit.errors import AgentkitError
from agentkit.events import AgentEvent, CompressionEvent, ErrorEvent, ResultEvent, SessionEvent
from agentkit.memory import MemoryRepository
from agentkit.models.base import ChatModel, SessionBackend
from agentkit.planning import routing, upkeep
from agentkit.planning.approvals import Decision
from agentkit.planning.errors import TurnCancelledError, TurnFailedError
from agentkit.planning.prompts import render_prompt
from agentkit.planning.recording import FlowRecorder
from agentkit.planning.state import (
    PLANNER_VERSION,
    STAGE_TIMEOUTS,
    Outcome,
    Scrubber,
    Stage,
    Then,
    Turn,
    TurnContext,
    capability_signature,
    intake_limit,
)
from agentkit.planning.strategies import get_strategy
from agentkit.planning.tool_budget import fit_tools
from agentkit.planning.trace import CallRecord
from agentkit.planning.tracer import CallTracer, CancelScope
from agentkit.store import ConversationKey, ConversationStore
from agentkit.store.records import ResetRecord, window_start
from agentkit.telemetry import Telemetry, TurnTrace, provider_name
from agentkit.tools import ToolRegistry
from agentkit.types import Message, utc_now

if TYPE_CHECKING:
    from agentkit.engine import AgentRuntime

__all__ = ["PlannerEngine", "PlannerTurn", "drive"]


class PlannerEngine:
    """Engine ``planner`` (:class:`agentkit.engine.Engine`): one :class:`PlannerTurn` per
    turn, over the agent's runtime (its tools, planner config, memory and traces)."""

    #: the turn's final commit carries its checkpoint (the Agent need not write one)
    writes_checkpoints = True

    def run_turn(
        self,
        runtime: AgentRuntime,
        key: ConversationKey,
        text: str,
        decision: Decision | None = None,
    ) -> AsyncIterator[AgentEvent]:
        config = runtime.config
        turn = PlannerTurn(
            key=key,
            text=text,
            store=runtime.store,
            memory=runtime.memory,
            model=runtime.model,
            tools=runtime.tools,
            config=config.planner.for_model(runtime.model.spec),
            system_prompt=runtime.system_prompt(),
            agent_dir=runtime.folder.path,
            max_turns=config.max_turns,
            compression=config.compression,
            telemetry=runtime.telemetry,
            decision=decision,
            background=runtime.upkeep,
            admit=lambda: runtime.pool.turn(
                key.agent_id, key.conversation_id, runtime.store.hold(key, timeout=0)
            ),
        )
        running = runtime.turns.running(key.agent_id, key.conversation_id)
        return drive(turn, None if running is None else running.on_cancel)


@dataclass
class PlannerTurn:
    """Everything one planner turn needs; :meth:`run` streams its events, :meth:`cancel`
    stops it at its next safe point.

    Every model call is traced through the store (:meth:`ConversationStore.open_trace`: the
    file store's ``{messageId}/calls.jsonl``) and kept in :attr:`calls`. ``agent_dir`` is
    where prompt overrides live.
    With ``telemetry`` the turn is a trace (``invoke_agent`` and its children).
    """

    key: ConversationKey
    text: str
    store: ConversationStore
    memory: MemoryRepository
    model: ChatModel | SessionBackend
    tools: ToolRegistry
    config: PlannerConfig = field(default_factory=PlannerConfig)
    system_prompt: str = ""
    agent_dir: Path | None = None
    max_turns: int = 20
    compression: CompressionConfig | None = None
    stage_timeouts: Mapping[str, float] = field(default_factory=lambda: dict(STAGE_TIMEOUTS))
    telemetry: Telemetry | None = None
    #: a decision on the conversation's pending approval (None: the text is the message)
    decision: Decision | None = None
    #: every model call of the turn, in order (also in ``calls.jsonl``)
    calls: list[CallRecord] = field(default_factory=list)
    #: the turn's cancel switch (safe to use from any thread)
    cancel_scope: CancelScope = field(default_factory=CancelScope)
    #: where memory upkeep runs after ``result`` (None: in the turn, before ``result``) and
    #: how its job is admitted to the conversation (:mod:`agentkit.planning.upkeep`)
    background: upkeep.BackgroundUpkeep | None = None
    admit: upkeep.Admit | None = None

    def run(self) -> AsyncIterator[AgentEvent]:
        return drive(self)

    def cancel(self) -> None:
        """Stop the turn: an in-flight model call is interrupted, no further step starts, and
        the turn ends with status cancelled. A tool that is running finishes first (a write is
        never cut in half); finished steps stay done."""
        self.cancel_scope.cancel()


async def drive(
    plan: PlannerTurn,
    on_cancel: Callable[[Callable[[], None]], Awaitable[None]] | None = None,
) -> AsyncIterator[AgentEvent]:
    """The turn: intake, its stages one after another, the end (see the module docstring)."""
    if on_cancel is not None:
        await on_cancel(plan.cancel)
    key, store = plan.key, plan.store
    strategy = get_strategy(plan.config.strategy)
    history, window = _intake(store, key, plan.max_turns)
    scenario: Literal["A", "C"] = "C" if history else "A"
    question = Message.user(plan.text)
    message_id = question.message_id
    store.append(key, question, status="running")  # durable before any model call
    injected = f"planner {PLANNER_VERSION}: system prompt + memory layers"
    store.annotate(key, message_id, "SESSION", f"scenario {scenario}: {injected}")
    yield SessionEvent(
        agent_id=key.agent_id,
        conversation_id=key.conversation_id,
        message_id=message_id,
        scenario=scenario,
        injected=injected,
        history_messages=len(history[-2 * plan.max_turns :]),
        model=plan.model.spec,
    )
    turn = _turn(plan, strategy, history, message_id, scenario=scenario, window=window)
    ctx = turn.ctx
    error_type: str | None = None
    try:
        stage: Stage | None = routing.route
        turn = await _fit_tools(turn)  # the prompts fit the model's window, or a clear error
        while stage is not None:
            following: Then | None = None
            async for item in stage(turn):
                if isinstance(item, Then):
                    following = item
                else:
                    yield item
            if following is None:
                break
            stage, turn = following.stage, following.turn or turn
    except TurnFailedError as failure:
        error_type = failure.code
        yield _failed(turn, failure.code, str(failure))
    except TurnCancelledError:
        error_type = "cancelled"
        yield _cancelled(turn)
    except Exception as error:  # the turn boundary: never an exception out of the stream
        error_type = type(error).__name__
        yield _failed(turn, "internal_error", f"{type(error).__name__}: {error}")
    outcome = turn.outcome
    turn.calls.close()
    answer = _persist(turn)
    if outcome.status == "completed" and not _fast_path(ctx.text):
        added = (question,) if answer is None else (question, answer)
        compressed = await _upkeep(plan, turn, added)
        if compressed is not None:
            yield compressed
    usage = turn.calls.usage
    if ctx.trace is not None:
        ctx.trace.end(
            outcome.status,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            error_type=error_type,
        )
    yield ResultEvent(
        conversation_id=key.conversation_id,
        message_id=message_id,
        status=outcome.status,
        text=outcome.answer,
        usage=usage,
        latency_ms=round((time.perf_counter() - ctx.started) * 1000, 3),
        trace_id=ctx.trace.trace_id if ctx.trace is not None else "",
    )


def _intake(
    store: ConversationStore, key: ConversationKey, max_turns: int
) -> tuple[tuple[Message, ...], tuple[int, int]]:
    """The recent history a turn reads, and (the index in the whole history of its first
    message, the index in it where the chat window starts: the conversation's records)."""
    history = tuple(store.recent(key, intake_limit(max_turns)))
    offset = store.meta(key).stats.message_count - len(history)
    return history, (offset, max(0, window_start(store.records(key)) - offset))


def _turn(
    plan: PlannerTurn,
    strategy: object,
    history: tuple[Message, ...],
    message_id: str,
    *,
    scenario: str,
    window: tuple[int, int],
) -> Turn:
    """The turn's context and owners, after intake."""
    key = plan.key
    scrub = Scrubber(plan.tools)
    trace: TurnTrace | None = None
    if plan.telemetry is not None:
        trace = plan.telemetry.turn(
            conversation_id=key.conversation_id,
            message_id=message_id,
            scenario=scenario,
            provider=provider_name(plan.model.spec),
            model=plan.model.spec,
            secrets=scrub.known,
        )
    ctx = TurnContext(
        key=key,
        text=plan.text,
        message_id=message_id,
        store=plan.store,
        memory=plan.memory,
        model=plan.model,
        tools=plan.tools,
        strategy=strategy,  # type: ignore[arg-type]
        config=plan.config,
        system_prompt=plan.system_prompt,
        agent_dir=plan.agent_dir,
        max_turns=plan.max_turns,
        compression=plan.compression,
        stage_timeouts=plan.stage_timeouts,
        history=history,
        history_offset=window[0],
        history_start=window[1],
        task=plan.memory.load_task_state(key.agent_id, key.conversation_id),
        signature=capability_signature(plan.tools, plan.config.strategy),
        scrub=scrub,
        trace=trace,
        decision=plan.decision,
    )
    tracer = CallTracer(
        model=plan.model,
        message_id=message_id,
        timeout=ctx.timeout,
        scrub=scrub,
        cancel=plan.cancel_scope,
        sink=plan.store.open_trace(key, message_id),
        trace=trace,
        records=plan.calls,
    )
    flow = FlowRecorder(key, plan.memory, ctx.note)
    return Turn(ctx=ctx, flow=flow, calls=tracer, outcome=Outcome(), cancel=plan.cancel_scope)


async def _fit_tools(turn: Turn) -> Turn:
    """The turn offering the tools that fit the model's window (all of them when they do);
    a request that cannot fit fails here, before any model call
    (:mod:`agentkit.planning.tool_budget`)."""
    ctx = turn.ctx
    if _fast_path(ctx.text):  # /clear, /status: no prompt
        return turn
    keep: list[str] = []
    try:
        stored = ctx.memory.load_execution_state(ctx.key.agent_id, ctx.key.conversation_id)
    except AgentkitError:  # unreadable: routing discards it and says so
        stored = None
    if stored is not None and stored.value.is_active:
        keep = [step.tool_name for step in stored.value.steps if step.tool_name]
    prompt = render_prompt(
        "plan",
        ctx.agent_dir,
        max_steps=str(ctx.config.max_steps),
        tools="",
        live_state="",
        task_state=ctx.task.value.render(),
        previous="(none)",
        conversation=ctx.conversation,
        request=ctx.text,
    )
    fit = await asyncio.to_thread(
        fit_tools, ctx.model, ctx.tools, ctx.text, f"{ctx.system_prompt}\n{prompt}", keep
    )
    if not fit.narrowed and not fit.overflow:
        return turn
    ctx.note("TOOLS", fit.note())
    turn.calls.note(CallRecord(purpose="route", messages=[], route=fit.trace()))
    if fit.overflow:
        raise TurnFailedError("context_overflow", fit.overflow)
    return dataclasses.replace(turn, ctx=dataclasses.replace(ctx, tools=fit.tools))


async def _upkeep(
    plan: PlannerTurn, turn: Turn, added: tuple[Message, ...]
) -> CompressionEvent | None:
    """Memory upkeep: handed to the background (after ``result``) when the turn has one,
    else now, in the turn (its ``compression`` event, if any, then precedes ``result``)."""
    if plan.background is not None and plan.admit is not None:
        upkeep.queue(turn.ctx, added, plan.background, plan.admit, plan.calls)
        return None
    compressed = await upkeep.upkeep(turn.ctx, turn.calls, added)
    turn.calls.close()
    return compressed


def _fast_path(text: str) -> bool:
    return text.strip().lower() in ("/clear", "/status")


def _failed(turn: Turn, code: str, message: str) -> ErrorEvent:
    """The turn failed: status failed, the error noted, an active ExecutionState failed."""
    ctx, outcome, flow = turn.ctx, turn.outcome, turn.flow
    message = ctx.scrub(message)
    outcome.status = "failed"
    outcome.answer = outcome.answer or f"Sorry, I could not finish this: {message}"
    ctx.store.annotate(ctx.key, ctx.message_id, "ERROR", message)
    state = flow.state
    if state is not None and state.is_active:
        try:
            flow.save(state.fail(message))
        except Exception as error:  # already failing: report both
            message = f"{message} (and the failed state could not be saved: {error})"
    return ErrorEvent(message=message, code=code)


def _cancelled(turn: Turn) -> ErrorEvent:
    """The turn was cancelled: finished steps stay done, the rest are skipped."""
    ctx, outcome = turn.ctx, turn.outcome
    outcome.status = "cancelled"
    outcome.answer = outcome.answer or "Stopped."
    ctx.store.annotate(ctx.key, ctx.message_id, "CANCEL", "cancelled by the user")
    turn.flow.end("cancelled")
    return ErrorEvent(message="the turn was cancelled", code="cancelled")


def _persist(turn: Turn) -> Message | None:
    """The turn's end in one durable commit before ``result``: the assistant message (if there
    is an answer), the conversation's status and the turn's checkpoint, which holds the
    ExecutionState the turn ends in (so that state needs no fsync of its own). Returns the
    assistant message."""
    ctx, outcome = turn.ctx, turn.outcome
    key, store = ctx.key, ctx.store
    status = "idle" if outcome.status == "cancelled" else outcome.status
    try:
        turn.flow.flush()
        checkpoint = ctx.memory.turn_checkpoint(key.agent_id, key.conversation_id, ctx.message_id)
    except AgentkitError:  # the answer comes first; the agent writes a checkpoint after it
        checkpoint = None
    answer = None
    if outcome.answer:
        answer = Message.assistant(
            outcome.answer, message_id=ctx.message_id, usage=turn.calls.usage
        )
        meta = store.append(key, answer, status=status, checkpoint=checkpoint)
    else:
        meta = store.set_status(key, status, checkpoint=checkpoint)
    if outcome.status == "completed" and ctx.text.strip().lower() == "/clear":
        # the window starts after the command's reply (TaskState was cleared by the command)
        reset = ResetRecord(message_id=ctx.message_id, at=utc_now(), start=meta.stats.message_count)
        store.add_record(key, reset)
    return answer
