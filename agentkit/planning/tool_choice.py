"""The tool-choice router: a new request's first action for small models, in a few tokens.

A 135M model cannot pick one of ten tools from a long planning prompt; it can pick one of a
few names from a short one when a grammar holds it to those names. With
``"planner": {"tool_choice": "router"}`` a strategy asks :func:`choose` for its first action
instead of its own plan or action call:

1. **candidates**: the agent's tools ranked for the request from what they say about
   themselves (:mod:`agentkit.planning.tool_ranking`); the best ``router_candidates`` with any
   match are the candidates. No candidate at all means "no tool" without a model call.
2. **choice**: one ``route`` call with a short prompt (the candidates, best first, and
   ``none``) whose reply is ``{"tool": <enum of the candidates and "none">}``: the embedded
   model's grammar lets it write nothing else.
3. **decision**: ``none`` is an answer without tools (greetings, thanks, questions about the
   assistant). The model's choice is a vote that settles near-ties in the ranking (worth
   ``_MODEL_VOTE`` of the leader's score), not an override of a clear lead. A side-effecting
   tool is not guessed: unless the ranking clearly puts it first *and* the model chose it, the
   user is asked which of the candidates they meant. Otherwise the chosen tool's arguments are
   filled by a second ``route`` call under that tool's own schema (no call for a tool without
   arguments); arguments that do not validate become a question for the user.

Every decision is one ``route`` record in ``calls.jsonl`` whose ``route`` field holds the
candidates with their scores, the model's choice and the decision (:class:`RouteTrace`). When
the router cannot decide — the model call failed, or it is off, or the backend is not a chat
model — :func:`choose` returns None and the strategy asks its own model as it always did.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, JsonValue

from agentkit.errors import ModelError, StructuredOutputError
from agentkit.events import AgentEvent
from agentkit.memory import ExecutionState, PlanStep
from agentkit.models.base import ChatMessage, ChatModel, JsonSchema
from agentkit.planning import calls, recording
from agentkit.planning.plan import PlanFormatError, check_tool_call, extract_json
from agentkit.planning.prompts import render_prompt
from agentkit.planning.schemas import _lean
from agentkit.planning.state import TurnState, cut
from agentkit.planning.steps import run_step
from agentkit.planning.tool_ranking import RankedTool, rank_tools
from agentkit.planning.trace import CallRecord
from agentkit.tools import mask_secrets

__all__ = ["NO_TOOL", "RouteCandidate", "RouteTrace", "RoutedAction", "choose", "start_routed"]

#: the choice that means "no tool: answer directly"
NO_TOOL = "none"
#: a side-effecting choice must lead the ranking by this factor, or the user is asked
_CLEAR_LEAD = 1.25
#: the model's vote, as a share of the leading candidate's score: it settles near-ties in the
#: ranking but does not overturn a clear lead (a 135M model's choice alone is often off)
_MODEL_VOTE = 0.4

Decision = Literal["tool", "none", "ask", "fallback"]


class RouteCandidate(BaseModel):
    """One ranked tool offered to the model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    score: float
    side_effect: bool
    matched: tuple[str, ...] = ()


