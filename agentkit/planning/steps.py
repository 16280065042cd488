"""The execute loop's stages and the steps they run: tool, reason, respond, ask_user.

Each is a stage (:data:`~agentkit.planning.state.Stage`): it yields its events and names what
comes next, and :func:`agentkit.planning.turn.drive` runs it. :func:`execute` picks the next
pending step (bounded by ``max_iterations``, a cancel checked first); when none is pending the
strategy may plan more (``next_step``); after a tool or reason step the strategy decides what
follows (``plan_replan`` replans). **A side-effecting tool never runs without consent**,
whatever ``requires_confirmation`` says: the turn ends in waiting_confirmation naming the exact
tool and arguments, and the stored call runs only after a confirmation. A running tool is never
interrupted (a write is never cut in half); finished steps are never run again.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

from agentkit.errors import ModelError
from agentkit.events import (
    AgentEvent,
    AgentOutputEvent,
    AskUserEvent,
    PlanEvent,
    StepCompleteEvent,
    StepStartEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from agentkit.memory import ExecutionState, Observation, PlanStep, Waiting
from agentkit.models.base import ChatMessage, TextDelta
from agentkit.planning import calls, context, reads
from agentkit.planning.approvals import new_approval
from agentkit.planning.consent import consent_question, conversation_language
from agentkit.planning.errors import TurnCancelledError, TurnFailedError
from agentkit.planning.prompts import render_prompt
from agentkit.planning.state import Stage, Then, Turn, cut, planned
from agentkit.planning.tracer import error_text
from agentkit.telemetry import semconv
from agentkit.tools import mask_secrets
from agentkit.tools.registry import ToolArgumentsError, ToolCrashedError, UnknownToolError

__all__ = [
    "execute",
    "live_state",
    "plan_event",
    "run_plan",
    "run_step",
    "run_tool",
    "store_plan",
]

Item = AgentEvent | Then


def plan_event(turn: Turn, goal: str, steps: tuple[PlanStep, ...], repaired: bool) -> PlanEvent:
    """Note the new steps in the turn log; the ``plan`` event announcing them."""
    shown = [planned(step) for step in steps]
    turn.ctx.note("PLAN", json.dumps([p.to_json_dict() for p in shown], ensure_ascii=False))
    return PlanEvent(goal=goal, steps=shown, repaired=repaired)


def store_plan(turn: Turn, goal: str, steps: tuple[PlanStep, ...], plan_id: str) -> ExecutionState:
    """Record *steps* as the flow's plan (its goal *goal*, or the request)."""
    stored = turn.state.with_steps(steps, plan_id=plan_id)
    fields = {name: getattr(stored, name) for name in type(stored).model_fields}
    fields["goal"] = goal or cut(turn.ctx.text, 500)
    return turn.flow.save(ExecutionState.model_validate(fields))


def run_plan(prompt: Callable[[Turn], list[ChatMessage]]) -> Stage:
    """Ask for a whole plan (or a first batch) from *prompt*'s messages, store and announce
    it, then execute it."""

    async def plan(turn: Turn) -> AsyncIterator[Item]:
        goal, steps, repaired = await calls.request_plan(turn, prompt(turn), "plan")
        state = store_plan(turn, goal, steps, f"plan-{turn.ctx.message_id}")
        yield plan_event(turn, state.goal, steps, repaired)
        yield Then(execute)

    return plan


async def execute(turn: Turn) -> AsyncIterator[Item]:
    """The next pending step, or the strategy's next steps, or the end of the flow."""
    step = turn.state.next_pending_step()
    if step is None:
        more = None if turn.outcome.goal_reached else turn.ctx.strategy.more_steps(turn)
        if more is not None:
            yield Then(more)  # it goes on with execute once it has added steps
            return
        state = turn.state
        turn.outcome.answer = context.fallback_answer(state)
        turn.flow.save(state.complete(turn.outcome.answer))
        return
    turn.outcome.iterations += 1
    bound = turn.ctx.config.max_iterations
    if turn.outcome.iterations > bound:
        raise TurnFailedError("iteration_limit", f"stopped after {bound} iterations")
    turn.check_cancel()
    yield Then(run_step(step))


def run_step(step: PlanStep) -> Stage:
    """The stage that runs *step*: a question, the answer, a consent request, a tool or a
    reasoning step (the last two followed by the strategy's decision)."""
    if step.type == "ask_user":
        return _ask(step)
    if step.type == "respond":
        return respond(step)
    if step.type == "reason":
        return _reason(step)

    def dispatch(turn: Turn) -> AsyncIterator[Item]:
        tools = turn.ctx.tools
        tool = tools.get(step.tool_name) if step.tool_name in tools else None
        if tool is not None and tool.side_effect:
            if reads.drop_writes(turn):  # a read's turn: never proposed as a consent
                return _dropped(step)(turn)
            return _ask_consent(step)(turn)  # whatever requires_confirmation says
        return run_tool(step)(turn)

    return dispatch


