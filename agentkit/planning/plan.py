"""What the model must reply when it plans, replans or classifies, and how a reply is read.

Model-written JSON is a trust boundary. Reading a reply takes two stages:

1. :func:`extract_json` is lenient about the *wrapping*: surrounding prose, a ```json fence,
   trailing commas. It never guesses at content.
2. :func:`parse_plan` / :func:`parse_replan` are strict about the *content*: the pydantic
   models below (``strict``: no "1" for 1 or "true" for true; a missing optional field takes its
   default, ``null`` counts as missing), then the checks only the runtime can make — every tool
   exists, its arguments validate against its schema (:meth:`ToolRegistry.validate`), at most
   ``max_steps`` steps, unique ids.

Both raise :class:`PlanFormatError` with a one-line ``problem`` the repair round shows the model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, model_validator

from agentkit.errors import AgentkitError
from agentkit.memory import PlanStep
from agentkit.tools import ToolArgumentsError, ToolRegistry

__all__ = [
    "MAX_REPLY_CHARS",
    "ActReply",
    "BatchReply",
    "ClassifyReply",
    "PlanFormatError",
    "PlanReply",
    "ReplanReply",
    "StepReply",
    "check_tool_call",
    "extract_json",
    "parse_act",
    "parse_classify",
    "parse_plan",
    "parse_replan",
]

#: a reply longer than this is not read at all (a runaway generation)
MAX_REPLY_CHARS = 64_000
_MAX_TEXT = 4_000
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


class PlanFormatError(AgentkitError):
    """A plan, replan or classify reply that cannot be used; ``problem`` says why in one line."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(problem)


class _Reply(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)

    @model_validator(mode="before")
    @classmethod
    def _nulls_are_missing(cls, data: Any) -> Any:  # noqa: ANN401 - raw model JSON
        if isinstance(data, dict):
            return {key: value for key, value in data.items() if value is not None}
        return data


class StepReply(_Reply):
    """One step as the model writes it."""

    id: str = Field(min_length=1, max_length=64)
    type: Literal["tool", "reason", "ask_user", "respond"]
    title: str = Field(default="", max_length=_MAX_TEXT)
    tool_name: str = Field(default="", max_length=64)
    tool_args: dict[str, JsonValue] = Field(default_factory=dict)
    instruction: str = Field(default="", max_length=_MAX_TEXT)
    requires_confirmation: bool = False

    @model_validator(mode="after")
    def _complete(self) -> StepReply:
        if self.type == "tool" and not self.tool_name:
            raise ValueError(f"step {self.id!r} is a tool step without tool_name")
        if self.type == "ask_user" and not (self.instruction or self.title):
            raise ValueError(f"ask_user step {self.id!r} needs the question in instruction")
        return self

    def to_step(self) -> PlanStep:
        return PlanStep(
            id=self.id,
            type=self.type,
            title=self.title,
            tool_name=self.tool_name if self.type == "tool" else "",
            tool_args=self.tool_args if self.type == "tool" else {},
            instruction=self.instruction,
            requires_confirmation=self.requires_confirmation,
        )


class PlanReply(_Reply):
    goal: str = Field(default="", max_length=_MAX_TEXT)
    steps: list[StepReply] = Field(min_length=1)


class BatchReply(_Reply):
    """The next batch of a ``next_step`` plan; no steps means the goal is reached."""

    goal: str = Field(default="", max_length=_MAX_TEXT)
    steps: list[StepReply] = Field(default_factory=list)


class ReplanReply(_Reply):
    action: Literal["continue", "replace_remaining", "ask_user", "finish"]
    steps: list[StepReply] = Field(default_factory=list)
    question: str = Field(default="", max_length=_MAX_TEXT)
    reason: str = Field(default="", max_length=_MAX_TEXT)

    @model_validator(mode="after")
    def _complete(self) -> ReplanReply:
        if self.action == "replace_remaining" and not self.steps:
            raise ValueError("replace_remaining needs the new steps")
        if self.action == "ask_user" and not self.question:
            raise ValueError("ask_user needs the question")
        return self


class ClassifyReply(_Reply):
    intent: Literal["live_state", "other"]


class ActReply(_Reply):
    """One ``tool_loop`` decision without native function calling: a tool call or the answer."""

    action: Literal["tool", "answer"]
    tool_name: str = Field(default="", max_length=64)
    tool_args: dict[str, JsonValue] = Field(default_factory=dict)
    text: str = Field(default="", max_length=_MAX_TEXT)

    @model_validator(mode="after")
    def _complete(self) -> ActReply:
        if self.action == "tool" and not self.tool_name:
            raise ValueError("a tool action needs tool_name")
        if self.action == "answer" and not self.text.strip():
            raise ValueError("an answer action needs text")
        return self


