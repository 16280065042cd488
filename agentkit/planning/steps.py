"""The execute loop's stages and the steps they run: tool, reason, respond, ask_user.

Each is a stage (:class:`~agentkit.planning.graph.Stage`): it yields its events and names what
comes next, and :func:`agentkit.planning.turn.drive` runs it. :class:`Execute` picks the next
pending step (the driver bounds the step stages by ``max_iterations`` and checks for a cancel
first); when none is pending the strategy may plan more (``next_step``); after a tool or reason
step the strategy decides what follows (``plan_replan`` replans). **A side-effecting tool
never runs without consent**, whatever ``requires_confirmation`` says: the turn ends in
waiting_confirmation naming the exact tool and arguments, and the stored call runs only after
a confirmation. A running tool is never interrupted (a write is never cut in half); finished
steps are never run again.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from agentkit import language
from agentkit.calls.errors import TurnCancelledError
from agentkit.calls.tracer import error_text
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
from agentkit.planning import context, gate, grounding, replies
from agentkit.planning.approvals import new_approval
from agentkit.planning.consent import consent_question
from agentkit.planning.graph import End, Stage, Turn
from agentkit.planning.observed import observed_answer
from agentkit.planning.prompts import render_prompt
from agentkit.planning.state import cut, planned
from agentkit.telemetry import semconv
from agentkit.tools.registry import ToolArgumentsError, ToolCrashedError, UnknownToolError

__all__ = [
    "AskArguments",
    "AskConsent",
    "AskUser",
    "Held",
    "Execute",
    "Finish",
    "LiveState",
    "Reason",
    "Respond",
    "RunPlan",
    "RunStep",
    "RunTool",
    "Told",
    "ToolStep",
    "plan_event",
    "run_step",
    "store_plan",
]

#: the messages a strategy's plan prompt sends, for a turn
PromptFor = Callable[[Turn], list[ChatMessage]]


def plan_event(turn: Turn, goal: str, steps: tuple[PlanStep, ...], repaired: bool) -> PlanEvent:
    """Note the new steps in the turn log; the ``plan`` event announcing them."""
    mask = turn.ctx.mask
    shown = [planned(step, mask) for step in steps]
    turn.ctx.note("PLAN", json.dumps([p.to_json_dict() for p in shown], ensure_ascii=False))
    return PlanEvent(goal=mask.text(goal), steps=shown, repaired=repaired)


def store_plan(turn: Turn, goal: str, steps: tuple[PlanStep, ...], plan_id: str) -> ExecutionState:
    """Record *steps* as the flow's plan (its goal *goal*, or the request), masked."""
    mask = turn.ctx.mask
    steps = tuple(
        step.model_copy(update={"title": mask.text(step.title)}) if step.title else step
        for step in steps
    )
    stored = turn.state.with_steps(steps, plan_id=plan_id)
    fields = {name: getattr(stored, name) for name in type(stored).model_fields}
    fields["goal"] = mask.text(goal) or cut(mask.text(turn.ctx.text), 500)
    return turn.flow.save(ExecutionState.model_validate(fields))


def run_step(step: PlanStep) -> Stage:
    """The stage that runs *step*: a question, the answer, a reasoning step, or a tool
    (a consent request first when it has a side effect)."""
    if step.type == "ask_user":
        return AskUser(step)
    if step.type == "respond":
        return Respond(step)
    if step.type == "reason":
        return Reason(step)
    return ToolStep(step)


def _after(turn: Turn, step: PlanStep) -> Stage | End:
    """After a tool or reason step: the strategy's decision while the flow is running (by
    default the next step), else the end of the turn. Under ``answers: observed`` a write the
    user consented to, with nothing left pending, ends the turn with what it returned (no
    model call after a decision)."""
    state = turn.state
    if state.status != "running":
        return End(state.final_answer)
    tools = turn.tools
    wrote = step.tool_name in tools and tools.get(step.tool_name).side_effect
    if wrote and turn.ctx.config.answers == "observed" and state.next_pending_step() is None:
        return Told()
    return turn.strategy.after_step(turn, step.id) or Execute()


