"""What a turn is given, read once: the frozen :class:`TurnContext` and the planner's
:class:`Intake`.

Every turn — chat or planner, whichever edge started it — gets one :class:`TurnContext`,
built once by the agent's runtime when the turn is admitted
(:meth:`agentkit.runtime.AgentRuntime.context`): the conversation, the turn's input and its
id, and what the agent shares (store, memory, model, tools, config, telemetry, the session
pool, background upkeep). Nothing copies it into another record: engines and stages read it
where it is. The planner then reads, once, what its stages share — the recent history and
TaskState (and, through the flow recorder, the ExecutionState) — into an :class:`Intake`. The
turn's graph (:mod:`agentkit.planning.graph`) holds both, plus the owners of what a turn
changes.

A turn's input is one typed value (:data:`TurnInput`): a :class:`UserMessage`, or a
:class:`~agentkit.planning.approvals.Decision` on the conversation's pending approval. A
decision has no words: :attr:`TurnContext.text` is empty for it, and the line the
conversation's history shows for it (:attr:`TurnContext.said`, "yes" / "no") is made from
the decision for display and never read back.

Both engines end a turn the same way: :meth:`TurnContext.commit` writes the answer, the
conversation's status and the turn's checkpoint in one durable commit, and
:meth:`TurnContext.result` ends the turn's trace and makes its ``result`` event.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal

from agentkit.calls.cancel import CancelScope
from agentkit.calls.errors import TurnCancelledError, TurnFailedError
from agentkit.calls.records import CallRecord
from agentkit.config import CompressionConfig, PlannerConfig
from agentkit.errors import AgentkitError
from agentkit.events import PlannedStep, ResultEvent
from agentkit.ids import new_message_id
from agentkit.memory import ChatHistory, ExecutionState, MemoryRepository, PlanStep, TaskState
from agentkit.memory.repository import Versioned
from agentkit.models.base import ChatModel, SessionBackend
from agentkit.planning.approvals import Decision
from agentkit.planning.background import Admit, BackgroundUpkeep
from agentkit.planning.recording import FlowRecorder, skip_pending
from agentkit.sessions import RunningTurn, SessionPool
from agentkit.store import ConversationKey, ConversationStore
from agentkit.telemetry import Telemetry, TurnTrace, provider_name
from agentkit.tools import SecretMask, ToolRegistry
from agentkit.types import ConversationMeta, Message, ToolCallRecord, Usage

__all__ = [
    "OBSERVATION_MAX_CHARS",
    "PLANNER_VERSION",
    "STAGE_TIMEOUTS",
    "CancelScope",
    "Intake",
    "Request",
    "TurnCancelledError",
    "TurnContext",
    "TurnFailedError",
    "TurnInput",
    "TurnStatus",
    "UserMessage",
    "capability_signature",
    "cut",
    "intake_limit",
    "planned",
    "skip_pending",
]

PLANNER_VERSION = "planner/2"
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
#: messages of the conversation a turn reads at intake: the prompt's window (``2 *
#: max_turns``) and, after the turn, the compression check's (``4 * max_turns + 2``)
_COMPRESSION_WINDOW = 4
_CONVERSATION_LINES = 12
_CONVERSATION_LINE_CHARS = 500

TurnStatus = Literal["completed", "failed", "cancelled"]


def capability_signature(tools: ToolRegistry, strategy: str = "plan_replan") -> str:
    """Tool names, flags and schemas plus the planner version and strategy: a plan made under
    another signature is not resumed."""
    return f"{tools.schema_signature()}:{PLANNER_VERSION}:{strategy}"


@dataclass(frozen=True, slots=True)
class UserMessage:
    """A turn's input: a message the user wrote."""

    text: str
    kind: Literal["message"] = field(default="message", init=False)


#: what a turn is given to act on: a message, or a decision on a pending approval
TurnInput = UserMessage | Decision