def extract_json(text: str) -> JsonValue:
    """The JSON value in *text*: as is, else inside a code fence, else the outermost ``{…}``;
    each candidate also tried without trailing commas. Raises :class:`PlanFormatError`."""
    if len(text) > MAX_REPLY_CHARS:
        raise PlanFormatError(f"the reply is too long ({len(text)} characters)")
    stripped = text.strip()
    if not stripped:
        raise PlanFormatError("the reply is empty")
    candidates = [stripped]
    candidates.extend(match.strip() for match in _FENCE.findall(stripped))
    start, end = stripped.find("{"), stripped.rfind("}")
    if 0 <= start < end:
        candidates.append(stripped[start : end + 1])
    first_problem = ""
    for candidate in candidates:
        for attempt in (candidate, _TRAILING_COMMA.sub(r"\1", candidate)):
            try:
                value: JsonValue = json.loads(attempt, strict=False)  # raw newlines in strings
            except (json.JSONDecodeError, RecursionError) as error:
                first_problem = first_problem or f"not valid JSON ({error})"
                continue
            return value
    raise PlanFormatError(first_problem or "no JSON object found")


def _describe(error: ValidationError) -> str:
    problem = error.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in problem["loc"]) or "(root)"
    more = error.error_count() - 1
    return f"{where}: {problem['msg']}" + (f" (and {more} more)" if more else "")


def _check_steps(
    steps: list[StepReply], tools: ToolRegistry, max_steps: int, taken: frozenset[str]
) -> tuple[PlanStep, ...]:
    if len(steps) > max_steps:
        raise PlanFormatError(f"{len(steps)} steps; at most {max_steps} are allowed")
    seen: set[str] = set()
    for step in steps:
        if step.id in seen or step.id in taken:
            raise PlanFormatError(f"duplicate step id {step.id!r}")
        seen.add(step.id)
        if step.type != "tool":
            continue
        if step.tool_name not in tools:
            known = ", ".join(tools.names()) or "(none)"
            raise PlanFormatError(
                f"step {step.id!r}: unknown tool {step.tool_name!r}; known: {known}"
            )
        try:
            tools.validate(step.tool_name, step.tool_args)
        except ToolArgumentsError as error:
            raise PlanFormatError(f"step {step.id!r}: {error}") from None
    return tuple(step.to_step() for step in steps)


def parse_plan(
    value: JsonValue,
    tools: ToolRegistry,
    max_steps: int,
    *,
    taken: frozenset[str] = frozenset(),
    batch: bool = False,
) -> tuple[str, tuple[PlanStep, ...]]:
    """The goal and steps of a ``plan`` reply, fully checked. A *batch* (strategy
    ``next_step``) may be empty (goal reached) and must not reuse the *taken* step ids."""
    if not isinstance(value, dict):
        raise PlanFormatError(f"the plan must be a JSON object, not {type(value).__name__}")
    kind: type[PlanReply | BatchReply] = BatchReply if batch else PlanReply
    try:
        reply = kind.model_validate(value)
    except ValidationError as error:
        raise PlanFormatError(_describe(error)) from None
    return reply.goal, _check_steps(reply.steps, tools, max_steps, taken)


def parse_replan(
    value: JsonValue, tools: ToolRegistry, max_steps: int, taken: frozenset[str]
) -> tuple[ReplanReply, tuple[PlanStep, ...]]:
    """A ``replan`` decision and its new steps (ids must not reuse *taken* ones)."""
    if not isinstance(value, dict):
        raise PlanFormatError(f"the decision must be a JSON object, not {type(value).__name__}")
    try:
        reply = ReplanReply.model_validate(value)
    except ValidationError as error:
        raise PlanFormatError(_describe(error)) from None
    steps: tuple[PlanStep, ...] = ()
    if reply.action == "replace_remaining":
        steps = _check_steps(reply.steps, tools, max_steps, taken)
    return reply, steps


def parse_classify(value: JsonValue) -> Literal["live_state", "other"]:
    """The intent of a ``classify`` reply."""
    try:
        return ClassifyReply.model_validate(value).intent
    except ValidationError as error:
        raise PlanFormatError(_describe(error)) from None


def check_tool_call(tools: ToolRegistry, name: str, args: Mapping[str, JsonValue]) -> None:
    """Raise :class:`PlanFormatError` unless *name* is a known tool and *args* fit it."""
    if name not in tools:
        known = ", ".join(tools.names()) or "(none)"
        raise PlanFormatError(f"unknown tool {name!r}; known: {known}")
    try:
        tools.validate(name, dict(args))
    except ToolArgumentsError as error:
        raise PlanFormatError(str(error)) from None


def parse_act(value: JsonValue, tools: ToolRegistry) -> ActReply:
    """A ``tool_loop`` action (JSON form), its tool call checked against the registry."""
    if not isinstance(value, dict):
        raise PlanFormatError(f"the action must be a JSON object, not {type(value).__name__}")
    try:
        reply = ActReply.model_validate(value)
    except ValidationError as error:
        raise PlanFormatError(_describe(error)) from None
    if reply.action == "tool":
        check_tool_call(tools, reply.tool_name, reply.tool_args)
    return reply