@dataclass(frozen=True, slots=True)
class Told(Stage):
    """The answer told from what the flow's tools returned (``answers: observed``)."""

    async def run(self, turn: Turn) -> AsyncIterator[AgentEvent | End]:
        state = turn.state
        said = observed_answer(turn) or context.fallback_answer(state)
        yield AgentOutputEvent(text=said)
        turn.flow.save(state.complete(said))
        yield End(said)


@dataclass(frozen=True, slots=True)
class RunPlan(Stage):
    """Ask for a whole plan (or a first batch) from *prompt*'s messages, store and announce
    it, then execute it."""

    prompt: PromptFor

    async def run(self, turn: Turn) -> AsyncIterator[AgentEvent | Execute]:
        goal, steps, repaired = await replies.request_plan(turn, self.prompt(turn), "plan")
        state = store_plan(turn, goal, steps, f"plan-{turn.ctx.message_id}")
        yield plan_event(turn, state.goal, steps, repaired)
        yield Execute()


@dataclass(frozen=True, slots=True)
class Execute(Stage):
    """The next pending step, or the strategy's next steps, or the end of the flow."""

    async def run(self, turn: Turn) -> AsyncIterator[AgentEvent | Stage]:
        step = turn.state.next_pending_step()
        if step is not None:
            yield RunStep(step)
            return
        yield turn.strategy.more_steps(turn) or Finish()


@dataclass(frozen=True, slots=True)
class RunStep(Stage):
    """The execute loop's next iteration: the pending step *step* runs (see
    :func:`run_step`)."""

    iteration = True
    step: PlanStep

    async def run(self, turn: Turn) -> AsyncIterator[AgentEvent | Stage]:
        yield run_step(self.step)


@dataclass(frozen=True, slots=True)
class Finish(Stage):
    """No step is left: the flow completes, its answer what it did."""

    async def run(self, turn: Turn) -> AsyncIterator[AgentEvent | End]:
        state = turn.state
        answer = context.fallback_answer(state)
        turn.flow.save(state.complete(answer))
        yield End(answer)


@dataclass(frozen=True, slots=True)
class ToolStep(Stage):
    """A tool step of the plan, through the gate (:mod:`agentkit.planning.gate`) — the one
    place every proposed call is decided: run, a question for its missing arguments, a
    consent request (a side effect), or held back (the answer then comes from what is known)."""

    step: PlanStep

    async def run(self, turn: Turn) -> AsyncIterator[AgentEvent | Stage]:
        step = self.step
        decision = gate.policy(turn).review(turn, step)
        if decision.args != turn.flow.tool_args(step):
            turn.flow.save(turn.flow.replace_args(turn.state, step.id, decision.args))
            step = turn.state.step(step.id)
            notes = f"; {'; '.join(decision.notes)}" if decision.notes else ""
            turn.ctx.note("GATE", f"{step.tool_name}: arguments updated{notes}")
        verdict = decision.verdict
        if isinstance(verdict, gate.Refuse):
            yield Held(step, verdict)
        elif isinstance(verdict, gate.Ask) and verdict.fields:
            yield AskArguments(step, verdict)
        elif isinstance(verdict, gate.Ask):
            yield AskConsent(step, verdict)
        else:
            yield RunTool(step)


