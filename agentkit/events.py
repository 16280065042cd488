"""The typed event stream of a turn: one stream for widgets, CLI, SSE and evaluation.

Every event is a small immutable record with a literal ``type`` (a frozen, slotted dataclass:
the turn builds a dozen of them, and nothing it builds needs validating). Its wire form is made
once: ``event.to_json()`` is the JSON text every consumer sends or stores (the recorder, the
SSE stream, ``agentkit send --json``, the scanners), computed on first use and kept;
``event.to_json_dict()`` is the same form as a fresh dict (camelCase keys, defaults present).
Pydantic stays at the edges: :data:`EVENT_ADAPTER` parses an event read back (HTTP, stored
turns, transcripts) and gives the JSON schema the HTTP API publishes. Only the HTTP layer knows
SSE framing. The seed's SSE names (session, thinking, agent_output, tool_call, error, result)
are a subset; the planner adds planning, plan, step_start, step_complete, replan and ask_user.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Annotated, Any, ClassVar, Literal, cast, get_args, get_origin, get_type_hints

from pydantic import ConfigDict, Field, TypeAdapter
from pydantic.alias_generators import to_camel
from pydantic_core import to_jsonable_python

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

_NO_USAGE = Usage()


def _refuse(value: object) -> object:
    raise TypeError(f"{type(value).__name__} is not JSON")  # to_json_dict left none


def _make_dumps() -> Callable[[object], str]:
    """``json.dumps(value, ensure_ascii=False)`` without its cost per call (a new encoder
    each time): the C encoder made once (no circular-reference check: the events' JSON forms
    are trees)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    basestring = getattr(json.encoder, "c_encode_basestring", None)
    if make is None or basestring is None:  # no C accelerator: the stdlib's own path
        return json.JSONEncoder(ensure_ascii=False).encode
    encode = make(None, _refuse, basestring, None, ": ", ", ", False, False, True)

    def dumps(value: object) -> str:
        return "".join(encode(value, 0))

    return dumps


_dumps = _make_dumps()


