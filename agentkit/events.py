"""The typed event stream of a turn: one stream for widgets, CLI, SSE and evaluation.

Every event is a pydantic record with a literal ``type``; ``event.to_json_dict()`` is its JSON
form (camelCase keys), and :data:`EVENT_ADAPTER` parses one back. Only the HTTP layer knows SSE
framing. The seed's SSE names (session, thinking, agent_output, tool_call, error, result) are a
subset; the planner adds planning, plan, step_start, step_complete, replan and ask_user.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic.alias_generators import to_camel

from agentkit.types import Usage

__all__ = [
    "EVENT_ADAPTER",
    "AgentEvent",
    "AgentOutputEvent",
    "AskUserEvent",
    "CompressionEvent",
    "ErrorEvent",
    "PermissionEvent",
    "PlanEvent",
    "PlannedStep",
    "PlanningEvent",
    "ReplanEvent",
    "ResultEvent",
    "Scenario",
    "SessionEvent",
    "StepCompleteEvent",
    "StepStartEvent",
    "ThinkingEvent",
    "ToolCallEvent",
    "ToolResultEvent",
    "Usage",
]

Scenario = Literal["A", "B", "C"]
"""How the prompt was built (seed 16.2): A new conversation, B live session, C restored."""


class _Event(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


class SessionEvent(_Event):
    """First event of every turn: which conversation, which scenario, what was injected."""

    type: Literal["session"] = "session"
    agent_id: str
    conversation_id: str
    message_id: str
    scenario: Scenario
    injected: str = Field(description="what the prompt carried besides the message")
    history_messages: int = Field(default=0, description="messages summarised (scenario C)")
    model: str = ""


class ThinkingEvent(_Event):
    type: Literal["thinking"] = "thinking"
    text: str


class AgentOutputEvent(_Event):
    """A piece of the assistant's reply, in order; the pieces joined are the reply."""

    type: Literal["agent_output"] = "agent_output"
    text: str


class ToolCallEvent(_Event):
    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ToolResultEvent(_Event):
    type: Literal["tool_result"] = "tool_result"
    id: str
    name: str
    output: str
    ok: bool = True


class PermissionEvent(_Event):
    """A backend asked for permission to run a tool (ACP ``session/request_permission``)."""

    type: Literal["permission"] = "permission"
    tool_call_id: str
    title: str
    options: list[str] = Field(default_factory=list)
    decision: str = Field(description="what agentkit answered, e.g. the option id or 'deny'")


class ErrorEvent(_Event):
    type: Literal["error"] = "error"
    message: str
    code: str = "error"
    retryable: bool = False


class CompressionEvent(_Event):
    """Older messages were summarised into TaskState; before/after figures of the window."""

    type: Literal["compression"] = "compression"
    messages_before: int
    messages_after: int
    tokens_before: int
    tokens_after: int
    facts_added: int = Field(default=0, description="important facts new in TaskState")
    facts_removed: int = Field(default=0, description="important facts no longer in TaskState")
    strategy: str = Field(default="model", description="compression.strategy that wrote it")
    facts_ungrounded: int = Field(
        default=0, description="model-written facts dropped: not found in the summarised window"
    )
    usage: Usage = Field(
        default_factory=Usage,
        description="the model calls the upkeep made (after the turn's result: not in its usage)",
    )


class PlanningEvent(_Event):
    """The planner starts a plan; ``live_state`` lists the snapshot tools it re-ran first."""

    type: Literal["planning"] = "planning"
    live_state: list[str] = Field(default_factory=list)
    task_state_included: bool = True


class PlannedStep(_Event):
    """One step as shown in ``plan``/``replan`` events (tool arguments masked)."""

    id: str
    step_type: Literal["tool", "reason", "ask_user", "respond"]
    title: str = ""
    tool_name: str = ""
    tool_args: dict[str, Any] = Field(default_factory=dict)


class PlanEvent(_Event):
    type: Literal["plan"] = "plan"
    goal: str
    steps: list[PlannedStep] = Field(default_factory=list)
    repaired: bool = Field(default=False, description="valid only after the repair round")


class StepStartEvent(_Event):
    type: Literal["step_start"] = "step_start"
    step_id: str
    step_type: Literal["tool", "reason", "ask_user", "respond"]
    title: str = ""


class StepCompleteEvent(_Event):
    type: Literal["step_complete"] = "step_complete"
    step_id: str
    status: Literal["done", "failed", "skipped"]
    summary: str = ""
    #: a skipped tool step: the gate's rule that refused it and why
    rule: str = ""
    reason: str = ""


class ReplanEvent(_Event):
    """The decision after a step: continue, replace_remaining, ask_user or finish."""

    type: Literal["replan"] = "replan"
    action: Literal["continue", "replace_remaining", "ask_user", "finish"]
    reason: str = ""
    steps: list[PlannedStep] = Field(default_factory=list)
    note: str = Field(default="", description="why an invalid decision was taken as continue")


class AskUserEvent(_Event):
    """The turn pauses: a question (``waiting_user``) or a consent request for one
    side-effecting tool call (``waiting_confirmation``, naming the tool and its arguments)."""

    type: Literal["ask_user"] = "ask_user"
    question: str
    kind: Literal["question", "confirmation"] = "question"
    tool_name: str = ""
    tool_args: dict[str, Any] = Field(default_factory=dict)
    #: a confirmation's pending approval, to decide on by id (``Agent.decide``, HTTP, ACP)
    approval_id: str = ""
    #: the plan step that waits (the question's ``ask_user`` step, the consent's tool step)
    step_id: str = ""
    #: the gate's rule that held the call (``grounding``, ``consent``; "" for a planned
    #: question) and why (:mod:`agentkit.planning.gate`)
    rule: str = ""
    reason: str = ""


class ResultEvent(_Event):
    """Last event of every turn."""

    type: Literal["result"] = "result"
    conversation_id: str
    message_id: str
    status: Literal["completed", "failed", "cancelled"]
    text: str = ""
    usage: Usage = Usage()
    latency_ms: float = 0.0
    #: the turn's trace (its ``invoke_agent`` span's trace id; "" when it was not traced)
    trace_id: str = ""


AgentEvent = Annotated[
    SessionEvent
    | ThinkingEvent
    | AgentOutputEvent
    | ToolCallEvent
    | ToolResultEvent
    | PermissionEvent
    | ErrorEvent
    | CompressionEvent
    | PlanningEvent
    | PlanEvent
    | StepStartEvent
    | StepCompleteEvent
    | ReplanEvent
    | AskUserEvent
    | ResultEvent,
    Field(discriminator="type"),
]
EVENT_ADAPTER: TypeAdapter[AgentEvent] = TypeAdapter(AgentEvent)