@dataclass(frozen=True, slots=True)
class Held(Stage):
    """A call the gate refused: the step is skipped and noted (the turn log's ``[GATE]``, an
    observation the answer can see), then the answer from what is known."""

    step: PlanStep
    verdict: gate.Refuse

    async def run(self, turn: Turn) -> AsyncIterator[AgentEvent | Execute]:
        step, verdict = self.step, self.verdict
        args = json.dumps(turn.ctx.mask.json(dict(step.tool_args)), ensure_ascii=False)
        text = f"{step.tool_name} {cut(args, 200)} not run ({verdict.rule}): {verdict.why}"
        turn.ctx.note("GATE", text)
        state = turn.state.observe(Observation(step_id=step.id, kind="note", content=text))
        skipped = tuple(
            s.model_copy(update={"status": "skipped"}) if s.id == step.id else s
            for s in state.steps
        )
        state = state.with_steps(skipped, plan_id=state.plan_id)
        if state.next_pending_step() is None:
            ids = {s.id for s in state.steps}
            answer = PlanStep(
                id=next(f"answer_{n}" for n in range(1, len(ids) + 2) if f"answer_{n}" not in ids),
                type="respond",
                title="Answer",
                instruction="Answer the request from the observations.",
            )
            state = state.with_steps((*state.steps, answer), plan_id=state.plan_id)
        turn.flow.save(state)
        yield StepCompleteEvent(
            step_id=step.id,
            status="skipped",
            summary=text,
            rule=verdict.rule,
            reason=verdict.why,
            tool_name=step.tool_name,
        )
        yield Execute()


@dataclass(frozen=True, slots=True)
class AskArguments(Stage):
    """A call's required arguments are not grounded: the question, asked as an ``ask_user``
    step placed before the call (which stays pending); the turn ends with it. The answer
    brings the flow back to the call (:data:`~agentkit.planning.grounding.INTENT`)."""

    step: PlanStep
    verdict: gate.Ask

    async def run(self, turn: Turn) -> AsyncIterator[AgentEvent | End]:
        step, ctx, missing = self.step, turn.ctx, self.verdict.fields
        tool = turn.tools.get(step.tool_name)
        code = language.detect([ctx.text, *_user_texts(turn)])
        does = " ".join(tool.description.split())
        does = does if len(does) <= 120 else does[:117].rstrip() + "..."
        text = ctx.scrub(language.ask_arguments(tool.name, does, missing, code, ctx.agent_dir))
        state = turn.state
        ids = {s.id for s in state.steps}
        number = 1
        while f"ask_{step.id}_{number}" in ids:
            number += 1
        ask = PlanStep(
            id=f"ask_{step.id}_{number}", type="ask_user", title="Question", instruction=text
        )
        steps: list[PlanStep] = []
        for s in state.steps:
            if s.id == step.id:
                steps.append(ask)
            steps.append(s)
        if step.id not in ids:
            steps.append(ask)
        state = state.with_steps(tuple(steps), plan_id=state.plan_id).mark_step_running(ask.id)
        waiting = Waiting(question=text, intent=grounding.INTENT, pending_fields=missing)
        turn.flow.save(state.pause(waiting))
        ctx.note("GATE", f"{step.tool_name}: asked for {', '.join(missing)} ({self.verdict.why})")
        if turn.trace is not None:
            turn.trace.event(semconv.QUESTION_EVENT, {"agentkit.step_id": ask.id})
        yield AskUserEvent(
            question=text, step_id=ask.id, rule=self.verdict.rule, reason=self.verdict.why
        )
        yield End(text)


@dataclass(frozen=True, slots=True)
class AskConsent(Stage):
    """A side-effecting step waits for the user's consent: the turn ends with the question."""

    step: PlanStep
    verdict: gate.Ask

    async def run(self, turn: Turn) -> AsyncIterator[AgentEvent | End]:
        step, ctx = self.step, turn.ctx
        args = ctx.mask.json(dict(step.tool_args))
        shown = json.dumps(args, ensure_ascii=False, sort_keys=True)
        tools = turn.tools
        tool = tools.get(step.tool_name) if step.tool_name in tools else None
        code = language.detect([ctx.text, *_user_texts(turn)])
        question = ctx.scrub(
            consent_question(step.tool_name, step.tool_args, tool, code, ctx.agent_dir)
        )
        approval = new_approval(step, tools, question)
        waiting = Waiting(
            question=question,
            intent="confirm_action",
            confirmation_target=f"{step.tool_name} {shown}",
            approval=approval,
        )
        state = turn.state.mark_step_running(step.id)
        turn.flow.save(state.pause(waiting, confirmation=True))
        if turn.trace is not None:
            turn.trace.event(
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
            step_id=step.id,
            rule=self.verdict.rule,
            reason=self.verdict.why,
        )
        yield End(question)