def _after(turn: Turn, step: PlanStep) -> Then | None:
    """After a tool or reason step: the strategy's decision, while the flow is running."""
    if turn.state.status != "running":
        return None
    return Then(turn.ctx.strategy.after_step(turn, step.id))


def _dropped(step: PlanStep) -> Stage:
    """A side-effecting step in a turn whose request asks for nothing to change (a
    ``tool_loop`` action, a step planned before the rule): skipped and noted, then the
    answer from what is known."""

    async def drop(turn: Turn) -> AsyncIterator[Item]:
        reads.note_dropped(turn, step, "step")
        state = turn.state
        skipped = tuple(
            s.model_copy(update={"status": "skipped"}) if s.id == step.id else s
            for s in state.steps
        )
        state = state.with_steps(skipped, plan_id=state.plan_id)
        if state.next_pending_step() is None:
            ids = {s.id for s in state.steps}
            answer = PlanStep(
                id=next(
                    f"answer_reads_{n}"
                    for n in range(1, len(ids) + 2)
                    if f"answer_reads_{n}" not in ids
                ),
                type="respond",
                title="Answer",
                instruction="Answer the request from the observations; nothing is to be changed.",
            )
            state = state.with_steps((*state.steps, answer), plan_id=state.plan_id)
        turn.flow.save(state)
        yield Then(execute)

    return drop


def _ask_consent(step: PlanStep) -> Stage:
    async def ask(turn: Turn) -> AsyncIterator[Item]:
        args = mask_secrets(dict(step.tool_args))
        shown = json.dumps(args, ensure_ascii=False, sort_keys=True)
        tools = turn.ctx.tools
        tool = tools.get(step.tool_name) if step.tool_name in tools else None
        language = conversation_language([turn.ctx.text, *_user_texts(turn)])
        question = consent_question(step.tool_name, step.tool_args, tool, language)
        approval = new_approval(step, turn.ctx.tools, question)
        waiting = Waiting(
            question=question,
            intent="confirm_action",
            confirmation_target=f"{step.tool_name} {shown}",
            approval=approval,
        )
        state = turn.state.mark_step_running(step.id)
        turn.flow.save(state.pause(waiting, confirmation=True))
        turn.outcome.answer = question
        if turn.ctx.trace is not None:
            turn.ctx.trace.event(
                semconv.CONSENT_EVENT,
                {
                    semconv.TOOL_NAME: step.tool_name,
                    semconv.TOOL_CALL_ID: step.id,
                    "agentkit.approval_id": approval.approval_id,
                },
            )
        yield AskUserEvent(
            question=question,
            kind="confirmation",
            tool_name=step.tool_name,
            tool_args=args if isinstance(args, dict) else {},
            approval_id=approval.approval_id,
        )

    return ask


def _user_texts(turn: Turn) -> list[str]:
    """The conversation's user messages, latest first (for the question's language)."""
    return [m.content for m in reversed(turn.ctx.window) if m.role == "user" and m.content]


def _ask(step: PlanStep) -> Stage:
    async def ask(turn: Turn) -> AsyncIterator[Item]:
        question = step.instruction or step.title
        state = turn.state.mark_step_running(step.id)
        waiting = Waiting(question=question, intent="provide_missing_information")
        turn.flow.save(state.pause(waiting))
        turn.outcome.answer = question
        if turn.ctx.trace is not None:
            turn.ctx.trace.event(semconv.QUESTION_EVENT, {"agentkit.step_id": step.id})
        yield AskUserEvent(question=question)

    return ask


def run_tool(step: PlanStep) -> Stage:
    """Run a tool step (consent, if it needed any, was given); its result is observed.

    A side-effecting step is durable as running before its tool runs and as done after, so
    a crash in between is seen on restart and the tool is never run twice."""

    async def tool(turn: Turn) -> AsyncIterator[Item]:
        ctx, flow = turn.ctx, turn.flow
        tools = ctx.tools
        side_effect = step.tool_name in tools and tools.get(step.tool_name).side_effect
        state = flow.save(turn.state.mark_step_running(step.id), durable=side_effect)
        yield StepStartEvent(step_id=step.id, step_type=step.type, title=step.title)
        yield ToolCallEvent(id=step.id, name=step.tool_name, arguments=planned(step).tool_args)
        trace = ctx.trace
        span = trace.tool_call(None, name=step.tool_name, call_id=step.id) if trace else None
        try:
            if span is None:
                result = await tools.arun(step.tool_name, flow.tool_args(step))
            else:
                with span.activate():  # an MCP tool's client call is its child
                    result = await tools.arun(step.tool_name, flow.tool_args(step))
            ok, text = result.ok, result.text
        except (UnknownToolError, ToolArgumentsError, ToolCrashedError) as error:
            ok, text = False, json.dumps({"error": ctx.scrub(str(error))}, ensure_ascii=False)
        except BaseException as error:
            if span is not None:
                span.fail(type(error).__name__)
                span.end()
            raise
        if span is not None:
            if trace is not None and trace.capture:
                trace.content(span, semconv.TOOL_CALL_ARGUMENTS, planned(step).tool_args)
                trace.content(span, semconv.TOOL_CALL_RESULT, ctx.scrub(cut(text)))
            if not ok:
                span.fail("tool_error", ctx.scrub(cut(text, 300)))
            span.end()
        summary = cut(text)
        state = state.observe(Observation(step_id=step.id, kind="tool_result", content=summary))
        if ok:
            state = state.mark_step_done(step.id, cut(text, 300))
        else:
            state = state.mark_step_failed(step.id, cut(text, 300))
        flow.save(state, durable=side_effect)
        yield ToolResultEvent(id=step.id, name=step.tool_name, output=summary, ok=ok)
        yield StepCompleteEvent(
            step_id=step.id, status="done" if ok else "failed", summary=cut(text, 300)
        )
        after = _after(turn, step)
        if after is not None:
            yield after

    return tool


