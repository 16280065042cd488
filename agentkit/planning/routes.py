"""The router's records and its second call: what a ``route`` record says about a decision
(:class:`RouteTrace`), the action decided (:class:`RoutedAction`), and the chosen tool's
arguments, filled by one ``route`` call under that tool's own schema (none for a tool without
arguments; arguments that do not validate become a question). The choice itself is
:mod:`agentkit.planning.tool_choice`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, JsonValue

from agentkit import language
from agentkit.calls.records import CallRecord
from agentkit.calls.tracer import ModelCall, error_text
from agentkit.errors import ModelError, StructuredOutputError
from agentkit.models.base import ChatMessage
from agentkit.planning import grounding
from agentkit.planning.graph import Turn
from agentkit.planning.plan import PlanFormatError, check_tool_call, extract_json
from agentkit.planning.prompts import render_prompt
from agentkit.planning.schemas import _lean, tool_args_schema
from agentkit.planning.state import cut
from agentkit.tools import mask_secrets

__all__ = [
    "Decision",
    "RouteCandidate",
    "RouteTrace",
    "RoutedAction",
    "ask_model",
    "fill_arguments",
    "language_of",
    "one_line",
    "one_value_one_argument",
    "record_route",
]

Decision = Literal["tool", "none", "ask", "fallback"]


class RouteCandidate(BaseModel):
    """One ranked tool offered to the model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    score: float
    side_effect: bool
    matched: tuple[str, ...] = ()
    #: the model's likelihood vote (log-probability of the request after the tool's
    #: description), for candidates that were put to it
    vote: float | None = None
    #: the semantic signal: the best cosine between the request and one of the tool's texts
    #: (centred), where the backend gives embeddings
    semantic: float | None = None
    #: the best raw cosine between the request and one of the tool's texts (the meaning
    #: floors ``router_min_similarity`` / ``router_settle_similarity`` read it)
    similarity: float | None = None


class RouteTrace(BaseModel):
    """What a ``route`` record says about one decision (its ``route`` field)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    stage: Literal["choice", "arguments", "semantic"] = "choice"
    #: how the candidates were put to the model: ``tie`` (near-tied lexical leaders) or
    #: ``settle`` (no or only weak lexical candidates: the tools and "none")
    vote_kind: Literal["", "tie", "settle"] = ""
    #: the likelihood vote for "none" (settle, a scoring backend)
    none_vote: float | None = None
    candidates: tuple[RouteCandidate, ...] = ()
    #: the model's choice: a candidate's name, ``none``, or ``""`` when no call was made
    choice: str = ""
    decision: Decision = "fallback"
    #: the tool decided on (the model's vote counted in), for a ``tool`` decision
    decided: str = ""
    reason: str = ""


@dataclass(frozen=True)
class RoutedAction:
    """The router's first action: a ``tool`` call, ``none`` (answer without tools), or a
    question (``ask``) for the user."""

    kind: Literal["tool", "none", "ask"]
    tool_name: str = ""
    tool_args: dict[str, JsonValue] = field(default_factory=dict)
    question: str = ""


def record_route(turn: Turn, trace: RouteTrace) -> None:
    """A decision taken without a model call: a ``route`` record with no messages."""
    record = CallRecord(purpose="route", messages=[], route=trace.model_dump(mode="json"))
    turn.tracer.note(record)


def one_line(text: str, limit: int = 160) -> str:
    return cut(" ".join(text.split()), limit)


async def ask_model(call: ModelCall) -> tuple[str, str]:
    """``(raw reply, problem)`` of a ``route`` call."""
    try:
        return (await call.reply()).text, ""
    except StructuredOutputError as error:  # a backend that checks the schema itself
        return error.raw, ""
    except (ModelError, TimeoutError, RecursionError) as error:
        return "", error_text(error)


def language_of(turn: Turn) -> str:
    user = [m.content for m in reversed(turn.intake.window) if m.role == "user"]
    return language.detect([turn.ctx.text, *user])


async def fill_arguments(turn: Turn, name: str) -> RoutedAction | None:
    """The chosen tool's arguments: none to fill, or one ``route`` call under its schema."""
    ctx = turn.ctx
    tool = turn.tools.get(name)
    schema = tool_args_schema(tool.json_schema(), grounding.said(turn))
    properties = _lean(tool.json_schema()).get("properties")
    trace = RouteTrace(stage="arguments", choice=name, decision="tool", decided=name)
    if not properties:
        return RoutedAction(kind="tool", tool_name=name)
    prompt = render_prompt(
        "route_args",
        ctx.agent_dir,
        tool_name=name,
        description=one_line(tool.description),
        arguments=json.dumps(properties, ensure_ascii=False, separators=(",", ":")),
        request=ctx.text,
    )
    sent = [ChatMessage(role="user", content=ctx.scrub(prompt))]
    async with turn.tracer.call("route", sent, schema) as call:
        raw, problem = await ask_model(call)
        args: dict[str, JsonValue] = {}
        if not problem:
            args, problem = _read_arguments(turn, name, raw)
        if problem:
            asked = trace.model_copy(update={"decision": "ask", "reason": problem})
            call.read(raw=raw, route=asked.model_dump(mode="json"), error=problem)
            return RoutedAction(kind="ask", question=_arguments_question(turn, name))
        args, dropped = one_value_one_argument(tool.json_schema(), args)
        if dropped:
            reason = f"dropped optional {', '.join(dropped)}: a value another argument holds"
            trace = trace.model_copy(update={"reason": reason})
        call.read(raw=raw, parsed=mask_secrets(dict(args)), route=trace.model_dump(mode="json"))
    return RoutedAction(kind="tool", tool_name=name, tool_args=args)


def one_value_one_argument(
    schema: Mapping[str, JsonValue], args: Mapping[str, JsonValue]
) -> tuple[dict[str, JsonValue], tuple[str, ...]]:
    """*args* without the optional arguments whose value another argument already holds,
    and their names. A value said once fills one argument: a small model decoding under
    the said values puts the one number or name it was given into every optional field too
    (a year as ``top_n``, a current as ``permeability``), where the tool's default was
    meant. Required arguments are kept as they are (two may be equal)."""
    required = schema.get("required")
    needed = {str(key) for key in required} if isinstance(required, list) else set()
    order = [key for key in args if key in needed] + [key for key in args if key not in needed]
    kept: dict[str, JsonValue] = {}
    dropped: list[str] = []
    held: list[str] = []
    for key in order:
        text = json.dumps(args[key], sort_keys=True)
        if key not in needed and text in held:
            dropped.append(key)
            continue
        held.append(text)
        kept[key] = args[key]
    return {key: kept[key] for key in args if key in kept}, tuple(dropped)


def _read_arguments(turn: Turn, name: str, raw: str) -> tuple[dict[str, JsonValue], str]:
    try:
        value = extract_json(raw)
        if not isinstance(value, dict):
            raise PlanFormatError("the arguments must be a JSON object")
        check_tool_call(turn.tools, name, value)
    except PlanFormatError as error:
        return {}, error.problem
    return dict(value), ""


def _arguments_question(turn: Turn, name: str) -> str:
    tool = turn.tools.get(name)
    required = tool.json_schema().get("required")
    needed = [str(item) for item in required] if isinstance(required, list) else []
    does = one_line(tool.description, 100)
    return language.ask_arguments(name, does, needed, language_of(turn), turn.ctx.agent_dir)
