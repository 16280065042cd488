"""The tool-choice router: a new request's first action for small models, in a few tokens.

A 135M model cannot pick one of ten tools from a long planning prompt, and measured on the
first-tool tables' dev rows it cannot pick one of three by name either: its choice, generated
or ranked by likelihood, was right less often than the lexical ranking alone. So the ranking
leads and the model settles only what the ranking cannot. With ``"planner": {"tool_choice":
"router"}`` a strategy asks :func:`choose` for its first action instead of its own plan or
action call:

1. **candidates**: the agent's tools ranked for the request from what they say about
   themselves (:mod:`agentkit.planning.tool_ranking`); the best ``router_candidates`` with a
   match. No match at all is "no tool" (greetings, thanks, questions about the assistant),
   without a model call.
2. **reads stay reads**: a request that reads as a question (*which …?*, 哪些, 吗), or asks to
   see or find something without saying a change, never gets a side-effecting tool: those candidates
   are dropped, and with none left the answer is "no tool".
3. **the model's vote, on near-ties only**: candidates within ``_NEAR_TIE`` of the leader are
   put to the model. A backend that scores likelihoods (the embedded model) gives, for each,
   the log-probability of the request after the tool's description — which request would
   this tool be asked? — read in one batched pass, nothing generated; the vote adds
   ``_VOTE_WEIGHT`` times that to the candidate's share of the leader's score (weight and
   margin fitted on the dev rows only). Another backend writes a grammar-constrained choice
   among the tied names and ``none``, which wins the tie outright. A clear leader needs no
   model call.
4. **asking instead of guessing a write**: a side-effecting tool tied with a read, for a
   request that does not say a change, becomes a question for the user. Otherwise the chosen
   tool's arguments are filled by a ``route`` call under that tool's own schema (none for a
   tool without arguments); arguments that do not validate become a question.

Every decision is one ``route`` record in ``calls.jsonl`` whose ``route`` field holds the
candidates with their scores and votes, the model's choice and the decision
(:class:`RouteTrace`). When the model's vote fails, the ranking's order stands; when the
router is off, or the backend is not a chat model, :func:`choose` returns None and the
strategy asks its own model as it always did.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

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
from agentkit.planning.tool_ranking import (
    RankedTool,
    asks_for_change,
    rank_tools,
    reads_as_question,
    terms,
)
from agentkit.planning.trace import CallRecord
from agentkit.tools import mask_secrets

__all__ = [
    "NO_TOOL",
    "LikelihoodScorer",
    "RouteCandidate",
    "RouteTrace",
    "RoutedAction",
    "choose",
    "start_routed",
]

#: the choice that means "no tool: answer directly"
NO_TOOL = "none"
#: candidates whose score is within this factor of the leader's are put to the model's vote
_NEAR_TIE = 1.25
#: the likelihood vote's weight (per nat) against the candidate's share of the leader's score;
#: fitted on the dev rows: 0.05 to 0.5 all gave the same decisions there, 0 lost one
_VOTE_WEIGHT = 0.1
#: what the likelihood vote reads before the request: would this tool be asked this?
_VOTE_PROMPT = "Task: {description}\nUser request:"

Decision = Literal["tool", "none", "ask", "fallback"]


@runtime_checkable
class LikelihoodScorer(Protocol):
    """A backend that scores continuations instead of generating (the embedded model)."""

    async def score(self, pairs: Sequence[tuple[str, str]]) -> list[list[float]]: ...


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
    """The first action for ``turn``'s request, or None: the router is off (then the
    strategy asks its own model, as without the router)."""
    if not enabled(turn):
        return None
    deps = turn.deps
    ranked = rank_tools(deps.tools, deps.text)
    best = [item for item in ranked if item.score > 0][: deps.config.router_candidates]
    candidates = tuple(_candidate(turn, item) for item in best)
    if not candidates:
        _trace(turn, RouteTrace(decision="none", reason="no tool matches the request"))
        return RoutedAction(kind="none")
    if _reads(deps.text):
        reads = tuple(c for c in candidates if not c.side_effect)
        if not reads:
            reason = "a read or a question: only side-effecting tools match"
            _trace(turn, RouteTrace(candidates=candidates, decision="none", reason=reason))
            return RoutedAction(kind="none")
        candidates = reads
    tied = tuple(c for c in candidates if c.score * _NEAR_TIE >= candidates[0].score)
    trace = RouteTrace(candidates=candidates)
    chosen, choice = candidates[0], ""
    if len(tied) > 1:
        chosen, choice, trace = await _vote(turn, candidates, tied, trace)
    if choice == NO_TOOL:
        decided = RoutedAction(kind="none")
    elif chosen.side_effect and len(tied) > 1 and not choice:
        # the vote failed: unsure between near-ties, and a side-effecting tool is never guessed
        decided = RoutedAction(kind="ask", question=_which_question(turn, tied))
    elif chosen.side_effect and not asks_for_change(deps.text) and _read_among(tied):
        question = _which_question(turn, tied)
        decided = RoutedAction(kind="ask", question=question)
        trace = trace.model_copy(update={"reason": "a write tied with a read: no change said"})
    else:
        decided = RoutedAction(kind="tool", tool_name=chosen.name)
    trace = trace.model_copy(
        update={"choice": choice, "decision": decided.kind, "decided": decided.tool_name}
    )
    if len(tied) > 1:  # the vote's call waits in turn.pending_record
        pending = turn.pending_record
        _record(turn, pending.raw, {"tool": choice} if choice else None, trace, pending.error)
    else:
        _trace(turn, trace)
    if decided.kind != "tool":
        return decided
    return await _fill_arguments(turn, decided.tool_name)


def _reads(text: str) -> bool:
    """A question, or a request to see or find something that says no change."""
    found = terms(text)
    reading = "~list" in found or "~search" in found
    return reads_as_question(text) or (reading and not asks_for_change(text))


def _read_among(candidates: Sequence[RouteCandidate]) -> bool:
    return any(not candidate.side_effect for candidate in candidates)


def _candidate(turn: TurnState, item: RankedTool) -> RouteCandidate:
    tool = turn.deps.tools.get(item.name)
    return RouteCandidate(
        name=item.name, score=item.score, side_effect=tool.side_effect, matched=item.matched
    )


async def _vote(
    turn: TurnState,
    candidates: tuple[RouteCandidate, ...],
    tied: tuple[RouteCandidate, ...],
    trace: RouteTrace,
) -> tuple[RouteCandidate, str, RouteTrace]:
    """The model's vote among near-tied candidates: ``(chosen, the model's choice, trace)``.
    The call's record waits in ``turn.pending_record``; a failed call leaves the ranking's
    order and says why in the trace."""
    model = turn.deps.model
    if isinstance(model, LikelihoodScorer):
        votes, problem = await _likelihood(turn, model, tied)
        if problem:
            return tied[0], "", trace.model_copy(update={"reason": problem})
        top = candidates[0].score
        voted = tuple(
            c.model_copy(update={"vote": votes[c.name]}) if c.name in votes else c
            for c in candidates
        )
        pool = [c for c in voted if c.name in votes]
        chosen = max(pool, key=lambda c: c.score / top + _VOTE_WEIGHT * (c.vote or 0.0))
        return chosen, chosen.name, trace.model_copy(update={"candidates": voted})
    names = [candidate.name for candidate in tied]
    schema: JsonSchema = {
        "type": "object",
        "properties": {"tool": {"enum": [*names, NO_TOOL]}},
        "required": ["tool"],
        "additionalProperties": False,
    }
    sent = [ChatMessage(role="user", content=turn.scrub(_route_prompt(turn, tied)))]
    raw, problem = await _ask_model(turn, sent, schema)
    choice = ""
    if not problem:
        choice, problem = _read_choice(raw, names)
    if problem:
        turn.pending_record = turn.pending_record.model_copy(update={"raw": raw, "error": problem})
        return tied[0], "", trace.model_copy(update={"reason": problem})
    turn.pending_record = turn.pending_record.model_copy(update={"raw": raw})
    chosen = next((c for c in tied if c.name == choice), tied[0])
    return chosen, choice, trace


async def _likelihood(
    turn: TurnState, model: LikelihoodScorer, tied: tuple[RouteCandidate, ...]
) -> tuple[dict[str, float], str]:
    """Each tied candidate's vote: the log-probability of the request after its description."""
    tools = turn.deps.tools
    request = " " + " ".join(turn.deps.text.split())
    pairs = [
        (_VOTE_PROMPT.format(description=_one_line(tools.get(c.name).description)), request)
        for c in tied
    ]
    sent = [{"role": "user", "content": turn.scrub(prompt + text)} for prompt, text in pairs]
    turn.pending_record = CallRecord(purpose="route", messages=sent)
    started = time.perf_counter()
    problem = ""
    scores: list[list[float]] = []
    try:
        timeout = calls.timeout(turn, "route")
        scores = await calls.interruptible(turn, _within(model.score(pairs), timeout))
    except (ModelError, TimeoutError, RecursionError) as error:
        problem = calls.error_text(error)
    latency = round((time.perf_counter() - started) * 1000, 3)
    update: dict[str, object] = {"latency_ms": latency}
    if problem:
        update["error"] = problem
    turn.pending_record = turn.pending_record.model_copy(update=update)
    if problem:
        return {}, problem
    return {c.name: round(sum(s), 4) for c, s in zip(tied, scores, strict=True)}, ""


async def _within(awaitable: Awaitable[list[list[float]]], seconds: float) -> list[list[float]]:
    async with asyncio.timeout(seconds):
        return await awaitable


def _route_prompt(turn: TurnState, candidates: Sequence[RouteCandidate]) -> str:
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


def _which_question(turn: TurnState, candidates: Sequence[RouteCandidate]) -> str:
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