@dataclass(frozen=True, kw_only=True)
class TurnContext:
    """What one turn is given (see the module docstring). Built by the agent's runtime for
    every admitted turn; a turn no Agent runs (a test, a notebook experiment) builds one
    directly and runs it with :func:`agentkit.planning.turn.drive`."""

    key: ConversationKey
    #: what the turn acts on: the user's message, or a decision on the pending approval
    input: TurnInput
    store: ConversationStore
    memory: MemoryRepository
    model: ChatModel | SessionBackend
    tools: ToolRegistry = field(default_factory=lambda: ToolRegistry([]))
    config: PlannerConfig = field(default_factory=PlannerConfig)
    #: the turn's id: its user message, its answer and its folder share it
    message_id: str = field(default_factory=new_message_id)
    system_prompt: str = ""
    #: where prompt overrides live
    agent_dir: Path | None = None
    #: the working folder a session backend (a CLI agent) runs in
    workdir: Path | None = None
    max_turns: int = 20
    compression: CompressionConfig | None = None
    stage_timeouts: Mapping[str, float] = field(default_factory=lambda: dict(STAGE_TIMEOUTS))
    #: with telemetry the turn is a trace (``invoke_agent`` and its children)
    telemetry: Telemetry | None = None
    #: live sessions (the chat engine's scenario B); None: a fresh one per turn
    pool: SessionPool | None = None
    #: where memory upkeep runs after ``result``, and how its job is admitted (None: in the
    #: turn, before ``result``)
    upkeep: BackgroundUpkeep | None = None
    admit_upkeep: Admit | None = None
    #: the turn's entry in the registry of running turns (how ``Agent.cancel`` reaches it)
    running: RunningTurn | None = None
    #: the turn's cancel switch (safe to use from any thread)
    cancel_scope: CancelScope = field(default_factory=CancelScope)
    #: every model call of the turn, in order (also in the store's trace of the turn)
    records: list[CallRecord] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    #: what masks secrets in whatever the turn writes or shows (the tools' secret store,
    #: their declared patterns, secret-named arguments)
    mask: SecretMask = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "mask", self.tools.mask.for_turn())

    @property
    def text(self) -> str:
        """The user's words: the message; empty for a decision (which has none)."""
        return self.input.text if isinstance(self.input, UserMessage) else ""

    @property
    def decision(self) -> Decision | None:
        """The decision the turn carries (None: its input is a message)."""
        return self.input if isinstance(self.input, Decision) else None

    @property
    def said(self) -> str:
        """The user's line of the turn as shown (history, prompts, the trace): the message,
        or the decision's display line (:attr:`Decision.said`), never read back."""
        return self.input.text if isinstance(self.input, UserMessage) else self.input.said

    def scrub(self, text: str) -> str:
        """*text* with every secret the turn knows masked."""
        return self.mask.text(text)

    def note(self, label: str, text: str) -> None:
        """A ``[LABEL]`` block in the turn's ``messages.log`` (secrets masked)."""
        self.store.annotate(self.key, self.message_id, label, self.mask.text(text))

    def timeout(self, purpose: str) -> float:
        return self.stage_timeouts.get(purpose, 36.0) * self.config.stage_timeout_scale

    def cancel(self) -> None:
        """Stop the turn: an in-flight model call is interrupted, no further step starts, and
        the turn ends with status cancelled. A tool that is running finishes first (a write is
        never cut in half); finished steps stay done."""
        self.cancel_scope.cancel()

    def start_trace(self, scenario: str) -> TurnTrace | None:
        """The turn's trace (``invoke_agent`` and its children); None without telemetry."""
        if self.telemetry is None:
            return None
        return self.telemetry.turn(
            conversation_id=self.key.conversation_id,
            message_id=self.message_id,
            scenario=scenario,
            provider=provider_name(self.model.spec),
            model=self.model.spec,
            secrets=self.mask,
            request=self.said,
        )

    @property
    def question(self) -> Message:
        """The user message that opens the turn (a decision's: its display line)."""
        return Message.user(self.mask.text(self.said), message_id=self.message_id)

    def commit(
        self,
        answer: str,
        status: TurnStatus,
        *,
        usage: Usage,
        tool_calls: tuple[ToolCallRecord, ...] = (),
        flow: FlowRecorder | None = None,
    ) -> tuple[Message | None, ConversationMeta]:
        """The turn's end, whichever engine ran it, in one durable commit before ``result``:
        the assistant message (when there is an answer or a tool call; secrets masked), the
        conversation's status (``idle`` after a cancel) and the turn's checkpoint — the memory
        as the turn leaves it, *flow*'s staged ExecutionState written first (so that state
        needs no fsync of its own). Blocking: an engine runs it in a store thread. Returns
        the assistant message and the conversation's metadata after the commit."""
        key, store = self.key, self.store
        stored = "idle" if status == "cancelled" else status
        try:
            if flow is not None:
                flow.flush()
            checkpoint = self.memory.turn_checkpoint(
                key.agent_id, key.conversation_id, self.message_id
            )
        except AgentkitError:  # the memory store is away: the answer still comes first
            checkpoint = None
        if not answer and not tool_calls:
            return None, store.set_status(key, stored, checkpoint=checkpoint)
        reply = Message.assistant(
            self.mask.text(answer), message_id=self.message_id, tool_calls=tool_calls, usage=usage
        )
        return reply, store.append(key, reply, status=stored, checkpoint=checkpoint)

    def result(
        self,
        status: TurnStatus,
        answer: str,
        usage: Usage,
        trace: TurnTrace | None,
        error_type: str | None = None,
    ) -> ResultEvent:
        """The turn's last event, once its answer is durable (:meth:`commit`); its trace
        ends here."""
        if trace is not None:
            trace.end(
                status,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                error_type=error_type,
                answer=answer,
            )
        return ResultEvent(
            conversation_id=self.key.conversation_id,
            message_id=self.message_id,
            status=status,
            text=answer,
            usage=usage,
            latency_ms=round((time.perf_counter() - self.started) * 1000, 3),
            trace_id=trace.trace_id if trace is not None else "",
        )


