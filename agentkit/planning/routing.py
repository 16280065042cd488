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
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from agentkit.events import AgentEvent, PlanningEvent, ToolResultEvent
from agentkit.memory import ExecutionState, Observation
from agentkit.planning import calls, context, intents, recording
from agentkit.planning.plan import PlanFormatError, parse_classify
from agentkit.planning.prompts import render_prompt
from agentkit.planning.schemas import classify_schema
from agentkit.planning.state import TurnState, cut
from agentkit.planning.steps import refresh_live_state, run_tool

__all__ = ["fast_path", "route"]


def fast_path(turn: TurnState) -> bool:
    """``/clear`` and ``/status``: answered without a model call; True when handled."""
    key, memory = turn.deps.key, turn.deps.memory
    command = turn.deps.text.strip().lower()
    if command == "/clear":
        memory.clear(key.agent_id, key.conversation_id)
        turn.answer = "🧹 Conversation memory cleared (history window, TaskState, ExecutionState)."
        return True
    if command == "/status":
        recording.load_state(turn)
        task = memory.load_task_state(key.agent_id, key.conversation_id).value
        turn.answer = context.status_text(turn, task)
        return True
    return False


async def route(turn: TurnState) -> AsyncIterator[AgentEvent]:
    """Everything of a turn between the ``session`` event and its end (see the docstring)."""
    if fast_path(turn):
        return
    key, text = turn.deps.key, turn.deps.text
    turn.task = turn.deps.memory.load_task_state(key.agent_id, key.conversation_id).value
    recording.load_state(turn)
    state = turn.state
    if state is not None and state.capability_signature != turn.signature:
        turn.note("RESET", "capability signature changed: stale execution state discarded")
        recording.discard(turn)
        state = None
    if state is not None and recording.interrupted(turn, state):
        return  # its turn was killed after (or while) running a side-effecting tool
    if state is not None and state.status == "waiting_confirmation":
        if intents.is_confirmation(text):
            async for event in _confirmed(turn, state):
                yield event
            return
        refused = intents.is_refusal(text)
        recording.cancel_pending(turn, state, answer=refused)
        if refused:
            return
        state = None
    elif state is not None and state.status == "waiting_user":
        if not intents.is_switch(text):
            async for event in _answered(turn, state):
                yield event
            return
        recording.cancel_pending(turn, state, answer=False)
        state = None
    previous = state
    if state is not None and (
        intents.is_retry(text)
        or (
            intents.is_live_state_request(text, turn.deps.config.live_state_keywords)
            and state.status in ("completed", "failed")
        )
    ):
        turn.note("RESET", "reset rule: retry or config request over a finished flow")
        previous = None
    turn.previous = previous
    async for event in _new_request(turn):
        yield event


async def _confirmed(turn: TurnState, state: ExecutionState) -> AsyncIterator[AgentEvent]:
    """The user confirmed: run exactly the stored tool call, then carry on."""
    step = state.step(state.current_step_id)
    reply = Observation(step_id=step.id, kind="user_reply", content=f"confirmed {step.tool_name}")
    turn.state = state.resume().observe(reply)  # saved with the step's "running" state:
    async for event in run_tool(turn, step):  # until then a crash leaves the consent pending
        yield event
    async for event in turn.deps.strategy.resume(turn, step.id):
        yield event


async def _answered(turn: TurnState, state: ExecutionState) -> AsyncIterator[AgentEvent]:
    """The message answers the pending question: observed with an explicit resume context."""
    waiting = state.waiting
    question = waiting.question if waiting else ""
    reply = turn.scrub(turn.deps.text)
    resume_context = f'The user answered the question "{question}": {reply}'
    state = state.resume().observe(
        Observation(step_id=state.current_step_id, kind="user_reply", content=cut(resume_context))
    )
    step_id = state.current_step_id
    if step_id:
        state = state.mark_step_done(step_id, cut(reply, 200))
    recording.save(turn, turn.deps.strategy.answered(state))
    # the answer may change what comes next (e.g. fill a tool's arguments)
    async for event in turn.deps.strategy.resume(turn, step_id):
        yield event


async def _new_request(turn: TurnState) -> AsyncIterator[AgentEvent]:
    """A fresh ``planning`` state, the live-state pre-check, then the strategy."""
    deps = turn.deps
    recording.save(
        turn,
        ExecutionState(
            session_id=f"sess-{turn.message_id}",
            conversation_id=deps.key.conversation_id,
            goal=cut(deps.text, 500),
            status="planning",
            capability_signature=turn.signature,
        ),
    )
    live = intents.is_live_state_request(deps.text, deps.config.live_state_keywords)
    if not live and deps.config.classify:
        live = await _classify(turn)
    turn.live = live
    refreshed: list[str] = []
    if live:
        for event in refresh_live_state(turn):
            if isinstance(event, ToolResultEvent):
                refreshed.append(event.name)
            yield event
    yield PlanningEvent(live_state=refreshed, task_state_included=not live)
    async for event in deps.strategy.start(turn):
        yield event


async def _classify(turn: TurnState) -> bool:
    """Ask the model whether the request is about live configuration; a failed or invalid
    reply leaves the keyword decision (not live) in place."""
    prompt = render_prompt("classify", turn.deps.agent_dir, request=turn.scrub(turn.deps.text))
    sent = context.messages(turn, prompt)
    problem, value = await calls.structured(turn, "classify", sent, classify_schema())
    if not problem:
        try:
            return parse_classify(value) == "live_state"
        except PlanFormatError as error:
            problem = error.problem
    turn.note("CLASSIFY", f"no usable classification ({problem}); keywords decide")
    return False