class RouteTrace(BaseModel):
    """What a ``route`` record says about one decision (its ``route`` field)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    stage: Literal["choice", "arguments"] = "choice"
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


def enabled(turn: TurnState) -> bool:
    deps = turn.deps
    return (
        deps.config.tool_choice == "router"
        and len(deps.tools) > 0
        and isinstance(deps.model, ChatModel)
    )


async def choose(turn: TurnState) -> RoutedAction | None:
    """The first action for ``turn``'s request, or None: the router is off or could not decide
    (then the strategy asks its own model, as without the router)."""
    if not enabled(turn):
        return None
    deps = turn.deps
    ranked = rank_tools(deps.tools, deps.text)
    best = [item for item in ranked if item.score > 0][: deps.config.router_candidates]
    candidates = tuple(_candidate(turn, item) for item in best)
    if not candidates:
        _trace(turn, RouteTrace(decision="none", reason="no tool matches the request"))
        return RoutedAction(kind="none")
    names = [candidate.name for candidate in candidates]
    schema: JsonSchema = {
        "type": "object",
        "properties": {"tool": {"enum": [*names, NO_TOOL]}},
        "required": ["tool"],
        "additionalProperties": False,
    }
    sent = [ChatMessage(role="user", content=turn.scrub(_route_prompt(turn, candidates)))]
    trace = RouteTrace(candidates=candidates)
    raw, problem = await _ask_model(turn, sent, schema)
    choice = ""
    if not problem:
        choice, problem = _read_choice(raw, names)
    if problem:
        _record(turn, raw, None, trace.model_copy(update={"reason": problem}), problem)
        return None
    decided = _decide(turn, candidates, choice)
    trace = trace.model_copy(
        update={"choice": choice, "decision": decided.kind, "decided": decided.tool_name}
    )
    if decided.kind == "ask":
        trace = trace.model_copy(update={"reason": "a side-effecting tool the ranking doubts"})
    _record(turn, raw, {"tool": choice}, trace, "")
    if decided.kind != "tool":
        return decided
    return await _fill_arguments(turn, decided.tool_name)


def _candidate(turn: TurnState, item: RankedTool) -> RouteCandidate:
    tool = turn.deps.tools.get(item.name)
    return RouteCandidate(
        name=item.name, score=item.score, side_effect=tool.side_effect, matched=item.matched
    )


def _route_prompt(turn: TurnState, candidates: tuple[RouteCandidate, ...]) -> str:
    tools = turn.deps.tools
    lines = []
    for candidate in candidates:
        tool = tools.get(candidate.name)
        example = f' (e.g. "{tool.examples[0]}")' if tool.examples else ""
        lines.append(f"- {candidate.name}: {_one_line(tool.description)}{example}")
    return render_prompt(
        "route", turn.deps.agent_dir, candidates="\n".join(lines), request=turn.deps.text
    )


def _one_line(text: str, limit: int = 160) -> str:
    return cut(" ".join(text.split()), limit)


async def _ask_model(
    turn: TurnState, sent: list[ChatMessage], schema: JsonSchema
) -> tuple[str, str]:
    """``(raw reply, problem)``; the call's record waits in ``turn.pending_record``."""
    try:
        return (await calls.call(turn, "route", sent, schema, traced=False)).text, ""
    except StructuredOutputError as error:  # a backend that checks the schema itself
        return error.raw, ""
    except (ModelError, TimeoutError, RecursionError) as error:
        return "", calls.error_text(error)


def _read_choice(raw: str, names: list[str]) -> tuple[str, str]:
    try:
        value = extract_json(raw)
    except PlanFormatError as error:
        return "", error.problem
    choice = value.get("tool") if isinstance(value, dict) else None
    if choice == NO_TOOL or choice in names:
        return str(choice), ""
    return "", f"the choice must be one of {[*names, NO_TOOL]}, not {choice!r}"


def _decide(turn: TurnState, candidates: tuple[RouteCandidate, ...], choice: str) -> RoutedAction:
    if choice == NO_TOOL:
        return RoutedAction(kind="none")
    chosen = _vote(candidates, choice)
    agreed = chosen.name == choice  # the ranking and the model agree on a write, or ask
    if chosen.side_effect and not (agreed and _clear_leader(candidates, chosen)):
        return RoutedAction(kind="ask", question=_which_question(turn, candidates))
    return RoutedAction(kind="tool", tool_name=chosen.name)


def _vote(candidates: tuple[RouteCandidate, ...], choice: str) -> RouteCandidate:
    """The candidate with the best score once the model's choice got its vote."""
    vote = _MODEL_VOTE * candidates[0].score

    def weighed(candidate: RouteCandidate) -> float:
        return candidate.score + (vote if candidate.name == choice else 0.0)

    return max(candidates, key=weighed)  # the first of equals: the ranking's order


def _clear_leader(candidates: tuple[RouteCandidate, ...], chosen: RouteCandidate) -> bool:
    """*chosen* is first in the ranking, ahead of the next by a clear margin."""
    if candidates[0].name != chosen.name:
        return False
    return len(candidates) == 1 or chosen.score >= _CLEAR_LEAD * candidates[1].score


def _which_question(turn: TurnState, candidates: tuple[RouteCandidate, ...]) -> str:
    tools = turn.deps.tools
    options = "\n".join(
        f"- {_one_line(tools.get(c.name).description, 100)} ({c.name})" for c in candidates
    )
    return (
        "I am not sure what you would like me to do. Did you mean one of these?\n"
        f"{options}\nOr tell me in other words."
    )