def _user_texts(turn: Turn) -> list[str]:
    """The conversation's user messages, latest first (for the question's language)."""
    return [m.content for m in reversed(turn.intake.window) if m.role == "user" and m.content]


@dataclass(frozen=True, slots=True)
class AskUser(Stage):
    """A question to the user: the flow pauses, the turn ends with the question."""

    step: PlanStep

    async def run(self, turn: Turn) -> AsyncIterator[AgentEvent | End]:
        step = self.step
        question = turn.ctx.scrub(step.instruction or step.title)
        state = turn.state.mark_step_running(step.id)
        waiting = Waiting(question=question, intent="provide_missing_information")
        turn.flow.save(state.pause(waiting))
        if turn.trace is not None:
            turn.trace.event(semconv.QUESTION_EVENT, {"agentkit.step_id": step.id})
        yield AskUserEvent(question=question, step_id=step.id)
        yield End(question)


@dataclass(frozen=True, slots=True)
class RunTool(Stage):
    """Run a tool step (consent, if it needed any, was given); its result is observed.

    A side-effecting step is durable as running before its tool runs and as done after, so
    a crash in between is seen on restart and the tool is never run twice."""

    step: PlanStep

    async def run(self, turn: Turn) -> AsyncIterator[AgentEvent | Stage | End]:
        step, ctx, flow = self.step, turn.ctx, turn.flow
        tools = turn.tools
        side_effect = step.tool_name in tools and tools.get(step.tool_name).side_effect
        state = flow.save(turn.state.mark_step_running(step.id), durable=side_effect)
        yield StepStartEvent(step_id=step.id, step_type=step.type, title=step.title)
        shown = planned(step, ctx.mask).tool_args
        yield ToolCallEvent(id=step.id, name=step.tool_name, arguments=shown)
        trace = turn.trace
        span = trace.tool_call(None, name=step.tool_name, call_id=step.id) if trace else None
        try:
            if span is None:
                result = await tools.arun(step.tool_name, flow.tool_args(step))
            else:
                with span.activate():  # an MCP tool's client call is its child
                    result = await tools.arun(step.tool_name, flow.tool_args(step))
            ok, text = result.ok, ctx.scrub(result.text)
        except (UnknownToolError, ToolArgumentsError, ToolCrashedError) as error:
            ok, text = False, json.dumps({"error": ctx.scrub(str(error))}, ensure_ascii=False)
        except BaseException as error:
            if span is not None:
                span.fail(type(error).__name__)
                span.end()
            raise
        if span is not None:
            if trace is not None and trace.capture:
                trace.content(span, semconv.TOOL_CALL_ARGUMENTS, shown)
                trace.content(span, semconv.TOOL_CALL_RESULT, cut(text))
            if not ok:
                span.fail("tool_error", cut(text, 300))
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
        yield _after(turn, step)


@dataclass(frozen=True, slots=True)
class Reason(Stage):
    """A reasoning step: one model call whose text becomes an observation."""

    step: PlanStep

    async def run(self, turn: Turn) -> AsyncIterator[AgentEvent | Stage | End]:
        step, ctx = self.step, turn.ctx
        state = turn.flow.save(turn.state.mark_step_running(step.id))
        yield StepStartEvent(step_id=step.id, step_type=step.type, title=step.title)
        values = turn.prompt.values(state, instruction=step.instruction or step.title)
        prompt = render_prompt("reason", ctx.agent_dir, **values)
        try:
            text = (await replies.text_reply(turn, "reason", context.messages(ctx, prompt))).strip()
            text, ok = ctx.scrub(text), True
        except (ModelError, TimeoutError) as error:
            text, ok = f"reasoning failed: {ctx.scrub(error_text(error))}", False
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
        yield _after(turn, step)


