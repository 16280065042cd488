"""One planner turn (engine ``planner``; seed 002), in one of three strategies.

Order of a turn, and why:

1. The user message is persisted first and ``session`` is the first event (as in chat).
2. Fast paths, no model call: ``/clear`` and ``/status``.
3. A stale ExecutionState (capability signature = tool schemas + planner version differs) is
   discarded *before* anything resumes: its steps name tools that may no longer exist.
4. **A pending question comes first.** While waiting_user, the message is the answer (a
   ``user_reply`` observation naming the question) unless it is an explicit change of subject.
   While waiting_confirmation, a confirmation runs exactly the stored tool call, a refusal
   cancels it, anything else cancels it and is planned as a new request. Only when nothing is
   pending does the reset rule apply (retry words; a config request over a finished state).
   The seed did it the other way round, so "好了" threw away the question it answered.
5. Live-state pre-check: a configuration request re-runs the ``live_state`` tools and the plan
   prompt carries their fresh results instead of TaskState (which may be stale).
6. Plan (purpose ``plan``), validated; one repair round showing the model the problem; then a
   clear ``error`` and status failed.
7. The execute loop, bounded by ``max_steps``/``max_iterations`` and a timeout per stage.
   **A side-effecting tool never runs without consent**, whatever ``requires_confirmation``
   says: the turn ends in waiting_confirmation naming the exact tool and arguments.

Strategies (``planner.strategy``) differ only in steps 6 and 7: ``plan_replan`` plans everything
and asks for a replan decision after each tool or reason step; ``next_step`` plans one batch,
runs it without replanning and plans the next batch from the results (an empty batch ends it);
``tool_loop`` asks for one action per call — a tool call (the backend's native function
calling, or a JSON action for models without it) or the final answer. All three keep the same
ExecutionState, consent rule, resume rule and events, so they can be compared on one scenario.

The ExecutionState is saved (compare-and-swap) after every change, so a new process resumes
where the last one paused; finished steps are never run again. No exception escapes
:meth:`PlannerTurn.run`: failures become an ``error`` event, status failed and a ``result``.
Every model call is traced (``{messageId}/calls.jsonl`` in the conversation folder).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, JsonValue

from agentkit.config import CompressionConfig, PlannerConfig
from agentkit.errors import AgentkitError, CorruptStateError, ModelError, StructuredOutputError
from agentkit.events import (
    AgentEvent,
    AgentOutputEvent,
    AskUserEvent,
    ErrorEvent,
    PlanEvent,
    PlannedStep,
    PlanningEvent,
    ReplanEvent,
    ResultEvent,
    SessionEvent,
    StepCompleteEvent,
    StepStartEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from agentkit.memory import (
    ExecutionState,
    MemoryRepository,
    Observation,
    PlanStep,
    TaskState,
    Waiting,
    estimator_for,
    maybe_compress,
    update_task_state,
)
from agentkit.models.base import (
    ChatMessage,
    ChatModel,
    Completion,
    JsonSchema,
    Purpose,
    SessionBackend,
    TextDelta,
    ToolSpec,
)
from agentkit.planning import intents
from agentkit.planning.plan import (
    ActReply,
    PlanFormatError,
    act_schema,
    check_tool_call,
    classify_schema,
    extract_json,
    parse_act,
    parse_classify,
    parse_plan,
    parse_replan,
    plan_schema,
    replan_schema,
)
from agentkit.planning.prompts import render_prompt
from agentkit.store import ConversationKey, ConversationStore, FileConversationStore
from agentkit.store.kv import ConfigStore
from agentkit.store.sqlite_kv import SqliteConfigStore
from agentkit.tools import ToolRegistry, agent_tools, mask_secrets, scrub_text
from agentkit.tools.registry import ToolArgumentsError, ToolCrashedError, UnknownToolError
from agentkit.tools.secrets import is_masked, is_secret_key
from agentkit.types import Message, Usage, utc_now
from agentkit.workspace import AgentFolder

__all__ = [
    "CONFIG_DB",
    "OBSERVATION_MAX_CHARS",
    "PLANNER_VERSION",
    "STAGE_TIMEOUTS",
    "CallRecord",
    "PlannerTurn",
    "append_call_record",
    "capability_signature",
    "conversation_dir",
    "planner_turn_events",
]

PLANNER_VERSION = "planner/2"
#: the ``system_config`` database under the data root
CONFIG_DB = "agentkit.db"
#: an observation's content is cut to this many characters (the seed's observationMaxLength)
OBSERVATION_MAX_CHARS = 1000
#: seconds per model stage (the seed's planner_runtime.go figures)
STAGE_TIMEOUTS: Mapping[str, float] = {
    "plan": 36.0,
    "replan": 24.0,
    "reason": 30.0,
    "respond": 36.0,
    "act": 36.0,
    "classify": 12.0,
}
CALLS_FILE = "calls.jsonl"
_CONVERSATION_LINES = 12
_CONVERSATION_LINE_CHARS = 500
_PROMPT_OBSERVATIONS = 16

T = TypeVar("T")
TurnStatus = Literal["completed", "failed", "cancelled"]


def capability_signature(tools: ToolRegistry, strategy: str = "plan_replan") -> str:
    """Tool names, flags and schemas plus the planner version and strategy: a plan made under
    another signature is not resumed."""
    return f"{tools.schema_signature()}:{PLANNER_VERSION}:{strategy}"


class CallRecord(BaseModel):
    """One model call of a turn, as written to ``{messageId}/calls.jsonl``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    purpose: Purpose
    messages: list[dict[str, str]]
    schema_: JsonSchema | None = None
    raw: str = ""
    parsed: JsonValue = None
    error: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0

    def to_json_line(self) -> str:
        data = self.model_dump(mode="json")
        data["schema"] = data.pop("schema_")
        return json.dumps(data, ensure_ascii=False)


def append_call_record(conversation_dir: Path, message_id: str, record: CallRecord) -> None:
    """Append *record* to ``{conversation_dir}/{message_id}/calls.jsonl``."""
    turn_dir = conversation_dir / message_id
    turn_dir.mkdir(parents=True, exist_ok=True)
    with open(turn_dir / CALLS_FILE, "a", encoding="utf-8") as calls:
        calls.write(record.to_json_line() + "\n")


class _TurnCancelledError(AgentkitError):
    """:meth:`PlannerTurn.cancel` was called: the turn stops at the next safe point."""