async def _fill_arguments(turn: TurnState, name: str) -> RoutedAction | None:
    """The chosen tool's arguments: none to fill, or one ``route`` call under its schema."""
    tool = turn.deps.tools.get(name)
    schema = _lean(tool.json_schema())
    properties = schema.get("properties") if isinstance(schema, dict) else None
    trace = RouteTrace(stage="arguments", choice=name, decision="tool", decided=name)
    if not properties:
        return RoutedAction(kind="tool", tool_name=name)
    prompt = render_prompt(
        "route_args",
        turn.deps.agent_dir,
        tool_name=name,
        description=_one_line(tool.description),
        arguments=json.dumps(properties, ensure_ascii=False, separators=(",", ":")),
        request=turn.deps.text,
    )
    sent = [ChatMessage(role="user", content=turn.scrub(prompt))]
    raw, problem = await _ask_model(turn, sent, schema)
    args: dict[str, JsonValue] = {}
    if not problem:
        args, problem = _read_arguments(turn, name, raw)
    if problem:
        asked = trace.model_copy(update={"decision": "ask", "reason": problem})
        _record(turn, raw, None, asked, problem)
        return RoutedAction(kind="ask", question=_arguments_question(turn, name))
    _record(turn, raw, mask_secrets(dict(args)), trace, "")
    return RoutedAction(kind="tool", tool_name=name, tool_args=args)


def _read_arguments(turn: TurnState, name: str, raw: str) -> tuple[dict[str, JsonValue], str]:
    try:
        value = extract_json(raw)
        if not isinstance(value, dict):
            raise PlanFormatError("the arguments must be a JSON object")
        check_tool_call(turn.deps.tools, name, value)
    except PlanFormatError as error:
        return {}, error.problem
    return dict(value), ""


def _arguments_question(turn: TurnState, name: str) -> str:
    tool = turn.deps.tools.get(name)
    schema = tool.json_schema()
    required = schema.get("required")
    needed = ", ".join(str(item) for item in required) if isinstance(required, list) else ""
    what = f" I need: {needed}." if needed else ""
    return f"To {_one_line(tool.description, 100).rstrip('.').lower()},{what} Can you tell me?"


def _record(turn: TurnState, raw: str, parsed: JsonValue, trace: RouteTrace, problem: str) -> None:
    update: dict[str, object] = {
        "raw": turn.scrub(raw),
        "parsed": parsed,
        "route": trace.model_dump(mode="json"),
    }
    if problem:
        update["error"] = problem
    calls.record(turn, turn.pending_record.model_copy(update=update))


def _trace(turn: TurnState, trace: RouteTrace) -> None:
    """A decision taken without a model call: a ``route`` record with no messages."""
    record = CallRecord(purpose="route", messages=[], route=trace.model_dump(mode="json"))
    calls.record(turn, record)


# -- running the routed action -------------------------------------------------------------


def _first_steps(routed: RoutedAction, then_respond: bool) -> tuple[PlanStep, ...]:
    if routed.kind == "none":
        return (
            PlanStep(
                id="answer_1",
                type="respond",
                title="Answer",
                instruction="Reply to the user directly; no tool is needed.",
            ),
        )
    if routed.kind == "ask":
        return (
            PlanStep(id="ask_1", type="ask_user", title="Question", instruction=routed.question),
        )
    step = PlanStep(
        id="act_1",
        type="tool",
        title=routed.tool_name,
        tool_name=routed.tool_name,
        tool_args=routed.tool_args,
    )
    if not then_respond:
        return (step,)
    answer = PlanStep(
        id="answer_2",
        type="respond",
        title="Answer",
        instruction="Answer the request from the observations.",
    )
    return (step, answer)


async def first_action(
    turn: TurnState,
    rest: Callable[[TurnState], AsyncIterator[AgentEvent]],
    otherwise: Callable[[], AsyncIterator[AgentEvent]],
    *,
    then_respond: bool,
) -> AsyncIterator[AgentEvent]:
    """A strategy's start: the router's first action when it decides one (then *rest*),
    else the strategy's own way (*otherwise*) — the router off or undecided."""
    routed = await choose(turn)
    if routed is None:
        events = otherwise()
    else:
        events = start_routed(turn, routed, rest, then_respond=then_respond)
    async for event in events:
        yield event


async def start_routed(
    turn: TurnState,
    routed: RoutedAction,
    rest: Callable[[TurnState], AsyncIterator[AgentEvent]],
    *,
    then_respond: bool,
) -> AsyncIterator[AgentEvent]:
    """Store the routed first step(s) as the plan, run the first, then *rest* (the strategy's
    own continuation) while the flow is still running. With *then_respond* a tool step is
    followed by an answer step (for strategies that execute a plan)."""
    steps = _first_steps(routed, then_respond)
    stored = turn.current.with_steps(steps, plan_id=f"route-{turn.message_id}")
    fields: Mapping[str, object] = {
        **{name: getattr(stored, name) for name in type(stored).model_fields},
        "goal": cut(turn.deps.text, 500),
    }
    state = recording.save(turn, ExecutionState.model_validate(fields))
    yield recording.plan_event(turn, state.goal, steps, False)
    async for event in run_step(turn, steps[0]):
        yield event
    if turn.current.status == "running":
        async for event in rest(turn):
            yield event