@dataclass(frozen=True)
class Intake:
    """What a planner turn read once, before its first write: the recent history and TaskState
    (the ExecutionState is the flow recorder's)."""

    #: the conversation before this turn's message (its last ``4 * max_turns + 2``)
    history: tuple[Message, ...] = ()
    #: the index in the whole history of ``history[0]``
    offset: int = 0
    #: the index in ``history`` where the chat window starts (the conversation's records:
    #: a ``/clear``, a compression; :func:`agentkit.store.records.window_start`)
    start: int = 0
    #: TaskState as stored at intake, with its version
    task: Versioned[TaskState] = field(default_factory=lambda: Versioned(TaskState(), 0))
    max_turns: int = 20

    @cached_property
    def window(self) -> list[Message]:
        """The part of the history a prompt may show: the chat window's last
        ``2 * max_turns`` messages."""
        start = max(self.start, len(self.history) - 2 * self.max_turns)
        return list(self.history[start:])

    @cached_property
    def conversation(self) -> str:
        """The prompt's conversation lines: the chat window's last lines, each cut to a bound."""
        window = ChatHistory.of(self.window, self.max_turns).messages
        lines = [
            f"{m.role.capitalize()}: {cut(m.content, _CONVERSATION_LINE_CHARS)}"
            for m in window[-_CONVERSATION_LINES:]
            if m.role in ("user", "assistant") and m.content
        ]
        return "\n".join(lines) or "(none)"


@dataclass(frozen=True)
class Request:
    """What routing decided about a new request, for the strategy's prompts."""

    #: the request is about live configuration: TaskState is left out of the prompts
    live: bool = False
    #: the flow before this request, shown to a new plan (None after a reset)
    previous: ExecutionState | None = None


def planned(step: PlanStep, mask: SecretMask | None = None) -> PlannedStep:
    """A step as events show it: secret-named arguments masked (and, with *mask*, every
    secret the turn knows)."""
    args = (mask or SecretMask()).json(dict(step.tool_args))
    return PlannedStep(
        id=step.id,
        step_type=step.type,
        title=step.title if mask is None else mask.text(step.title),
        tool_name=step.tool_name,
        tool_args=args if isinstance(args, dict) else {},
    )


def cut(text: str, limit: int = OBSERVATION_MAX_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def intake_limit(max_turns: int) -> int:
    """How many recent messages a turn reads at intake (see ``Intake.history``)."""
    return _COMPRESSION_WINDOW * max_turns + 2