class _Event:
    """What every event shares: its JSON form, made once (see the module docstring)."""

    __slots__ = ("_json",)
    _json: str
    #: what :data:`EVENT_ADAPTER` reads (camelCase or snake_case keys, nothing else)
    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid"
    )
    #: (attribute, JSON key, conversion or None) of every field in order (set by :func:`_wire`)
    _WIRE: ClassVar[tuple[tuple[str, str, Callable[[Any], Any] | None], ...]] = ()

    def to_json_dict(self) -> dict[str, Any]:
        """The JSON form: camelCase keys in field order, defaults present (a new dict)."""
        data: dict[str, Any] = {}
        for name, key, convert in self._WIRE:
            value = getattr(self, name)
            data[key] = value if convert is None else convert(value)
        return data

    def to_json(self) -> str:
        """The JSON text of :meth:`to_json_dict` (``json.dumps``, non-ASCII kept), made once."""
        text: str | None = getattr(self, "_json", None)
        if text is None:
            text = _dumps(self.to_json_dict())
            object.__setattr__(self, "_json", text)  # a cache, not a field: still frozen
        return text


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionEvent(_Event):
    """First event of every turn: which conversation, which scenario, what was injected."""

    type: Literal["session"] = "session"
    agent_id: str
    conversation_id: str
    message_id: str
    scenario: Scenario
    injected: Annotated[str, Field(description="what the prompt carried besides the message")]
    history_messages: Annotated[int, Field(description="messages summarised (scenario C)")] = 0
    model: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ThinkingEvent(_Event):
    type: Literal["thinking"] = "thinking"
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentOutputEvent(_Event):
    """A piece of the assistant's reply, in order; the pieces joined are the reply."""

    type: Literal["agent_output"] = "agent_output"
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallEvent(_Event):
    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultEvent(_Event):
    type: Literal["tool_result"] = "tool_result"
    id: str
    name: str
    output: str
    ok: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionEvent(_Event):
    """A backend asked for permission to run a tool (ACP ``session/request_permission``)."""

    type: Literal["permission"] = "permission"
    tool_call_id: str
    title: str
    options: list[str] = field(default_factory=list)
    decision: Annotated[
        str, Field(description="what agentkit answered, e.g. the option id or 'deny'")
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorEvent(_Event):
    type: Literal["error"] = "error"
    message: str
    code: str = "error"
    retryable: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class CompressionEvent(_Event):
    """Older messages were summarised into TaskState; before/after figures of the window."""

    type: Literal["compression"] = "compression"
    messages_before: int
    messages_after: int
    tokens_before: int
    tokens_after: int
    facts_added: Annotated[int, Field(description="important facts new in TaskState")] = 0
    facts_removed: Annotated[int, Field(description="important facts no longer in TaskState")] = 0
    strategy: Annotated[str, Field(description="compression.strategy that wrote it")] = "model"
    facts_ungrounded: Annotated[
        int,
        Field(description="model-written facts dropped: not found in the summarised window"),
    ] = 0
    usage: Annotated[
        Usage,
        Field(
            description="the model calls the upkeep made (after the turn's result: not in its "
            "usage)"
        ),
    ] = field(default_factory=Usage)


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanningEvent(_Event):
    """The planner starts a plan; ``live_state`` lists the snapshot tools it re-ran first."""

    type: Literal["planning"] = "planning"
    live_state: list[str] = field(default_factory=list)
    task_state_included: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedStep(_Event):
    """One step as shown in ``plan``/``replan`` events (tool arguments masked)."""

    id: str
    step_type: Literal["tool", "reason", "ask_user", "respond"]
    title: str = ""
    tool_name: str = ""
    tool_args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanEvent(_Event):
    type: Literal["plan"] = "plan"
    goal: str
    steps: list[PlannedStep] = field(default_factory=list)
    repaired: Annotated[bool, Field(description="valid only after the repair round")] = False


@dataclass(frozen=True, slots=True, kw_only=True)
class StepStartEvent(_Event):
    type: Literal["step_start"] = "step_start"
    step_id: str
    step_type: Literal["tool", "reason", "ask_user", "respond"]
    title: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class StepCompleteEvent(_Event):
    type: Literal["step_complete"] = "step_complete"
    step_id: str
    status: Literal["done", "failed", "skipped"]
    summary: str = ""
    #: a skipped tool step: the gate's rule that refused it, why, and the tool it was for
    rule: str = ""
    reason: str = ""
    tool_name: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplanEvent(_Event):
    """The decision after a step: continue, replace_remaining, ask_user or finish."""

    type: Literal["replan"] = "replan"
    action: Literal["continue", "replace_remaining", "ask_user", "finish"]
    reason: str = ""
    steps: list[PlannedStep] = field(default_factory=list)
    note: Annotated[str, Field(description="why an invalid decision was taken as continue")] = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class AskUserEvent(_Event):
    """The turn pauses: a question (``waiting_user``) or a consent request for one
    side-effecting tool call (``waiting_confirmation``, naming the tool and its arguments)."""

    type: Literal["ask_user"] = "ask_user"
    question: str
    kind: Literal["question", "confirmation"] = "question"
    tool_name: str = ""
    tool_args: dict[str, Any] = field(default_factory=dict)
    #: a confirmation's pending approval, to decide on by id (``Agent.decide``, HTTP, ACP)
    approval_id: str = ""
    #: the plan step that waits (the question's ``ask_user`` step, the consent's tool step)
    step_id: str = ""
    #: the gate's rule that held the call (``grounding``, ``consent``; "" for a planned
    #: question) and why (:mod:`agentkit.planning.gate`)
    rule: str = ""
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultEvent(_Event):
    """Last event of every turn."""

    type: Literal["result"] = "result"
    conversation_id: str
    message_id: str
    status: Literal["completed", "failed", "cancelled"]
    text: str = ""
    usage: Usage = _NO_USAGE
    latency_ms: float = 0.0
    #: the turn's trace (its ``invoke_agent`` span's trace id; "" when it was not traced)
    trace_id: str = ""


def _json_value(value: dict[str, Any]) -> dict[str, Any]:
    """A field typed ``Any`` inside (tool arguments) as JSON, as pydantic dumps ``Any``."""
    return cast("dict[str, Any]", to_jsonable_python(value)) if value else {}


def _steps(steps: list[PlannedStep]) -> list[dict[str, Any]]:
    return [step.to_json_dict() for step in steps]


def _convert(kind: object) -> Callable[[Any], Any] | None:
    """How a value of the field type *kind* becomes JSON, as pydantic wrote it (None: it is
    JSON as it is). An unknown type stops the import: a new field's JSON form is decided here,
    and pinned by tests/test_events_wire.py."""
    if kind is str or get_origin(kind) is Literal:
        return None
    if kind in (int, float, bool):  # an int given for a float is written 3.0, True for an int 1
        return cast("Callable[[Any], Any]", kind)
    if kind is Usage:
        return Usage.json_dict
    origin, args = get_origin(kind), get_args(kind)
    if origin is dict and args == (str, Any):
        return _json_value
    if origin is list and args == (str,):
        return list
    if origin is list and args == (PlannedStep,):
        return _steps
    raise TypeError(f"no JSON form for an event field of type {kind!r}")


def _wire(*classes: type[_Event]) -> None:
    for cls in classes:
        hints = get_type_hints(cls)
        cls._WIRE = tuple(
            (f.name, to_camel(f.name), _convert(hints[f.name]))
            for f in fields(cls)  # type: ignore[arg-type]
        )


_wire(
    SessionEvent,
    ThinkingEvent,
    AgentOutputEvent,
    ToolCallEvent,
    ToolResultEvent,
    PermissionEvent,
    ErrorEvent,
    CompressionEvent,
    PlanningEvent,
    PlannedStep,
    PlanEvent,
    StepStartEvent,
    StepCompleteEvent,
    ReplanEvent,
    AskUserEvent,
    ResultEvent,
)

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
#: parses an event read back (camelCase or snake_case keys); its JSON schema is the API's
EVENT_ADAPTER: TypeAdapter[AgentEvent] = TypeAdapter(AgentEvent)