class _TurnFailedError(AgentkitError):
    """Ends the turn with an ``error`` event (code) and status failed."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        super().__init__(message)


def _planned(step: PlanStep) -> PlannedStep:
    args = mask_secrets(dict(step.tool_args))
    return PlannedStep(
        id=step.id,
        step_type=step.type,
        title=step.title,
        tool_name=step.tool_name,
        tool_args=args if isinstance(args, dict) else {},
    )


def _cut(text: str, limit: int = OBSERVATION_MAX_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _with_goal(state: ExecutionState, goal: str) -> ExecutionState:
    data = {name: getattr(state, name) for name in type(state).model_fields}
    return ExecutionState.model_validate({**data, "goal": goal})


_MARKER_PREFIX = "[compressed:"
_MARKER = re.compile(
    r"\[compressed: \d+ earlier messages summarised into TaskState; the last (\d+) kept\]"
)


def _compression_marker(message: Message) -> int | None:
    """How many messages a compression marker kept, or None if *message* is not one."""
    if message.role != "system" or not message.content.startswith(_MARKER_PREFIX):
        return None
    found = _MARKER.fullmatch(message.content)
    return int(found.group(1)) if found else None


def _skip_pending(state: ExecutionState, keep: str = "") -> tuple[PlanStep, ...]:
    """The steps with every pending (or paused) step other than *keep* marked skipped."""
    return tuple(
        step.model_copy(update={"status": "skipped"})
        if step.status in ("pending", "running") and step.id != keep
        else step
        for step in state.steps
    )


@dataclass
class PlannerTurn:
    """Everything one planner turn needs; :meth:`run` streams its events.

    ``conversation_dir`` is where ``{messageId}/calls.jsonl`` goes; None keeps the records in
    :attr:`calls` only (in-memory stores, tests). ``agent_dir`` is where prompt overrides live.
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
    conversation_dir: Path | None = None
    max_turns: int = 20
    compression: CompressionConfig | None = None
    stage_timeouts: Mapping[str, float] = field(default_factory=lambda: dict(STAGE_TIMEOUTS))
    calls: list[CallRecord] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._started = time.perf_counter()
        self._message_id = ""
        self._answer = ""
        self._status: TurnStatus = "completed"
        self._usage = Usage()
        self._state: ExecutionState | None = None
        self._version = 0
        self._history: list[Message] = []
        self._signature = capability_signature(self.tools, self.config.strategy)
        self._pending_record = CallRecord(purpose="chat", messages=[])
        self._task = TaskState()
        self._live = False
        self._goal_reached = False
        self._cancel_requested = False
        self._inflight: asyncio.Future[Any] | None = None
        # real arguments of steps whose stored copy is masked (see _save), and the ids of the
        # steps already stored (their arguments are masked: never split them again)
        self._raw_args: dict[str, dict[str, Any]] = {}
        self._stored_ids: set[str] = set()

    # -- the turn ----------------------------------------------------------------------------

    async def run(self) -> AsyncIterator[AgentEvent]:
        agent_id, conversation_id = self.key.agent_id, self.key.conversation_id
        self._history = self.store.recent(self.key, 2 * self.max_turns)
        scenario: Literal["A", "C"] = "C" if self._history else "A"
        question = Message.user(self.text)
        self._message_id = question.message_id
        self.store.append(self.key, question)
        self.store.set_status(self.key, "running")
        injected = f"planner {PLANNER_VERSION}: system prompt + memory layers"
        self.store.annotate(
            self.key, self._message_id, "SESSION", f"scenario {scenario}: {injected}"
        )
        yield SessionEvent(
            agent_id=agent_id,
            conversation_id=conversation_id,
            message_id=self._message_id,
            scenario=scenario,
            injected=injected,
            history_messages=len(self._history),
            model=self.model.spec,
        )
        try:
            async for event in self._turn():
                yield event
        except _TurnFailedError as failure:
            for event in self._failed(failure.code, str(failure)):
                yield event
        except _TurnCancelledError:
            for event in self._cancelled():
                yield event
        except Exception as error:  # the turn boundary: never an exception out of the stream
            for event in self._failed("internal_error", f"{type(error).__name__}: {error}"):
                yield event
        self._persist()
        if self._status == "completed":
            await self._update_task_state()
            async for event in self._maybe_compress():
                yield event
        yield ResultEvent(
            conversation_id=conversation_id,
            message_id=self._message_id,
            status=self._status,
            text=self._answer,
            usage=self._usage,
            latency_ms=round((time.perf_counter() - self._started) * 1000, 3),
        )

    def _window(self, messages: list[Message]) -> list[Message]:
        """The chat window: after the last ``/clear``, and for an earlier compression only the
        messages it kept (the older part lives on in TaskState)."""
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            if message.role == "user" and message.content.strip().lower() == "/clear":
                return [m for m in messages[index + 2 :] if m.role != "system"]
            kept = _compression_marker(message)
            if kept is not None:
                before = [m for m in messages[:index] if m.role != "system"]
                after = [m for m in messages[index + 1 :] if m.role != "system"]
                return before[len(before) - kept :] + after if kept else after
        return [m for m in messages if m.role != "system"]

    async def _update_task_state(self) -> None:
        """After a completed turn, with ``compression.incremental_messages`` > 0: fold the
        latest messages into TaskState (the seed's incremental update; the window stays)."""
        config = self.compression
        if config is None or not config.incremental_messages:
            return
        if not isinstance(self.model, ChatModel):
            return
        agent_id, conversation_id = self.key.agent_id, self.key.conversation_id
        window = self._window(self.store.recent(self.key, config.incremental_messages + 4))
        task = self.memory.load_task_state(agent_id, conversation_id)
        updated = await update_task_state(
            window, task.value, self.model, config.incremental_messages
        )
        if isinstance(updated, ModelError):
            self._note("ERROR", f"task state update: {updated}")
            return
        if updated == task.value:
            return
        try:
            self.memory.save_task_state(
                agent_id, conversation_id, updated, expected_version=task.version
            )
        except AgentkitError as error:  # a concurrent edit of TaskState: keep theirs
            self._note("ERROR", f"task state update: {error}")
            return
        self._note("MEMORY", "task state updated from the latest messages")

    async def _maybe_compress(self) -> AsyncIterator[AgentEvent]:
        """After a completed turn: summarise the older part of an over-long window into
        TaskState (seed 002's N / T / K) and mark the cut in the history."""
        if self.compression is None or not isinstance(self.model, ChatModel):
            return
        window = self._window(self.store.recent(self.key, 4 * self.max_turns + 2))
        agent_id, conversation_id = self.key.agent_id, self.key.conversation_id
        task = self.memory.load_task_state(agent_id, conversation_id)
        outcome = await maybe_compress(
            window, task.value, self.model, self.compression, estimator_for(self.model)
        )
        if outcome is None:
            return
        if not outcome.compressed or outcome.event is None:
            problem = self._scrub(str(outcome.error))
            self.store.annotate(self.key, self._message_id, "ERROR", f"compression: {problem}")
            return
        try:
            self.memory.save_task_state(
                agent_id, conversation_id, outcome.task_state, expected_version=task.version
            )
        except AgentkitError as error:  # e.g. a concurrent edit of TaskState: keep theirs
            self.store.annotate(self.key, self._message_id, "ERROR", f"compression: {error}")
            return
        summarised = len(window) - len(outcome.window)
        marker = (
            f"{_MARKER_PREFIX} {summarised} earlier messages summarised into TaskState; "
            f"the last {len(outcome.window)} kept]"
        )
        self.store.append(
            self.key,
            Message(
                role="system", content=marker, message_id=self._message_id, timestamp=utc_now()
            ),
        )
        yield outcome.event

    def _failed(self, code: str, message: str) -> Iterator[AgentEvent]:
        message = self._scrub(message)
        self._status = "failed"
        self._answer = self._answer or f"Sorry, I could not finish this: {message}"
        self.store.annotate(self.key, self._message_id, "ERROR", message)
        if self._state is not None and self._state.is_active:
            try:
                self._save(self._state.fail(message))
            except Exception as error:  # already failing: report both
                message = f"{message} (and the failed state could not be saved: {error})"
        yield ErrorEvent(message=message, code=code)

    def cancel(self) -> None:
        """Stop the turn: an in-flight model call is interrupted, no further step starts, and
        the turn ends with status cancelled. A tool that is running finishes first (a desk
        write is never cut in half); finished steps stay done."""
        self._cancel_requested = True
        inflight = self._inflight
        if inflight is not None and not inflight.done():  # safe from any thread
            inflight.get_loop().call_soon_threadsafe(inflight.cancel)

    def _check_cancel(self) -> None:
        if self._cancel_requested:
            raise _TurnCancelledError("cancelled by the user")

    async def _interruptible(self, call: Awaitable[T]) -> T:
        """Await a model call so that :meth:`cancel` can interrupt it (as a task of its own;
        a cancellation of the whole turn from outside still propagates as CancelledError)."""
        self._check_cancel()
        task = asyncio.ensure_future(call)
        self._inflight = task
        try:
            return await task
        except asyncio.CancelledError:
            if self._cancel_requested and task.cancelled():
                raise _TurnCancelledError("cancelled by the user") from None
            raise
        finally:
            self._inflight = None

    def _cancelled(self) -> Iterator[AgentEvent]:
        self._status = "cancelled"
        self._answer = self._answer or "Stopped."
        self.store.annotate(self.key, self._message_id, "CANCEL", "cancelled by the user")
        if self._state is not None and self._state.is_active:
            self._save(self._state.with_steps(_skip_pending(self._state)).fail("cancelled"))
        yield ErrorEvent(message="the turn was cancelled", code="cancelled")

    def _persist(self) -> None:
        if self._answer:
            self.store.append(
                self.key,
                Message.assistant(self._answer, message_id=self._message_id, usage=self._usage),
            )
        self.store.set_status(self.key, "idle" if self._status == "cancelled" else self._status)

    def _fast_path(self) -> bool:
        """``/clear`` and ``/status``: answered without a model call; True when handled."""
        command = self.text.strip().lower()
        if command == "/clear":
            self.memory.clear(self.key.agent_id, self.key.conversation_id)
            self._answer = (
                "🧹 Conversation memory cleared (history window, TaskState, ExecutionState)."
            )
            return True
        if command == "/status":
            self._load_state()
            task = self.memory.load_task_state(self.key.agent_id, self.key.conversation_id).value
            self._answer = self._status_text(task)
            return True
        return False

    async def _turn(self) -> AsyncIterator[AgentEvent]:
        if self._fast_path():
            return
        task = self.memory.load_task_state(self.key.agent_id, self.key.conversation_id).value
        self._task = task
        self._load_state()
        state = self._state
        if state is not None and state.capability_signature != self._signature:
            self._note("RESET", "capability signature changed: stale execution state discarded")
            self._discard()
            state = None
        if state is not None and state.status == "waiting_confirmation":
            if intents.is_confirmation(self.text):
                async for event in self._confirmed(state):
                    yield event
                return
            refused = intents.is_refusal(self.text)
            self._cancel_pending(state, answer=refused)
            if refused:
                return
            state = None
        elif state is not None and state.status == "waiting_user":
            if not intents.is_switch(self.text):
                async for event in self._answered(state):
                    yield event
                return
            self._cancel_pending(state, answer=False)
            state = None
        previous = state
        if state is not None and (
            intents.is_retry(self.text)
            or (intents.is_config_request(self.text) and state.status in ("completed", "failed"))
        ):
            self._note("RESET", "reset rule: retry or config request over a finished flow")
            previous = None
        async for event in self._plan(task, previous):
            yield event

    # -- state -------------------------------------------------------------------------------

    def _load_state(self) -> None:
        try:
            loaded = self.memory.load_execution_state(self.key.agent_id, self.key.conversation_id)
        except CorruptStateError as error:
            self._note("RESET", f"unreadable execution state discarded: {error}")
            self.memory.delete_execution_state(self.key.agent_id, self.key.conversation_id)
            loaded = None
        self._state = loaded.value if loaded else None
        self._version = loaded.version if loaded else 0
        self._stored_ids = {step.id for step in self._state.steps} if self._state else set()
        self._raw_args = self.memory.load_step_secrets(self.key.agent_id, self.key.conversation_id)

    def _save(self, state: ExecutionState) -> ExecutionState:
        """Store *state* (compare-and-swap) with secret-named step arguments masked; their real
        values go to the separate ``step_secrets`` record until the flow ends."""
        agent_id, conversation_id = self.key.agent_id, self.key.conversation_id
        steps, secrets = [], dict(self._raw_args)
        for step in state.steps:
            if step.id in self._stored_ids or not step.tool_args:  # already masked when stored
                steps.append(step)
                continue
            masked = mask_secrets(dict(step.tool_args))
            if masked != step.tool_args:
                secrets[step.id] = dict(step.tool_args)
                step = step.model_copy(update={"tool_args": masked})  # noqa: PLW2901
            steps.append(step)
        if secrets != self._raw_args:
            self.memory.save_step_secrets(agent_id, conversation_id, secrets)
            self._raw_args = secrets
        state = state.model_copy(update={"steps": tuple(steps)})
        known = [
            value
            for args in self._raw_args.values()
            for name, value in args.items()
            if is_secret_key(name) and isinstance(value, str)
        ]
        if known:  # e.g. the user's answer that carried the keys, kept as an observation
            state = ExecutionState.model_validate(
                mask_secrets(state.model_dump(mode="json"), known)
            )
        saved = self.memory.save_execution_state(
            agent_id, conversation_id, state, expected_version=self._version
        )
        self._state, self._version = saved.value, saved.version
        self._stored_ids = {step.id for step in saved.value.steps}
        if not saved.value.is_active and self._raw_args:  # the flow is over: forget them
            self.memory.save_step_secrets(agent_id, conversation_id, {})
            self._raw_args = {}
        return saved.value

    def _tool_args(self, step: PlanStep) -> dict[str, Any]:
        """The arguments to run *step* with: the real ones when the stored copy is masked."""
        if step.id in self._raw_args:
            return self._raw_args[step.id]
        if any(  # masked when stored, and nothing to unmask it with
            is_secret_key(name) and isinstance(value, str) and is_masked(value)
            for name, value in step.tool_args.items()
        ):
            raise _TurnFailedError(
                "secrets_unavailable",
                f"the secret arguments of step {step.id!r} ({step.tool_name}) are no longer "
                "stored; please give them again",
            )
        return dict(step.tool_args)

    def _discard(self) -> None:
        self.memory.delete_execution_state(
            self.key.agent_id, self.key.conversation_id, expected_version=self._version
        )
        self.memory.save_step_secrets(self.key.agent_id, self.key.conversation_id, {})
        self._state, self._version = None, 0
        self._raw_args, self._stored_ids = {}, set()

    def _note(self, label: str, text: str) -> None:
        self.store.annotate(self.key, self._message_id, label, self._scrub(text))

    def _cancel_pending(self, state: ExecutionState, *, answer: bool) -> None:
        waiting = state.waiting
        target = waiting.confirmation_target if waiting else ""
        what = f"not run: {target}" if target else "question withdrawn"
        state = state.with_steps(_skip_pending(state), plan_id=state.plan_id)
        self._save(state.complete(f"cancelled ({what})"))
        if answer:
            self._answer = f"OK, cancelled — {what}."

    # -- resuming ----------------------------------------------------------------------------

    async def _confirmed(self, state: ExecutionState) -> AsyncIterator[AgentEvent]:
        step = state.step(state.current_step_id)
        state = self._save(state.resume().observe(
            Observation(step_id=step.id, kind="user_reply", content=f"confirmed {step.tool_name}")
        ))  # fmt: skip
        async for event in self._run_tool(step):
            yield event
        async for event in self._continue_after(step.id):
            yield event

    async def _continue_after(self, step_id: str) -> AsyncIterator[AgentEvent]:
        """After a resumed step: the strategy's next decision, then the rest of the run."""
        if self.config.strategy == "tool_loop":
            async for event in self._act_loop():
                yield event
            return
        if self.config.strategy == "plan_replan":
            async for event in self._replan_after(step_id):
                yield event
        async for event in self._execute():
            yield event

    async def _answered(self, state: ExecutionState) -> AsyncIterator[AgentEvent]:
        waiting = state.waiting
        question = waiting.question if waiting else ""
        reply = self._scrub(self.text)
        context = f'The user answered the question "{question}": {reply}'
        state = state.resume().observe(
            Observation(step_id=state.current_step_id, kind="user_reply", content=_cut(context))
        )
        step_id = state.current_step_id
        if step_id:
            state = state.mark_step_done(step_id, _cut(reply, 200))
        if self.config.strategy == "next_step":  # the rest of the batch predates the answer
            state = state.with_steps(_skip_pending(state), plan_id=state.plan_id)
        self._save(state)
        # the answer may change what comes next (e.g. fill a tool's arguments)
        async for event in self._continue_after(step_id):
            yield event

    # -- planning ----------------------------------------------------------------------------

    async def _plan(
        self, task: TaskState, previous: ExecutionState | None
    ) -> AsyncIterator[AgentEvent]:
        state = ExecutionState(
            session_id=f"sess-{self._message_id}",
            conversation_id=self.key.conversation_id,
            goal=_cut(self.text, 500),
            status="planning",
            capability_signature=self._signature,
        )
        self._save(state)
        live = intents.is_config_request(self.text)
        if not live and self.config.classify:
            live = await self._classify()
        self._live = live
        refreshed: list[str] = []
        if live:
            for event in self._refresh_live_state():
                if isinstance(event, ToolResultEvent):
                    refreshed.append(event.name)
                yield event
        yield PlanningEvent(live_state=refreshed, task_state_included=not live)
        if self.config.strategy == "tool_loop":
            self._save(self._state_or(state).resume())
            async for event in self._act_loop():
                yield event
            return
        messages = (
            self._batch_messages()
            if self.config.strategy == "next_step"
            else self._plan_messages(task, previous, live)
        )
        goal, steps, repaired = await self._request_plan(messages, "plan")
        planned = self._state_or(state).with_steps(steps, plan_id=f"plan-{self._message_id}")
        state = self._save(_with_goal(planned, goal or _cut(self.text, 500)))
        yield self._plan_event(state.goal, steps, repaired)
        async for event in self._execute():
            yield event

    async def _request_plan(
        self, messages: list[ChatMessage], what: str, taken: frozenset[str] | None = None
    ) -> tuple[str, tuple[PlanStep, ...], bool]:
        """A ``plan`` call, checked, with one repair round: ``(goal, steps, repaired)``. With
        *taken* (strategy next_step) it is the next batch: it may be empty, and its step ids
        must be new. No usable reply after the repair is a failed turn naming *what*."""
        schema = plan_schema(self.tools, self.config.max_steps)
        problem, value, _ = await self._structured("plan", messages, schema)
        goal, steps, problem = self._parse_plan(value, problem, taken)
        if not problem:
            return goal, steps, False
        problem, value, _ = await self._repair("plan", messages, problem, schema)
        goal, steps, problem = self._parse_plan(value, problem, taken)
        if problem:
            raise _TurnFailedError(
                "invalid_plan", f"no usable {what} after one repair round: {problem}"
            )
        return goal, steps, True

    def _parse_plan(
        self, value: JsonValue, problem: str, taken: frozenset[str] | None
    ) -> tuple[str, tuple[PlanStep, ...], str]:
        if problem:
            return "", (), problem
        try:
            goal, steps = parse_plan(
                value,
                self.tools,
                self.config.max_steps,
                taken=taken or frozenset(),
                batch=taken is not None,
            )
        except PlanFormatError as error:
            return "", (), error.problem
        return goal, steps, ""

    def _plan_event(self, goal: str, steps: tuple[PlanStep, ...], repaired: bool) -> PlanEvent:
        """Note the new steps in the turn log; the ``plan`` event announcing them."""
        planned = [_planned(step) for step in steps]
        self._note("PLAN", json.dumps([p.to_json_dict() for p in planned], ensure_ascii=False))
        return PlanEvent(goal=goal, steps=planned, repaired=repaired)

    def _state_or(self, fallback: ExecutionState) -> ExecutionState:
        return self._state if self._state is not None else fallback

    def _refresh_live_state(self) -> Iterator[AgentEvent]:
        for tool in self.tools.live_state_tools():
            try:
                self.tools.validate(tool.name, {})
            except ToolArgumentsError:
                continue  # only argument-free snapshots can be re-run blindly
            call_id = f"live-{tool.name}"
            yield ToolCallEvent(id=call_id, name=tool.name, arguments={})
            result = self.tools.run(tool.name, {})
            state = self._state_or(ExecutionState())
            self._save(state.observe(
                Observation(kind="live_state", content=_cut(f"{tool.name}: {result.text}"))
            ))  # fmt: skip
            yield ToolResultEvent(id=call_id, name=tool.name, output=result.text, ok=result.ok)

    # -- the execute loop --------------------------------------------------------------------

    async def _execute(self) -> AsyncIterator[AgentEvent]:
        iterations = 0
        while True:
            state = self._state_or(ExecutionState())
            step = state.next_pending_step()
            if step is None and self.config.strategy == "next_step" and not self._goal_reached:
                async for event in self._next_batch():
                    yield event
                state = self._state_or(ExecutionState())
                step = state.next_pending_step()
            if step is None:
                self._answer = self._fallback_answer(state)
                self._save(state.complete(self._answer))
                return
            iterations += 1
            if iterations > self.config.max_iterations:
                raise _TurnFailedError(
                    "iteration_limit", f"stopped after {self.config.max_iterations} iterations"
                )
            self._check_cancel()
            async for event in self._step(step):
                yield event
            if self._state is None or self._state.status != "running":
                return  # paused for the user, or finished

    async def _step(self, step: PlanStep) -> AsyncIterator[AgentEvent]:
        """Run one step; under ``plan_replan`` a tool or reason step is followed by a replan
        decision."""
        if step.type == "ask_user":
            yield self._ask(step)
            return
        if step.type == "respond":
            async for event in self._respond(step):
                yield event
            return
        if step.type == "tool":
            tool = self.tools.get(step.tool_name) if step.tool_name in self.tools else None
            if tool is not None and tool.side_effect:
                yield self._ask_consent(step)  # whatever requires_confirmation says
                return
            async for event in self._run_tool(step):
                yield event
        else:
            async for event in self._reason(step):
                yield event
        if self.config.strategy == "plan_replan":
            async for event in self._replan_after(step.id):
                yield event

    def _ask_consent(self, step: PlanStep) -> AskUserEvent:
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
        state = self._state_or(ExecutionState()).mark_step_running(step.id)
        self._save(state.pause(waiting, confirmation=True))
        self._answer = question
        return AskUserEvent(
            question=question,
            kind="confirmation",
            tool_name=step.tool_name,
            tool_args=args if isinstance(args, dict) else {},
        )

    def _ask(self, step: PlanStep) -> AskUserEvent:
        question = step.instruction or step.title
        state = self._state_or(ExecutionState()).mark_step_running(step.id)
        self._save(state.pause(Waiting(question=question, intent="provide_missing_information")))
        self._answer = question
        return AskUserEvent(question=question)

    async def _run_tool(self, step: PlanStep) -> AsyncIterator[AgentEvent]:
        state = self._save(self._state_or(ExecutionState()).mark_step_running(step.id))
        yield StepStartEvent(step_id=step.id, step_type=step.type, title=step.title)
        planned = _planned(step)
        yield ToolCallEvent(id=step.id, name=step.tool_name, arguments=planned.tool_args)
        try:
            result = self.tools.run(step.tool_name, self._tool_args(step))
            ok, text = result.ok, result.text
        except (UnknownToolError, ToolArgumentsError, ToolCrashedError) as error:
            ok, text = False, json.dumps({"error": self._scrub(str(error))}, ensure_ascii=False)
        summary = _cut(text)
        state = state.observe(Observation(step_id=step.id, kind="tool_result", content=summary))
        if ok:
            state = state.mark_step_done(step.id, _cut(text, 300))
        else:
            state = state.mark_step_failed(step.id, _cut(text, 300))
        self._save(state)
        yield ToolResultEvent(id=step.id, name=step.tool_name, output=summary, ok=ok)
        yield StepCompleteEvent(
            step_id=step.id, status="done" if ok else "failed", summary=_cut(text, 300)
        )

    async def _reason(self, step: PlanStep) -> AsyncIterator[AgentEvent]:
        state = self._save(self._state_or(ExecutionState()).mark_step_running(step.id))
        yield StepStartEvent(step_id=step.id, step_type=step.type, title=step.title)
        prompt = render_prompt(
            "reason",
            self.agent_dir,
            goal=state.goal,
            observations=self._observations(state),
            instruction=step.instruction or step.title,
        )
        try:
            completion = await self._call("reason", self._messages(prompt), None)
            text, ok = completion.text.strip(), True
        except (ModelError, TimeoutError) as error:
            text, ok = f"reasoning failed: {self._error_text(error)}", False
        state = state.observe(Observation(step_id=step.id, kind="reasoning", content=_cut(text)))
        state = (
            state.mark_step_done(step.id, _cut(text, 300))
            if ok
            else state.mark_step_failed(step.id, text)
        )
        self._save(state)
        yield StepCompleteEvent(
            step_id=step.id, status="done" if ok else "failed", summary=_cut(text, 300)
        )

    async def _respond(self, step: PlanStep) -> AsyncIterator[AgentEvent]:
        state = self._save(self._state_or(ExecutionState()).mark_step_running(step.id))
        yield StepStartEvent(step_id=step.id, step_type=step.type, title=step.title)
        prompt = render_prompt(
            "respond",
            self.agent_dir,
            request=self._scrub(self.text),
            goal=state.goal,
            instruction=step.instruction or step.title,
            observations=self._observations(state),
            conversation=self._conversation(),
        )
        messages = self._messages(prompt)
        pieces: list[str] = []
        started = time.perf_counter()
        record = CallRecord(purpose="respond", messages=[m.model_dump() for m in messages])
        try:
            assert isinstance(self.model, ChatModel)
            async with asyncio.timeout(self._timeout("respond")):
                async for event in self.model.stream(messages, purpose="respond"):
                    if self._cancel_requested:
                        break  # keep what was said so far
                    if isinstance(event, TextDelta):
                        pieces.append(event.text)
                        yield AgentOutputEvent(text=event.text)
                    elif isinstance(event, Completion):
                        self._add_usage(event.usage)
                        record = record.model_copy(update={
                            "input_tokens": event.usage.input_tokens,
                            "output_tokens": event.usage.output_tokens,
                        })  # fmt: skip
            answer = self._scrub("".join(pieces).strip())
            record = record.model_copy(update={"raw": answer, "parsed": answer})
            if self._cancel_requested:
                self._answer = answer
                self._record(record.model_copy(update={"error": "cancelled by the user"}))
                raise _TurnCancelledError("cancelled by the user")
        except (ModelError, TimeoutError) as error:
            answer = self._fallback_answer(state)
            record = record.model_copy(update={"error": self._error_text(error)})
            if not pieces:
                yield AgentOutputEvent(text=answer)
        latency = round((time.perf_counter() - started) * 1000, 3)
        self._record(record.model_copy(update={"latency_ms": latency}))
        answer = answer or self._fallback_answer(state)
        self._answer = answer
        state = state.mark_step_done(step.id, _cut(answer, 300))
        self._save(state.complete(answer))
        yield StepCompleteEvent(step_id=step.id, status="done", summary=_cut(answer, 300))

    # -- replanning --------------------------------------------------------------------------

    async def _replan_after(self, step_id: str) -> AsyncIterator[AgentEvent]:
        state = self._state_or(ExecutionState())
        if state.status != "running":
            return
        prompt = render_prompt(
            "replan",
            self.agent_dir,
            tools=self.tools.render(),
            goal=state.goal,
            steps=self._steps_text(state),
            observations=self._observations(state),
            last_step=step_id,
        )
        taken = frozenset(step.id for step in state.steps)
        problem, value, _ = await self._structured(
            "replan", self._messages(prompt), replan_schema(self.tools, self.config.max_steps)
        )
        if value is None:
            yield ReplanEvent(
                action="continue", note=f"invalid decision taken as continue: {problem}"
            )
            return
        try:
            decision, new_steps = parse_replan(value, self.tools, self.config.max_steps, taken)
        except PlanFormatError as error:
            yield ReplanEvent(
                action="continue", note=f"invalid decision taken as continue: {error.problem}"
            )
            return
        if decision.action == "continue":
            yield ReplanEvent(action="continue", reason=decision.reason)
            return
        suffix = len(state.steps) + 1
        if decision.action == "finish":
            new_steps = (
                PlanStep(
                    id=f"finish_{suffix}",
                    type="respond",
                    title="Answer",
                    instruction=decision.reason,
                ),
            )
        elif decision.action == "ask_user":
            new_steps = (
                PlanStep(
                    id=f"ask_{suffix}",
                    type="ask_user",
                    title="Question",
                    instruction=decision.question,
                ),
            )
        pending = sum(1 for step in state.steps if step.status == "pending")
        kept = tuple(step for step in _skip_pending(state, keep=state.current_step_id))
        if len(new_steps) > self.config.max_steps:
            yield ReplanEvent(action="continue", note="too many new steps; taken as continue")
            return
        self._save(state.with_steps((*kept, *new_steps), plan_id=state.plan_id))
        self._note(
            "REPLAN", f"{decision.action}: {pending} pending step(s) replaced by {len(new_steps)}"
        )
        yield ReplanEvent(
            action=decision.action,
            reason=decision.reason,
            steps=[_planned(step) for step in new_steps],
        )

    # -- next_step: one batch at a time ------------------------------------------------------

    def _batch_messages(self) -> list[ChatMessage]:
        state = self._state_or(ExecutionState())
        prompt = render_prompt(
            "next_step",
            self.agent_dir,
            max_steps=str(self.config.max_steps),
            tools=self.tools.render() or "(no tools)",
            live_state=self._snapshot(state),
            task_state=self._task_text(),
            steps=self._steps_text(state) or "(none yet)",
            observations=self._observations(state),
            conversation=self._conversation(),
            request=self.text,
        )
        return self._messages(prompt)

    async def _next_batch(self) -> AsyncIterator[AgentEvent]:
        """Plan the next batch from what the last one found; no steps means the goal is met."""
        state = self._state_or(ExecutionState())
        taken = frozenset(step.id for step in state.steps)
        _, steps, repaired = await self._request_plan(self._batch_messages(), "next batch", taken)
        if not steps:
            self._goal_reached = True
            self._note("PLAN", "next batch: none (goal reached)")
            return
        self._save(state.with_steps((*state.steps, *steps), plan_id=state.plan_id))
        yield self._plan_event(state.goal, steps, repaired)

    # -- tool_loop: one action per call --------------------------------------------------------

    async def _act_loop(self) -> AsyncIterator[AgentEvent]:
        """Ask for one action at a time until the model answers (bounded by ``max_steps`` tool
        calls and ``max_iterations`` model calls). A read repeated with the same arguments is not
        run again: its result is already known, so the respond stage answers from it (small
        local models otherwise repeat one call until the iteration bound)."""
        iterations = 0
        while True:
            state = self._state_or(ExecutionState())
            if state.status != "running":
                return  # paused for consent, or finished
            self._check_cancel()
            iterations += 1
            if iterations > self.config.max_iterations:
                raise _TurnFailedError(
                    "iteration_limit", f"stopped after {self.config.max_iterations} iterations"
                )
            messages = self._act_messages()
            problem, action = await self._act(messages)
            if problem:
                repair = render_prompt("repair", self.agent_dir, problem=problem)
                more = [*messages, ChatMessage(role="user", content=repair)]
                problem, action = await self._act(more)
            if problem or action is None:
                raise _TurnFailedError(
                    "invalid_action", f"no usable action after one repair round: {problem}"
                )
            if action.action == "answer":
                self._answer = self._scrub(action.text.strip())
                yield AgentOutputEvent(text=self._answer)
                self._save(state.complete(self._answer))
                return
            tool_steps = [step for step in state.steps if step.type == "tool"]
            if len(tool_steps) >= self.config.max_steps:
                raise _TurnFailedError(
                    "step_limit", f"stopped after {self.config.max_steps} tool calls"
                )
            repeated = next(
                (
                    step
                    for step in tool_steps
                    if step.status == "done"
                    and step.tool_name == action.tool_name
                    and step.tool_args == action.tool_args
                    and not self.tools.get(action.tool_name).side_effect
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
                self._save(state.observe(note).with_steps(steps, plan_id=state.plan_id))
                async for event in self._respond(answer):
                    yield event
                return
            step = PlanStep(
                id=f"act_{len(state.steps) + 1}",
                type="tool",
                title=action.tool_name,
                tool_name=action.tool_name,
                tool_args=action.tool_args,
            )
            plan_id = state.plan_id or f"loop-{self._message_id}"
            self._save(state.with_steps((*state.steps, step), plan_id=plan_id))
            async for event in self._step(step):
                yield event

    def _act_messages(self) -> list[ChatMessage]:
        state = self._state_or(ExecutionState())
        prompt = render_prompt(
            "act",
            self.agent_dir,
            tools=self.tools.render() or "(no tools)",
            live_state=self._snapshot(state),
            task_state=self._task_text(),
            observations=self._observations(state),
            conversation=self._conversation(),
            request=self.text,
        )
        return self._messages(prompt)

    async def _act(self, messages: list[ChatMessage]) -> tuple[str, ActReply | None]:
        """One ``act`` call: ``(problem, action)``, the action checked against the registry."""
        if not isinstance(self.model, ChatModel):
            raise _TurnFailedError(
                "unsupported_model", f"the planner needs a chat model, not {self.model.spec!r}"
            )
        if self.model.native_tools:
            return await self._act_native(self.model, messages)
        problem, value, _ = await self._structured("act", messages, act_schema(self.tools))
        if problem:
            return problem, None
        try:
            return "", parse_act(value, self.tools)
        except PlanFormatError as error:
            return error.problem, None

    async def _act_native(
        self, model: ChatModel, messages: list[ChatMessage]
    ) -> tuple[str, ActReply | None]:
        tools = [self.tools.get(name) for name in self.tools.names()]
        specs = [
            ToolSpec(name=tool.name, description=tool.description, parameters=tool.json_schema())
            for tool in tools
        ]
        started = time.perf_counter()
        record = CallRecord(
            purpose="act",
            messages=[m.model_dump() for m in messages],
            schema_={"tools": [spec.name for spec in specs]},
        )
        try:
            async with asyncio.timeout(self._timeout("act")):
                completion = await self._interruptible(
                    model.complete_with_tools(messages, tools=specs, purpose="act")
                )
        except (ModelError, TimeoutError) as error:
            problem = self._error_text(error)
            self._record(record.model_copy(update={"error": problem}))
            return problem, None
        latency = round((time.perf_counter() - started) * 1000, 3)
        self._add_usage(completion.usage)
        record = record.model_copy(update={
            "latency_ms": latency,
            "input_tokens": completion.usage.input_tokens,
            "output_tokens": completion.usage.output_tokens,
        })  # fmt: skip
        if completion.tool_calls:
            call = completion.tool_calls[0]  # one action per call: the rest are asked again
            shown = {"tool_calls": [mask_secrets({"name": call.name, "arguments": call.arguments})]}
            record = record.model_copy(update={"raw": self._scrub(json.dumps(shown))})
            try:
                check_tool_call(self.tools, call.name, call.arguments)
            except PlanFormatError as error:
                self._record(record.model_copy(update={"error": error.problem}))
                return error.problem, None
            self._record(record.model_copy(update={"parsed": shown}))
            return "", ActReply(action="tool", tool_name=call.name, tool_args=call.arguments)
        text = completion.text.strip()
        self._record(
            record.model_copy(update={"raw": self._scrub(text), "parsed": self._scrub(text)})
        )
        if not text:
            return "the reply had neither a tool call nor text", None
        return "", ActReply(action="answer", text=text)

    # -- classify (optional) -------------------------------------------------------------------

    async def _classify(self) -> bool:
        """Ask the model whether the request is about live configuration; a failed or invalid
        reply leaves the keyword decision (not live) in place."""
        prompt = render_prompt("classify", self.agent_dir, request=self._scrub(self.text))
        problem, value, _ = await self._structured(
            "classify", self._messages(prompt), classify_schema()
        )
        if not problem:
            try:
                return parse_classify(value) == "live_state"
            except PlanFormatError as error:
                problem = error.problem
        self._note("CLASSIFY", f"no usable classification ({problem}); keywords decide")
        return False

    # -- model calls -------------------------------------------------------------------------

    async def _structured(
        self, purpose: Purpose, messages: list[ChatMessage], schema: JsonSchema
    ) -> tuple[str, JsonValue, bool]:
        """``(problem, value, repaired_locally)``: the reply's JSON (leniently extracted) or the
        problem with it. Model failures are problems too; nothing is raised."""
        try:
            completion = await self._call(purpose, messages, schema, record=False)
            raw = completion.text
        except StructuredOutputError as error:
            raw = error.raw
        except (ModelError, TimeoutError, RecursionError) as error:
            # RecursionError: validate_structured's json.loads on absurdly nested replies
            problem = self._error_text(error)
            # the pending record carries the call's latency (a timeout took the whole stage)
            self._record(self._pending_record.model_copy(update={"error": problem}))
            return problem, None, False
        raw_shown = self._scrub(raw)
        try:
            value = extract_json(raw)
        except PlanFormatError as error:
            self._record(
                self._pending_record.model_copy(update={"raw": raw_shown, "error": error.problem})
            )
            return error.problem, None, False
        self._record(
            self._pending_record.model_copy(
                update={"raw": raw_shown, "parsed": mask_secrets(value)}
            )
        )
        return "", value, False

    async def _repair(
        self, purpose: Purpose, messages: list[ChatMessage], problem: str, schema: JsonSchema
    ) -> tuple[str, JsonValue, bool]:
        last = self.calls[-1].raw if self.calls else ""
        repair = render_prompt("repair", self.agent_dir, problem=problem)
        more = [
            *messages,
            ChatMessage(role="assistant", content=last[:4000]),
            ChatMessage(role="user", content=repair),
        ]
        return await self._structured(purpose, more, schema)

    async def _call(
        self,
        purpose: Purpose,
        messages: list[ChatMessage],
        schema: JsonSchema | None,
        *,
        record: bool = True,
    ) -> Completion:
        if not isinstance(self.model, ChatModel):
            raise _TurnFailedError(
                "unsupported_model", f"the planner needs a chat model, not {self.model.spec!r}"
            )
        started = time.perf_counter()
        self._pending_record = CallRecord(
            purpose=purpose, messages=[m.model_dump() for m in messages], schema_=schema
        )
        try:
            async with asyncio.timeout(self._timeout(purpose)):
                completion = await self._interruptible(
                    self.model.complete(messages, purpose=purpose, schema=schema)
                )
        finally:
            latency = round((time.perf_counter() - started) * 1000, 3)
            self._pending_record = self._pending_record.model_copy(update={"latency_ms": latency})
        self._add_usage(completion.usage)
        self._pending_record = self._pending_record.model_copy(update={
            "input_tokens": completion.usage.input_tokens,
            "output_tokens": completion.usage.output_tokens,
        })  # fmt: skip
        if record:
            text = self._scrub(completion.text)
            self._record(self._pending_record.model_copy(update={"raw": text, "parsed": text}))
        return completion

    def _timeout(self, purpose: Purpose) -> float:
        return self.stage_timeouts.get(purpose, 36.0) * self.config.stage_timeout_scale

    def _record(self, record: CallRecord) -> None:
        self.calls.append(record)
        if self.conversation_dir is not None:
            append_call_record(self.conversation_dir, self._message_id, record)

    def _add_usage(self, usage: Usage) -> None:
        self._usage = Usage(
            input_tokens=self._usage.input_tokens + usage.input_tokens,
            output_tokens=self._usage.output_tokens + usage.output_tokens,
        )

    @staticmethod
    def _error_text(error: BaseException) -> str:
        return str(error) or (
            "timed out" if isinstance(error, TimeoutError) else type(error).__name__
        )

    # -- prompt parts ------------------------------------------------------------------------

    def _messages(self, prompt: str) -> list[ChatMessage]:
        messages = [ChatMessage(role="user", content=self._scrub(prompt))]
        if self.system_prompt:
            messages.insert(0, ChatMessage(role="system", content=self.system_prompt))
        return messages

    def _plan_messages(
        self, task: TaskState, previous: ExecutionState | None, live: bool
    ) -> list[ChatMessage]:
        state = self._state_or(ExecutionState())
        prompt = render_prompt(
            "plan",
            self.agent_dir,
            max_steps=str(self.config.max_steps),
            tools=self.tools.render() or "(no tools)",
            live_state=self._snapshot(state),
            task_state=self._task_text(task, live),
            previous=self._previous_text(previous),
            conversation=self._conversation(),
            request=self.text,
        )
        return self._messages(prompt)

    @staticmethod
    def _snapshot(state: ExecutionState) -> str:
        snapshot = [obs.content for obs in state.observations if obs.kind == "live_state"]
        return "\n".join(snapshot) or "(not refreshed for this request)"

    def _task_text(self, task: TaskState | None = None, live: bool | None = None) -> str:
        task = self._task if task is None else task
        if self._live if live is None else live:
            return "(left out: this request is about live configuration)"
        return task.render() if not task.is_empty else "(empty)"

    def _previous_text(self, previous: ExecutionState | None) -> str:
        if previous is None:
            return "(none)"
        lines = [f"goal: {previous.goal}", f"status: {previous.status}"]
        lines.extend(
            f"- {step.id} [{step.status}] {step.title}: {step.result_summary}"
            for step in previous.steps
        )
        if previous.final_answer:
            lines.append(f"answer: {_cut(previous.final_answer, 300)}")
        return "\n".join(lines)

    def _conversation(self) -> str:
        messages = self._window(self._history)
        lines = [
            f"{m.role.capitalize()}: {_cut(m.content, _CONVERSATION_LINE_CHARS)}"
            for m in messages[-_CONVERSATION_LINES:]
            if m.role in ("user", "assistant") and m.content
        ]
        return "\n".join(lines) or "(none)"

    @staticmethod
    def _observations(state: ExecutionState) -> str:
        shown = state.observations[-_PROMPT_OBSERVATIONS:]
        return (
            "\n".join(
                f"- [{o.kind}{' ' + o.step_id if o.step_id else ''}] {o.content}" for o in shown
            )
            or "(none)"
        )

    @staticmethod
    def _steps_text(state: ExecutionState) -> str:
        return "\n".join(
            f"- {s.id} [{s.status}] {s.type} {s.tool_name or ''} {s.title}".rstrip()
            for s in state.steps
        )

    def _fallback_answer(self, state: ExecutionState) -> str:
        done = [step for step in state.steps if step.status == "done" and step.type == "tool"]
        if not done:
            return "Done."
        return "Completed:\n" + "\n".join(f"- {step.title or step.tool_name}" for step in done)

    def _status_text(self, task: TaskState) -> str:
        state = self._state
        lines = ["Execution state: none" if state is None else f"Execution state: {state.status}"]
        if state is not None:
            lines.append(f"goal: {state.goal}")
            lines.extend(
                f"- {s.id} [{s.status}] {s.type} {s.tool_name} {s.title}".rstrip()
                for s in state.steps
            )
            if state.waiting is not None:
                lines.append(f"waiting for: {state.waiting.question}")
            if state.last_error:
                lines.append(f"last error: {state.last_error}")
        lines.append("Task state: " + ("empty" if task.is_empty else "\n" + task.render()))
        return self._scrub("\n".join(lines))

    def _scrub(self, text: str) -> str:
        return scrub_text(text, self.tools.secrets()) if self.tools.secrets else text


def conversation_dir(store: ConversationStore, key: ConversationKey) -> Path | None:
    """The conversation's folder in a file store; None for stores without folders."""
    if isinstance(store, FileConversationStore):
        return store.root / "agents" / key.agent_id / "conversations" / key.conversation_id
    return None


@contextmanager
def _config_store(folder: AgentFolder, given: ConfigStore | None) -> Iterator[ConfigStore]:
    if given is not None:
        yield given
        return
    store = SqliteConfigStore(folder.path.parent.parent / CONFIG_DB)
    try:
        yield store
    finally:
        store.close()


async def planner_turn_events(
    *,
    folder: AgentFolder,
    key: ConversationKey,
    text: str,
    store: ConversationStore,
    model: ChatModel | SessionBackend,
    system_prompt: str,
    config_store: ConfigStore | None = None,
    running: MutableMapping[str, PlannerTurn] | None = None,
) -> AsyncIterator[AgentEvent]:
    """One planner turn for the agent in *folder*: its allow-listed desk tools, its planner
    config, memory in *config_store* (default: ``agentkit.db`` under the data root). While it
    runs the turn is in *running* under its conversation id (so it can be cancelled)."""
    with _config_store(folder, config_store) as kv, agent_tools(folder) as tools:
        turn = PlannerTurn(
            key=key,
            text=text,
            store=store,
            memory=MemoryRepository(kv),
            model=model,
            tools=tools,
            config=folder.config.planner,
            system_prompt=system_prompt,
            agent_dir=folder.path,
            conversation_dir=conversation_dir(store, key),
            max_turns=folder.config.max_turns,
            compression=folder.config.compression,
        )
        if running is not None:
            running[key.conversation_id] = turn
        try:
            async for event in turn.run():
                yield event
        finally:
            if running is not None and running.get(key.conversation_id) is turn:
                del running[key.conversation_id]