@dataclass(frozen=True, slots=True)
class Respond(Stage):
    """The answer, streamed (secrets masked as it streams); a cancel keeps what was said so
    far."""

    step: PlanStep

    async def run(self, turn: Turn) -> AsyncIterator[AgentEvent | End]:
        step, ctx = self.step, turn.ctx
        state = turn.flow.save(turn.state.mark_step_running(step.id))
        yield StepStartEvent(step_id=step.id, step_type=step.type, title=step.title)
        told = observed_answer(turn) if ctx.config.answers == "observed" else None
        if told is not None:  # the tools' results, told: no model call
            yield AgentOutputEvent(text=told)
            state = turn.state.mark_step_done(step.id, cut(told, 300))
            turn.flow.save(state.complete(told))
            yield StepCompleteEvent(step_id=step.id, status="done", summary=cut(told, 300))
            yield End(told)
            return
        values = turn.prompt.values(
            state, request=ctx.said, instruction=step.instruction or step.title
        )
        prompt = render_prompt("respond", ctx.agent_dir, **values)
        masked = ctx.mask.stream()
        pieces: list[str] = []
        said = ""
        cancelled = False
        try:
            async with turn.tracer.call("respond", context.messages(ctx, prompt)) as call:
                try:
                    async for event in call.stream():
                        if isinstance(event, TextDelta):
                            shown = masked.feed(event.text)
                            if shown:
                                pieces.append(shown)
                                yield AgentOutputEvent(text=shown)
                except TurnCancelledError:
                    cancelled = True  # keep what was said so far
                rest = masked.flush()
                if rest:
                    pieces.append(rest)
                    yield AgentOutputEvent(text=rest)
                said = "".join(pieces).strip()
                call.read(raw=said, parsed=said, error="cancelled by the user" * cancelled)
        except (ModelError, TimeoutError):
            said = context.fallback_answer(state)
            if not pieces:
                yield AgentOutputEvent(text=said)
        if cancelled:
            yield End(said, "cancelled")
            return
        said = said or context.fallback_answer(state)
        turn.flow.save(state.mark_step_done(step.id, cut(said, 300)).complete(said))
        yield StepCompleteEvent(step_id=step.id, status="done", summary=cut(said, 300))
        yield End(said)


@dataclass(frozen=True, slots=True)
class LiveState(Stage):
    """Re-run the argument-free ``live_state`` tools; their results become observations the
    plan prompt shows instead of (possibly stale) TaskState. Then *then*."""

    then: Stage

    async def run(self, turn: Turn) -> AsyncIterator[AgentEvent | Stage]:
        tools, flow, trace = turn.tools, turn.flow, turn.trace
        for tool in tools.live_state_tools():
            try:
                tools.validate(tool.name, {})
            except ToolArgumentsError:
                continue  # only argument-free snapshots can be re-run blindly
            call_id = f"live-{tool.name}"
            yield ToolCallEvent(id=call_id, name=tool.name, arguments={})
            span = trace.tool_call(None, name=tool.name, call_id=call_id) if trace else None
            result = tools.run(tool.name, {})
            text = turn.ctx.scrub(result.text)
            if span is not None:
                if not result.ok:
                    span.fail("tool_error", cut(text, 300))
                span.end()
            content = cut(f"{tool.name}: {text}")
            flow.save(turn.state.observe(Observation(kind="live_state", content=content)))
            yield ToolResultEvent(id=call_id, name=tool.name, output=text, ok=result.ok)
        yield self.then
