"""The one state a planner turn passes along its stages.

A turn is a set of stage functions (routing, recording, model calls, prompt context, steps and
the strategy), each taking the :class:`TurnState`, as pydantic-ai's run graph passes one state
along its nodes. What a turn is given never changes during it and lives in
:class:`PlannerDeps`; what the turn has found so far lives in the :class:`TurnState` fields. No
stage keeps turn state of its own, so a stage can be read (and tested) on its own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agentkit.config import CompressionConfig, PlannerConfig
from agentkit.errors import AgentkitError
from agentkit.events import PlannedStep
from agentkit.memory import ExecutionState, MemoryRepository, PlanStep, TaskState
from agentkit.models.base import ChatModel, SessionBackend
from agentkit.planning.trace import CallRecord
from agentkit.store import ConversationKey, ConversationStore
from agentkit.tools import ToolRegistry, mask_secrets, scrub_text
from agentkit.types import Message, Usage

if TYPE_CHECKING:
    from agentkit.planning.strategies.base import Strategy

__all__ = [
    "OBSERVATION_MAX_CHARS",
    "PLANNER_VERSION",
    "STAGE_TIMEOUTS",
    "PlannerDeps",
    "TurnCancelledError",
    "TurnFailedError",
    "TurnState",
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

TurnStatus = Literal["completed", "failed", "cancelled"]


def capability_signature(tools: ToolRegistry, strategy: str = "plan_replan") -> str:
    """Tool names, flags and schemas plus the planner version and strategy: a plan made under
    another signature is not resumed."""
    return f"{tools.schema_signature()}:{PLANNER_VERSION}:{strategy}"


class TurnCancelledError(AgentkitError):
    """The turn was cancelled: it stops at the next safe point."""


class TurnFailedError(AgentkitError):
    """Ends the turn with an ``error`` event (code) and status failed."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        super().__init__(message)


@dataclass(frozen=True, kw_only=True)
class PlannerDeps:
    """What one turn is given. ``traces`` is the conversation folder where each turn's
    ``calls.jsonl`` goes (None keeps the records in :attr:`TurnState.calls` only);
    ``agent_dir`` is where prompt overrides live."""

    key: ConversationKey
    text: str
    store: ConversationStore
    memory: MemoryRepository
    model: ChatModel | SessionBackend
    tools: ToolRegistry
    strategy: Strategy
    config: PlannerConfig
    system_prompt: str = ""
    agent_dir: Path | None = None
    traces: Path | None = None
    max_turns: int = 20
    compression: CompressionConfig | None = None
    stage_timeouts: Mapping[str, float] = field(default_factory=lambda: dict(STAGE_TIMEOUTS))


@dataclass
class TurnState:
    """What one turn has found and decided so far; every stage reads and updates it."""

    deps: PlannerDeps
    #: every model call of the turn, in order (also appended to ``calls.jsonl``)
    calls: list[CallRecord] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    message_id: str = ""
    answer: str = ""
    status: TurnStatus = "completed"
    usage: Usage = field(default_factory=Usage)
    #: the ExecutionState and the version it was stored at (compare-and-swap); *unsaved*
    #: while ``state`` is a later, not yet written one (see recording.save)
    state: ExecutionState | None = None
    version: int = 0
    unsaved: bool = False
    history: list[Message] = field(default_factory=list)
    #: the prompt's conversation lines, made from ``history`` (see planning.context)
    conversation_text: tuple[list[Message], str] | None = None
    task: TaskState = field(default_factory=TaskState)
    #: the flow before this request, shown to a new plan (None after a reset)
    previous: ExecutionState | None = None
    #: the request is about live configuration: TaskState is left out of the prompts
    live: bool = False
    #: strategy next_step: an empty batch said the goal is reached
    goal_reached: bool = False
    cancel_requested: bool = False
    inflight: asyncio.Future[Any] | None = None
    #: real arguments of steps whose stored copy is masked, and the ids of the steps already
    #: stored (their arguments are masked: never split them again)
    raw_args: dict[str, dict[str, Any]] = field(default_factory=dict)
    stored_ids: set[str] = field(default_factory=set)
    #: the call in progress (its latency and tokens), traced once its reply is read
    pending_record: CallRecord = field(
        default_factory=lambda: CallRecord(purpose="chat", messages=[])
    )
    #: the domain's secret values, and the tool-call count they were read at (see scrub)
    known_secrets: tuple[int, list[str]] | None = None
    #: the capability signature of this turn's tools and strategy (see capability_signature)
    signature: str = field(init=False)

    def __post_init__(self) -> None:
        self.signature = capability_signature(self.deps.tools, self.deps.strategy.name)

    @property
    def current(self) -> ExecutionState:
        """The ExecutionState as stored, or an empty one."""
        return self.state if self.state is not None else ExecutionState()

    def state_or(self, fallback: ExecutionState) -> ExecutionState:
        return self.state if self.state is not None else fallback

    def check_cancel(self) -> None:
        if self.cancel_requested:
            raise TurnCancelledError("cancelled by the user")

    def scrub(self, text: str) -> str:
        """*text* without the secret values the tools' domain stores (read once per turn and
        again after each tool call, which may have stored a new one)."""
        tools = self.deps.tools
        if tools.secrets is None:
            return text
        if self.known_secrets is None or self.known_secrets[0] != tools.runs:
            self.known_secrets = (tools.runs, list(tools.secrets()))
        return scrub_text(text, self.known_secrets[1])

    def note(self, label: str, text: str) -> None:
        """A ``[LABEL]`` block in the turn's ``messages.log``."""
        self.deps.store.annotate(self.deps.key, self.message_id, label, self.scrub(text))

    def add_usage(self, usage: Usage) -> None:
        self.usage = Usage(
            input_tokens=self.usage.input_tokens + usage.input_tokens,
            output_tokens=self.usage.output_tokens + usage.output_tokens,
        )


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


def skip_pending(state: ExecutionState, keep: str = "") -> tuple[PlanStep, ...]:
    """The steps with every pending (or paused) step other than *keep* marked skipped."""
    return tuple(
        step.model_copy(update={"status": "skipped"})
        if step.status in ("pending", "running") and step.id != keep
        else step
        for step in state.steps
    )