def _reason(step: PlanStep) -> Stage:
    async def reason(turn: Turn) -> AsyncIterator[Item]:
        state = turn.flow.save(turn.state.mark_step_running(step.id))
        yield StepStartEvent(step_id=step.id, step_type=step.type, title=step.title)
        prompt = render_prompt(
            "reason",
            turn.ctx.agent_dir,
            goal=state.goal,
            observations=context.observations(state),
            instruction=step.instruction or step.title,
        )
        try:
            text = (await calls.text_reply(turn, "reason", context.messages(turn, prompt))).strip()
            ok = True
        except (ModelError, TimeoutError) as error:
            text, ok = f"reasoning failed: {error_text(error)}", False
        state = state.observe(Observation(step_id=step.id, kind="reasoning", content=cut(text)))
        state = (
            state.mark_step_done(step.id, cut(text, 300))
            if ok
            else state.mark_step_failed(step.id, text)
        )
        turn.flow.save(state)
        yield StepCompleteEvent(
            step_id=step.id, status="done" if ok else "failed", summary=cut(text, 300)
        )
        after = _after(turn, step)
        if after is not None:
            yield after

    return reason


def respond(step: PlanStep) -> Stage:
    """The answer, streamed; a cancel keeps what was said so far."""

    async def answer(turn: Turn) -> AsyncIterator[Item]:
        ctx = turn.ctx
        state = turn.flow.save(turn.state.mark_step_running(step.id))
        yield StepStartEvent(step_id=step.id, step_type=step.type, title=step.title)
        prompt = render_prompt(
            "respond",
            ctx.agent_dir,
            request=ctx.scrub(ctx.text),
            goal=state.goal,
            instruction=step.instruction or step.title,
            observations=context.observations(state),
            conversation=context.conversation(turn),
        )
        pieces: list[str] = []
        said = ""
        try:
            async with turn.calls.call("respond", context.messages(turn, prompt)) as call:
                async for event in call.stream():
                    if turn.cancel.requested:
                        break  # keep what was said so far
                    if isinstance(event, TextDelta):
                        pieces.append(event.text)
                        yield AgentOutputEvent(text=event.text)
                said = ctx.scrub("".join(pieces).strip())
                if turn.cancel.requested:
                    turn.outcome.answer = said
                    call.read(raw=said, parsed=said, error="cancelled by the user")
                    raise TurnCancelledError("cancelled by the user")
                call.read(raw=said, parsed=said)
        except (ModelError, TimeoutError):
            said = context.fallback_answer(state)
            if not pieces:
                yield AgentOutputEvent(text=said)
        said = said or context.fallback_answer(state)
        turn.outcome.answer = said
        turn.flow.save(state.mark_step_done(step.id, cut(said, 300)).complete(said))
        yield StepCompleteEvent(step_id=step.id, status="done", summary=cut(said, 300))

    return answer


def live_state(then: Stage) -> Stage:
    """Re-run the argument-free ``live_state`` tools; their results become observations the
    plan prompt shows instead of (possibly stale) TaskState. Then *then*."""

    async def refresh(turn: Turn) -> AsyncIterator[Item]:
        tools, flow, trace = turn.ctx.tools, turn.flow, turn.ctx.trace
        for tool in tools.live_state_tools():
            try:
                tools.validate(tool.name, {})
            except ToolArgumentsError:
                continue  # only argument-free snapshots can be re-run blindly
            call_id = f"live-{tool.name}"
            yield ToolCallEvent(id=call_id, name=tool.name, arguments={})
            span = trace.tool_call(None, name=tool.name, call_id=call_id) if trace else None
            result = tools.run(tool.name, {})
            if span is not None:
                if not result.ok:
                    span.fail("tool_error", turn.ctx.scrub(cut(result.text, 300)))
                span.end()
            content = cut(f"{tool.name}: {result.text}")
            flow.save(turn.state.observe(Observation(kind="live_state", content=content)))
            yield ToolResultEvent(id=call_id, name=tool.name, output=result.text, ok=result.ok)
        yield Then(then)

    return refresh
