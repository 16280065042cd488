"""Routing a user message: a fast path, an answer to what is pending, or a new request.

The order, and why:

1. Fast paths, no model call: ``/clear`` and ``/status``.
2. A stale ExecutionState (capability signature = tool schemas + planner version + strategy
   differs) is discarded *before* anything resumes: its steps name tools that may no longer
   exist.
3. **A pending question comes first.** While waiting_user, the message is the answer (a
   ``user_reply`` observation naming the question) unless it is an explicit change of subject.
   While waiting_confirmation, a confirmation runs exactly the stored tool call, a refusal
   cancels it, anything else cancels it and is planned as a new request. Only when nothing is
   pending does the reset rule apply (retry words; a config request over a finished state).
   The seed did it the other way round, so "好了" threw away the question it answered.
4. A new request: a fresh ``planning`` state, the live-state pre-check (a configuration
   request re-runs the ``live_state`` tools and the prompt carries their fresh results instead
   of TaskState, which may be stale), the ``planning`` event, then the strategy.

The live-state decision (keywords, then the model's classification when configured) is made
once, here, and carried to the strategy in the turn's :class:`~agentkit.planning.state.Request`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

from agentkit.events import AgentEvent, PlanningEvent
from agentkit.memory import ExecutionState, Observation, PendingApproval
from agentkit.planning import approvals, context, grounding, intents, replies
from agentkit.planning.approvals import Decision
from agentkit.planning.graph import End, Stage, Turn
from agentkit.planning.plan import PlanFormatError, parse_classify
from agentkit.planning.prompts import render_prompt
from agentkit.planning.schemas import classify_schema
from agentkit.planning.state import Request, cut
from agentkit.planning.steps import Execute, LiveState, RunTool

__all__ = ["Answered", "Confirmed", "NewRequest", "Route", "fast_path"]


def fast_path(turn: Turn) -> End | None:
    """``/clear`` and ``/status``: answered without a model call."""
    ctx = turn.ctx
    key, memory = ctx.key, ctx.memory
    command = ctx.text.strip().lower()
    if command == "/clear":
        memory.clear(key.agent_id, key.conversation_id)
        return End("🧹 Conversation memory cleared (history window, TaskState, ExecutionState).")
    if command == "/status":
        return End(context.status_text(ctx, turn.flow.state, turn.intake.task.value))
    return None


@dataclass(frozen=True, slots=True)
class Route(Stage):
    """What a message is, and the stage that handles it (see the module docstring)."""

    async def run(
        self, turn: Turn
    ) -> AsyncIterator[AgentEvent | Confirmed | Answered | NewRequest | End]:
        fast = fast_path(turn)
        if fast is not None:
            yield fast
            return
        ctx, flow = turn.ctx, turn.flow
        text = ctx.text
        state = flow.state  # read once, at intake
        if state is not None and state.capability_signature != turn.signature:
            ctx.note("RESET", "capability signature changed: stale execution state discarded")
            flow.discard()
            if ctx.decision is not None:  # a decision is no request: nothing left to decide
                yield End(
                    "The agent's tools changed since this was asked, so the pending call was "
                    "dropped; nothing was run. Ask again if it is still needed."
                )
                return
            state = None
        if state is not None:
            lost = flow.interrupted(state, ctx.tools, turn.intake.history)
            if lost is not None:  # its turn was killed after (or while) running a side effect
                yield End(lost)
                return
        if state is not None and state.status == "waiting_confirmation":
            decided = _decide(turn, state)
            if decided is not None:
                yield decided
                return
            state = None
        elif state is not None and state.status == "waiting_user":
            if not intents.is_switch(text):
                yield Answered(state)
                return
            flow.cancel_pending(state)
            state = None
        live = intents.is_live_state_request(text, ctx.config.live_state_keywords)
        previous = state
        if state is not None and (
            intents.is_retry(text) or (live and state.status in ("completed", "failed"))
        ):
            ctx.note("RESET", "reset rule: retry or config request over a finished flow")
            previous = None
        turn.decide(Request(live=live, previous=previous))
        yield NewRequest()


def _decide(turn: Turn, state: ExecutionState) -> Confirmed | End | None:
    """A pending approval meets this turn: its decision (the turn's input, or the user's
    typed "yes"/"no" reply), its expiry, or a new request that cancels it. The stage that
    runs the approved call, the end (an answer), or None (route the text as a new request)."""
    ctx, flow = turn.ctx, turn.flow
    approval = state.pending_approval
    decision = ctx.decision  # a decision is read as the value it is, never as words
    if decision is None:
        decision = approvals.from_text(state, ctx.text)
    if approval is not None and approvals.is_expired(approval, ctx.config.approval_ttl_seconds):
        expired = Decision(approval.approval_id, "reject", "ttl", note="expired")
        what = flow.cancel_pending(state.decided(expired.record(approval, "expired")))
        ctx.note("CONSENT", f"{approval.approval_id} expired: {what}")
        answer = (
            f"The request to run {approval.tool_name} expired before it was approved; "
            "nothing was run. Ask again if it is still needed."
        )
        return None if decision is None else End(answer)
    if decision is None:  # another request: the pending call is withdrawn, not run
        if approval is not None:
            state = state.decided(
                Decision(approval.approval_id, "reject", "text", note="a new request").record(
                    approval
                )
            )
        flow.cancel_pending(state)
        return None
    if approval is None:  # a flow paused before approvals were values: decide by the step
        approval = PendingApproval(
            approval_id=decision.approval_id,
            tool_name=state.step(state.current_step_id).tool_name,
            step_id=state.current_step_id,
        )
    if decision.decision == "approve":
        return Confirmed(state, approval, decision)
    what = flow.cancel_pending(state.decided(decision.record(approval)))
    ctx.note("CONSENT", f"{approval.approval_id} rejected via {decision.source}: {what}")
    return End(f"OK, cancelled — {what}.")


@dataclass(frozen=True, slots=True)
class Confirmed(Stage):
    """The user approved: run exactly the stored tool call (or the approved edit of it),
    then carry on."""

    state: ExecutionState
    approval: PendingApproval
    decision: Decision

    async def run(self, turn: Turn) -> AsyncIterator[AgentEvent | RunTool]:
        state, approval, decision = self.state, self.approval, self.decision
        step = state.step(approval.step_id or state.current_step_id)
        resumed = state.decided(decision.record(approval)).resume()
        if decision.args is not None:
            resumed = turn.flow.replace_args(resumed, step.id, decision.args)
            step = resumed.step(step.id)
        reply = Observation(
            step_id=step.id, kind="user_reply", content=f"confirmed {step.tool_name}"
        )
        edited = " with edited arguments" if decision.args is not None else ""
        args = json.dumps(
            turn.ctx.mask.json(dict(step.tool_args)), ensure_ascii=False, sort_keys=True
        )
        turn.ctx.note(
            "CONSENT",
            f"{approval.approval_id} approved via {decision.source}{edited}: {step.tool_name} "
            f"{args}",
        )
        # recorded with the step's durable "running" state: the decision is consumed there
        # (until then a crash leaves the approval pending; after it, never run again)
        turn.flow.carry(resumed.observe(reply))
        yield RunTool(step)


@dataclass(frozen=True, slots=True)
class Answered(Stage):
    """The message answers the pending question: observed with an explicit resume context."""

    state: ExecutionState

    async def run(self, turn: Turn) -> AsyncIterator[AgentEvent | Stage]:
        ctx, state = turn.ctx, self.state
        waiting = state.waiting
        question = waiting.question if waiting else ""
        reply = ctx.scrub(ctx.text)
        resume_context = f'The user answered the question "{question}": {reply}'
        resumed = state.resume().observe(
            Observation(
                step_id=state.current_step_id, kind="user_reply", content=cut(resume_context)
            )
        )
        step_id = resumed.current_step_id
        if step_id:
            resumed = resumed.mark_step_done(step_id, cut(reply, 200))
        if waiting is not None and waiting.intent == grounding.INTENT:
            turn.flow.save(resumed)  # asked for a call's arguments: back to that call
            yield Execute()
            return
        turn.flow.save(turn.strategy.answered(resumed))
        # the answer may change what comes next (e.g. fill a tool's arguments)
        yield turn.strategy.resume(turn, step_id) or Execute()


@dataclass(frozen=True, slots=True)
class NewRequest(Stage):
    """A fresh ``planning`` state, the live-state pre-check, then the strategy."""

    async def run(self, turn: Turn) -> AsyncIterator[AgentEvent | Stage]:
        ctx = turn.ctx
        turn.flow.save(
            ExecutionState(
                session_id=f"sess-{ctx.message_id}",
                conversation_id=ctx.key.conversation_id,
                goal=cut(ctx.scrub(ctx.text), 500),
                status="planning",
                capability_signature=turn.signature,
                decisions=turn.state.decisions,  # a decided approval stays decided
            )
        )
        request = turn.request
        if not request.live and ctx.config.classify and await _classify(turn):
            turn.decide(Request(live=True, previous=request.previous))
        if turn.request.live:
            yield LiveState(Planning())
            return
        yield PlanningEvent(live_state=[], task_state_included=True)
        yield turn.strategy.start(turn)


@dataclass(frozen=True, slots=True)
class Planning(Stage):
    """The ``planning`` event after the live-state refresh, then the strategy."""

    async def run(self, turn: Turn) -> AsyncIterator[AgentEvent | Stage]:
        refreshed = [
            obs.content.partition(":")[0]
            for obs in turn.state.observations
            if obs.kind == "live_state"
        ]
        yield PlanningEvent(live_state=refreshed, task_state_included=False)
        yield turn.strategy.start(turn)


async def _classify(turn: Turn) -> bool:
    """Ask the model whether the request is about live configuration; a failed or invalid
    reply leaves the keyword decision (not live) in place."""
    ctx = turn.ctx
    prompt = render_prompt("classify", ctx.agent_dir, request=ctx.scrub(ctx.text))
    sent = context.messages(ctx, prompt)
    problem, value, _ = await replies.structured(turn, "classify", sent, classify_schema())
    if not problem:
        try:
            return parse_classify(value) == "live_state"
        except PlanFormatError as error:
            problem = error.problem
    ctx.note("CLASSIFY", f"no usable classification ({problem}); keywords decide")
    return False
