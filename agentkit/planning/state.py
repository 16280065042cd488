"""What a planner turn is given, and the owners of what it changes.

A turn (:class:`Turn`) is a frozen :class:`TurnContext` — what it was given and what it read
once at intake (the recent history, TaskState, the capability signature) — plus one owner for
each kind of change, so no stage keeps or shares a mutable record of its own:

* the flow recorder (:class:`~agentkit.planning.recording.FlowRecorder`), the only writer of
  ExecutionState;
* the call tracer (:class:`~agentkit.planning.tracer.CallTracer`), the only way a model call
  is made (timed, interruptible, traced in ``calls.jsonl`` and as a span);
* the :class:`Outcome`: the answer, the status, the loop's counters;
* the :class:`CancelScope`: whether a cancel was asked for, and the call it interrupts.

What routing decides about a new request (:class:`Request`) is a value too: a stage returns a
new :class:`Turn` carrying it (:class:`Then`) instead of setting a field. Stages are async
generators of events that end by naming what comes next; :func:`agentkit.planning.turn.drive`
runs them, so an event climbs two generators between a tool and ``Agent.send_message``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal, Protocol

from agentkit.config import CompressionConfig, PlannerConfig
from agentkit.events import AgentEvent, PlannedStep
from agentkit.memory import ChatHistory, ExecutionState, MemoryRepository, PlanStep, TaskState
from agentkit.memory.repository import Versioned
from agentkit.models.base import ChatModel, SessionBackend
from agentkit.planning.approvals import Decision
from agentkit.planning.errors import TurnCancelledError, TurnFailedError
from agentkit.planning.recording import FlowRecorder, skip_pending
from agentkit.planning.tracer import CallTracer, CancelScope
from agentkit.store import ConversationKey, ConversationStore
from agentkit.telemetry import TurnTrace
from agentkit.tools import ToolRegistry, mask_secrets, scrub_text
from agentkit.types import Message

__all__ = [
    "OBSERVATION_MAX_CHARS",
    "PLANNER_VERSION",
    "STAGE_TIMEOUTS",
    "CancelScope",
    "Outcome",
    "Request",
    "Scrubber",
    "Stage",
    "StrategyLike",
    "Then",
    "Turn",
    "TurnCancelledError",
    "TurnContext",
    "TurnFailedError",
    "TurnStatus",
    "capability_signature",
    "cut",
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


class Scrubber:
    """Removes the secret values the tools' domain stores from a text (as the registry knows
    them now: read again after a tool run that may have stored one)."""

    def __init__(self, tools: ToolRegistry) -> None:
        self._tools = tools

    def known(self) -> list[str]:
        return self._tools.current_secrets()

    def __call__(self, text: str) -> str:
        if self._tools.secrets is None:
            return text
        return scrub_text(text, self._tools.current_secrets())


@dataclass(frozen=True, kw_only=True)
class TurnContext:
    """What one turn is given, and what it read once at intake. ``agent_dir`` is where
    prompt overrides live."""

    key: ConversationKey
    text: str
    message_id: str
    store: ConversationStore
    memory: MemoryRepository
    model: ChatModel | SessionBackend
    tools: ToolRegistry
    strategy: StrategyLike
    config: PlannerConfig
    system_prompt: str = ""
    agent_dir: Path | None = None
    max_turns: int = 20
    compression: CompressionConfig | None = None
    stage_timeouts: Mapping[str, float] = field(default_factory=lambda: dict(STAGE_TIMEOUTS))
    #: the conversation before this turn's message (its last ``4 * max_turns + 2``)
    history: tuple[Message, ...] = ()
    #: the index in the whole history of ``history[0]``
    history_offset: int = 0
    #: the index in ``history`` where the chat window starts (the conversation's records:
    #: a ``/clear``, a compression; :func:`agentkit.store.records.window_start`)
    history_start: int = 0
    #: TaskState as stored at intake, with its version (read once per turn)
    task: Versioned[TaskState] = field(default_factory=lambda: Versioned(TaskState(), 0))
    signature: str = ""
    started: float = field(default_factory=time.perf_counter)
    scrub: Scrubber
    #: the turn's spans (``invoke_agent`` and its children); None: not traced
    trace: TurnTrace | None = None
    #: a decision on a pending approval this turn carries (None: the text decides)
    decision: Decision | None = None

    @cached_property
    def window(self) -> list[Message]:
        """The part of the history a prompt may show: the chat window's last
        ``2 * max_turns`` messages."""
        start = max(self.history_start, len(self.history) - 2 * self.max_turns)
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

    def note(self, label: str, text: str) -> None:
        """A ``[LABEL]`` block in the turn's ``messages.log``."""
        self.store.annotate(self.key, self.message_id, label, self.scrub(text))

    def timeout(self, purpose: str) -> float:
        return self.stage_timeouts.get(purpose, 36.0) * self.config.stage_timeout_scale


@dataclass(frozen=True)
class Request:
    """What routing decided about a new request, for the strategy's prompts."""

    #: the request is about live configuration: TaskState is left out of the prompts
    live: bool = False
    #: the flow before this request, shown to a new plan (None after a reset)
    previous: ExecutionState | None = None


@dataclass
class Outcome:
    """What the turn ends with, and the execute loop's counters."""

    answer: str = ""
    status: TurnStatus = "completed"
    #: steps and actions started by the loop (bounded by ``max_iterations``)
    iterations: int = 0
    #: strategy next_step: an empty batch said the goal is reached
    goal_reached: bool = False


@dataclass(frozen=True)
class Turn:
    """A turn as its stages see it (see the module docstring)."""

    ctx: TurnContext
    flow: FlowRecorder
    calls: CallTracer
    outcome: Outcome
    cancel: CancelScope
    request: Request = Request()

    @property
    def state(self) -> ExecutionState:
        """The ExecutionState as recorded now, or an empty one."""
        return self.flow.current

    def with_request(self, request: Request) -> Turn:
        return dataclasses.replace(self, request=request)

    def check_cancel(self) -> None:
        self.cancel.check()


@dataclass(frozen=True)
class Then:
    """A stage's last item: what runs next (with *turn*, a turn carrying a new value)."""

    stage: Stage
    turn: Turn | None = None


#: one stage of a turn: the events it yields, then at most one :class:`Then`
Stage = Callable[[Turn], AsyncIterator["AgentEvent | Then"]]


class StrategyLike(Protocol):
    """A strategy as the turn's stages use it (:class:`~agentkit.planning.strategies.Strategy`
    implements it; see there for what each stage is)."""

    @property
    def name(self) -> str: ...

    def start(self, turn: Turn) -> Stage: ...

    def after_step(self, turn: Turn, step_id: str) -> Stage: ...

    def more_steps(self, turn: Turn) -> Stage | None: ...

    def resume(self, turn: Turn, step_id: str) -> Stage: ...

    def answered(self, state: ExecutionState) -> ExecutionState: ...


def planned(step: PlanStep) -> PlannedStep:
    """A step as events show it: secret-named arguments masked."""
    args = mask_secrets(dict(step.tool_args))
    return PlannedStep(
        id=step.id,
        step_type=step.type,
        title=step.title,
        tool_name=step.tool_name,
        tool_args=args if isinstance(args, dict) else {},
    )


def cut(text: str, limit: int = OBSERVATION_MAX_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def intake_limit(max_turns: int) -> int:
    """How many recent messages a turn reads at intake (see ``TurnContext.history``)."""
    return _COMPRESSION_WINDOW * max_turns + 2
