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
3. **the model's vote, on near-ties only**: candidates within ``router_near_tie`` of the leader are
   put to the model. A backend that scores likelihoods (the embedded model) gives, for each,
   the log-probability of the request after the tool's description — which request would
   this tool be asked? — read in one batched pass, nothing generated; the vote adds
   ``router_vote_weight`` times that to the candidate's share of the leader's score (weight and
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

import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass

from pydantic import JsonValue

from agentkit import language
from agentkit.calls.tracer import ModelCall, error_text
from agentkit.errors import MissingExtraError, ModelError
from agentkit.events import AgentEvent
from agentkit.memory import PlanStep
from agentkit.models.base import ChatMessage, ChatModel, JsonSchema
from agentkit.planning.follow_ups import router_on
from agentkit.planning.graph import Stage, Turn
from agentkit.planning.intents import is_small_talk
from agentkit.planning.plan import PlanFormatError, extract_json
from agentkit.planning.prompts import render_prompt
from agentkit.planning.routes import (
    RouteCandidate,
    RoutedAction,
    RouteTrace,
    ask_model,
    fill_arguments,
    language_of,
    one_line,
    record_route,
)
from agentkit.planning.steps import plan_event, run_step, store_plan
from agentkit.planning.tool_ranking import (
    RankedTool,
    asks_for_change,
    asks_to_read,
    rank_tools,
)
from agentkit.planning.tool_semantics import SemanticSignal, semantic_signal, wordllama_embedder

__all__ = [
    "NO_TOOL",
    "RouteCandidate",
    "RouteTrace",
    "RoutedAction",
    "choose",
    "FirstAction",
]

#: the choice that means "no tool: answer directly"
NO_TOOL = "none"
#: what the likelihood vote reads before the request: would this tool be asked this?
_VOTE_PROMPT = "Task: {description}\nUser request:"
#: what the settling vote reads for "none": would this request want no tool at all?
_NONE_TASK = (
    "Reply to the user in words; no tool is needed (a greeting, thanks, small talk, or a "
    "question about the assistant)."
)


log = logging.getLogger("agentkit.planning")
#: the missing ``router`` extra has been logged (once per process; every turn's record says it)
_WARNED: list[bool] = []


async def choose(turn: Turn) -> RoutedAction | None:  # noqa: PLR0911 - one per decision
    """The first action for ``turn``'s request, or None: the router is off (then the
    strategy asks its own model, as without the router)."""
    if not router_on(turn):
        return None
    ctx = turn.ctx
    signals = ctx.config.router_signals
    text = ctx.text
    ranked = rank_tools(turn.tools, text) if "lexical" in signals else []
    top = max((item.score for item in ranked), default=0.0)
    config = ctx.config
    small = is_small_talk(text)
    if small and top < config.router_weak_score:
        return _no_tool(
            turn, (), "small talk: a greeting, thanks or a question about the assistant"
        )
    pool: Sequence[RouteCandidate] = _pool(turn, ranked)
    reads = asks_to_read(text)
    if reads:
        pool = [c for c in pool if not c.side_effect]
    candidates = tuple(c for c in pool if c.score > 0)[: ctx.config.router_candidates]
    weak = not candidates or candidates[0].score < config.router_weak_score  # best-first
    floors = _floors(turn) if "semantic" in signals else None
    signal = await _semantic(turn) if floors is not None else None
    if signal is not None:
        pool, candidates = _with_signal(pool, signal), _with_signal(candidates, signal)
    if weak and "settle" in signals and not small and pool:
        # meaning decides which tools the model is shown: computed only when it settles
        if floors is None and "semantic" in signals:
            signal = await _semantic(turn)
            pool = _with_signal(pool, signal) if signal is not None else pool
        refused = _below_settle_floor(signal, floors)
        if refused:
            return _no_tool(turn, tuple(pool[:3]), refused)
        return await _settle(turn, _settle_pool(pool, config.router_settle_pool))
    candidates, refused = _close_enough(candidates, floors)
    if refused:
        return _no_tool(turn, candidates, refused)
    if not candidates:
        reason = (
            "a read or a question: only side-effecting tools match"
            if reads and ranked and top > 0
            else "no tool matches the request"
        )
        return _no_tool(turn, (), reason)
    near = config.router_near_tie
    tied = tuple(c for c in candidates if c.score * near >= candidates[0].score)
    trace = RouteTrace(candidates=candidates)
    if len(tied) == 1:
        decided, trace = _decide(turn, candidates[0], "", tied, trace)
        record_route(turn, trace)
    else:
        model = ctx.model
        scorer = model if isinstance(model, ChatModel) and model.scores else None
        sent, schema, operation = _vote_request(turn, tied, scorer)
        trace = trace.model_copy(update={"vote_kind": "tie"})
        async with turn.tracer.call("route", sent, schema, operation=operation) as call:
            chosen, choice, trace, raw, problem = await _vote(
                turn, call, scorer=scorer, candidates=candidates, tied=tied, trace=trace
            )
            decided, trace = _decide(turn, chosen, choice, tied, trace)
            parsed: JsonValue = {"tool": choice} if choice else None
            call.read(raw=raw, parsed=parsed, route=trace.model_dump(mode="json"), error=problem)
    if decided.kind != "tool":
        return decided
    return await fill_arguments(turn, decided.tool_name)


def _floors(turn: Turn) -> tuple[float | None, float | None] | None:
    """``(router_min_similarity, router_settle_similarity)`` where either is set and the
    embedder is ``wordllama`` (whose raw cosines mean something), else None."""
    config = turn.ctx.config
    floors = (config.router_min_similarity, config.router_settle_similarity)
    if config.router_embedder != "wordllama" or floors == (None, None):
        return None
    return floors


def _below_settle_floor(
    signal: SemanticSignal | None, floors: tuple[float | None, float | None] | None
) -> str:
    """Why a request the words do not settle is "no tool" by meaning, or ``""``."""
    floor = floors[1] if floors is not None else None
    if signal is None or floor is None:
        return ""
    best = max(signal.similarities.values(), default=-1.0)
    if best >= floor:
        return ""
    return (
        f"no tool is close in meaning: best similarity {best:.2f} is below "
        f"router_settle_similarity {floor}"
    )


def _close_enough(
    candidates: tuple[RouteCandidate, ...], floors: tuple[float | None, float | None] | None
) -> tuple[tuple[RouteCandidate, ...], str]:
    """The lexical candidates at least ``router_min_similarity`` close in meaning, and why
    none is (``""`` when some are, or there is no floor)."""
    floor = floors[0] if floors is not None else None
    if floor is None or not candidates or any(c.similarity is None for c in candidates):
        return candidates, ""
    close = tuple(c for c in candidates if (c.similarity or -1.0) >= floor)
    if close:
        return close, ""
    return candidates, (
        "the words match, the meaning does not: every candidate's similarity is below "
        f"router_min_similarity {floor}"
    )


def _no_tool(turn: Turn, candidates: tuple[RouteCandidate, ...], reason: str) -> RoutedAction:
    record_route(turn, RouteTrace(candidates=candidates, decision="none", reason=reason))
    return RoutedAction(kind="none")


def _with_signal(
    candidates: Sequence[RouteCandidate], signal: SemanticSignal
) -> tuple[RouteCandidate, ...]:
    return tuple(
        c.model_copy(
            update={
                "semantic": signal.scores.get(c.name),
                "similarity": signal.similarities.get(c.name),
            }
        )
        for c in candidates
    )


async def _semantic(turn: Turn) -> SemanticSignal | None:
    """Per tool, the semantic signal (None: the backend has no embeddings, or they failed;
    the ranking then goes by words alone). The request's embedding is one traced call."""
    ctx = turn.ctx
    model = ctx.model
    embeds = isinstance(model, ChatModel) and model.embeds
    if ctx.config.router_embedder == "wordllama":  # a table lookup, no model call
        try:
            embedder = wordllama_embedder()
        except MissingExtraError as error:  # the router extra is not installed: say so
            _without_wordllama(turn, error, embeds=embeds)
        else:
            signal = await semantic_signal(embedder, turn.tools, ctx.text, embedder.embed)
            record_route(turn, RouteTrace(stage="semantic", reason="semantic signal (wordllama)"))
            return signal
    if not embeds:
        return None
    sent = [{"role": "user", "content": ctx.scrub(ctx.text)}]
    async with turn.tracer.call("route", sent, None, operation="embeddings") as call:
        try:
            signal = await semantic_signal(model, turn.tools, ctx.text, call.embed)
        except (ModelError, TimeoutError, RecursionError, ValueError) as error:
            problem = error_text(error)
            trace = RouteTrace(stage="semantic", reason=f"no semantic signal: {problem}")
            call.read(raw="", route=trace.model_dump(mode="json"), error=problem)
            return None
        shown: JsonValue = {name: value for name, value in signal.scores.items()}
        call.read(
            raw="",
            parsed=shown,
            route=RouteTrace(stage="semantic", reason="semantic signal").model_dump(mode="json"),
        )
    return signal


def _without_wordllama(turn: Turn, error: MissingExtraError, *, embeds: bool) -> None:
    """``router_embedder: "wordllama"`` without the ``router`` extra: the turn goes on as with
    the ``model`` embedder (the model's own embeddings, or none), and says so in its
    ``route`` record and, once per process, in the log."""
    instead = "the model's own embeddings instead" if embeds else "no semantic signal"
    record_route(turn, RouteTrace(stage="semantic", reason=f"{error}; {instead}"))
    if not _WARNED:
        _WARNED.append(True)
        log.warning("%s; the router goes on with %s", error, instead.removesuffix(" instead"))


def _pool(turn: Turn, ranked: Sequence[RankedTool]) -> list[RouteCandidate]:
    """Every tool as a candidate, best lexical match first (the ranking's order; ties keep
    the registry's)."""
    tools = turn.tools
    lexical = {item.name: item for item in ranked}
    pooled: list[tuple[float, int, RouteCandidate]] = []
    for order, name in enumerate(tools.names()):
        item = lexical.get(name)
        candidate = RouteCandidate(
            name=name,
            score=item.score if item is not None else 0.0,
            side_effect=tools.get(name).side_effect,
            matched=item.matched if item is not None else (),
        )
        pooled.append((-candidate.score, order, candidate))
    pooled.sort(key=lambda entry: entry[:2])
    return [entry[2] for entry in pooled]


def _settle_pool(pool: Sequence[RouteCandidate], size: int) -> tuple[RouteCandidate, ...]:
    """The tools the model settles among: the best *size* (``router_settle_pool``) by
    meaning (standard deviations above the toolset's mean similarity) plus words; every tool
    when there is no semantic signal."""
    values = {c.name: c.semantic for c in pool if c.semantic is not None}
    if len(values) < len(pool):
        return tuple(pool)
    spread = _standardised({name: float(value) for name, value in values.items()})
    best = sorted(pool, key=lambda c: -(spread[c.name] + c.score))
    return tuple(best[:size])


def _standardised(values: Mapping[str, float]) -> dict[str, float]:
    """Each value's distance from the mean in standard deviations."""
    if len(values) < 2:
        return {name: 0.0 for name in values}
    mean = sum(values.values()) / len(values)
    spread = (sum((v - mean) ** 2 for v in values.values()) / len(values)) ** 0.5 or 1.0
    return {name: (value - mean) / spread for name, value in values.items()}


async def _settle(turn: Turn, offered: tuple[RouteCandidate, ...]) -> RoutedAction | None:
    """No candidate, or only weak ones, for a request that is not small talk: the model
    chooses among *offered* (the best tools by meaning and words; reads only, for a read)
    and "none". The embedded model by likelihood (which task would be asked this?), another
    backend by a grammar-constrained choice. A failed vote is "no tool"."""
    ctx = turn.ctx
    model = ctx.model
    scorer = model if isinstance(model, ChatModel) and model.scores else None
    pool = offered
    trace = RouteTrace(candidates=pool, vote_kind="settle")
    if scorer is not None:
        pairs = [
            *_settle_pairs(turn, pool),
            (_VOTE_PROMPT.format(description=_NONE_TASK), _request(turn)),
        ]
        sent: list[ChatMessage] | list[dict[str, str]] = [
            {"role": "user", "content": ctx.scrub(prompt + text)} for prompt, text in pairs
        ]
        schema: JsonSchema | None = None
        operation = "text_completion"
    else:
        sent = [ChatMessage(role="user", content=ctx.scrub(_route_prompt(turn, pool)))]
        schema = {
            "type": "object",
            "properties": {"tool": {"enum": [*(c.name for c in pool), NO_TOOL]}},
            "required": ["tool"],
            "additionalProperties": False,
        }
        operation = "chat"
    async with turn.tracer.call("route", sent, schema, operation=operation) as call:
        raw, problem, choice = "", "", ""
        if scorer is not None:
            try:
                scores = await call.score(pairs)
            except (ModelError, TimeoutError, RecursionError) as error:
                problem = error_text(error)
            else:
                votes = [round(sum(s), 4) for s in scores]
                pool = tuple(
                    c.model_copy(update={"vote": v}) for c, v in zip(pool, votes, strict=False)
                )
                none_vote = votes[-1]
                best = max(pool, key=lambda c: c.vote or 0.0)
                choice = best.name if (best.vote or 0.0) > none_vote else NO_TOOL
                trace = trace.model_copy(update={"candidates": pool, "none_vote": none_vote})
        else:
            raw, problem = await ask_model(call)
            if not problem:
                choice, problem = _read_choice(raw, [c.name for c in pool])
        if problem or choice in ("", NO_TOOL):
            reason = problem or "settled by the model: no tool"
            trace = trace.model_copy(
                update={"choice": choice, "decision": "none", "reason": reason}
            )
            call.read(
                raw=raw,
                parsed={"tool": choice} if choice else None,
                route=trace.model_dump(mode="json"),
                error=problem,
            )
            return RoutedAction(kind="none")
        decided = RoutedAction(kind="tool", tool_name=choice)  # a read was offered only reads
        trace = trace.model_copy(update={
            "choice": choice, "decision": decided.kind, "decided": decided.tool_name,
            "reason": "settled by the model: no or only weak lexical candidates",
        })  # fmt: skip
        call.read(raw=raw, parsed={"tool": choice}, route=trace.model_dump(mode="json"))
    if decided.kind != "tool":
        return decided
    return await fill_arguments(turn, decided.tool_name)


def _request(turn: Turn) -> str:
    return " " + " ".join(turn.ctx.text.split())


def _settle_pairs(turn: Turn, pool: Sequence[RouteCandidate]) -> list[tuple[str, str]]:
    """Per tool, its task (description and up to three examples) and the request."""
    tools = turn.tools
    pairs = []
    for candidate in pool:
        tool = tools.get(candidate.name)
        examples = " ".join(f'"{one_line(e, 80)}"' for e in tool.examples[:3])
        task = one_line(tool.description) + (f" For example: {examples}." if examples else "")
        pairs.append((_VOTE_PROMPT.format(description=task), _request(turn)))
    return pairs


def _decide(
    turn: Turn,
    chosen: RouteCandidate,
    choice: str,
    tied: tuple[RouteCandidate, ...],
    trace: RouteTrace,
) -> tuple[RoutedAction, RouteTrace]:
    """The first action from the chosen candidate and the model's choice (if it voted)."""
    text = turn.ctx.text
    if choice == NO_TOOL:
        decided = RoutedAction(kind="none")
    elif chosen.side_effect and len(tied) > 1 and not choice:
        # the vote failed: unsure between near-ties, and a side-effecting tool is never guessed
        decided = RoutedAction(kind="ask", question=_which_question(turn, tied))
    elif chosen.side_effect and not asks_for_change(text) and _read_among(tied):
        question = _which_question(turn, tied)
        decided = RoutedAction(kind="ask", question=question)
        trace = trace.model_copy(update={"reason": "a write tied with a read: no change said"})
    else:
        decided = RoutedAction(kind="tool", tool_name=chosen.name)
    trace = trace.model_copy(
        update={"choice": choice, "decision": decided.kind, "decided": decided.tool_name}
    )
    return decided, trace


def _read_among(candidates: Sequence[RouteCandidate]) -> bool:
    return any(not candidate.side_effect for candidate in candidates)


def _candidate(turn: Turn, item: RankedTool) -> RouteCandidate:
    tool = turn.tools.get(item.name)
    return RouteCandidate(
        name=item.name, score=item.score, side_effect=tool.side_effect, matched=item.matched
    )


def _vote_request(
    turn: Turn, tied: tuple[RouteCandidate, ...], scorer: ChatModel | None
) -> tuple[list[ChatMessage] | list[dict[str, str]], JsonSchema | None, str]:
    """What the vote sends: the scored texts (a scoring backend), or the route prompt under
    a schema choosing among the tied names and ``none``; and the call's operation."""
    ctx = turn.ctx
    if scorer is not None:
        sent = [
            {"role": "user", "content": ctx.scrub(prompt + text)}
            for prompt, text in _vote_pairs(turn, tied)
        ]
        return sent, None, "text_completion"
    names = [candidate.name for candidate in tied]
    schema: JsonSchema = {
        "type": "object",
        "properties": {"tool": {"enum": [*names, NO_TOOL]}},
        "required": ["tool"],
        "additionalProperties": False,
    }
    return [ChatMessage(role="user", content=ctx.scrub(_route_prompt(turn, tied)))], schema, "chat"


def _vote_pairs(turn: Turn, tied: tuple[RouteCandidate, ...]) -> list[tuple[str, str]]:
    tools = turn.tools
    request = " " + " ".join(turn.ctx.text.split())
    return [
        (_VOTE_PROMPT.format(description=one_line(tools.get(c.name).description)), request)
        for c in tied
    ]


async def _vote(
    turn: Turn,
    call: ModelCall,
    *,
    scorer: ChatModel | None,
    candidates: tuple[RouteCandidate, ...],
    tied: tuple[RouteCandidate, ...],
    trace: RouteTrace,
) -> tuple[RouteCandidate, str, RouteTrace, str, str]:
    """The model's vote among near-tied candidates: ``(chosen, the model's choice, trace, raw
    reply, problem)``. A failed call leaves the ranking's order and says why in the trace."""
    if scorer is not None:
        try:
            scores = await call.score(_vote_pairs(turn, tied))
        except (ModelError, TimeoutError, RecursionError) as error:
            problem = error_text(error)
            return tied[0], "", trace.model_copy(update={"reason": problem}), "", problem
        votes = {c.name: round(sum(s), 4) for c, s in zip(tied, scores, strict=True)}
        top = candidates[0].score
        voted = tuple(
            c.model_copy(update={"vote": votes[c.name]}) if c.name in votes else c
            for c in candidates
        )
        pool = [c for c in voted if c.name in votes]
        weight = turn.ctx.config.router_vote_weight
        chosen = max(pool, key=lambda c: c.score / top + weight * (c.vote or 0.0))
        return chosen, chosen.name, trace.model_copy(update={"candidates": voted}), "", ""
    names = [candidate.name for candidate in tied]
    raw, problem = await ask_model(call)
    choice = ""
    if not problem:
        choice, problem = _read_choice(raw, names)
    if problem:
        return tied[0], "", trace.model_copy(update={"reason": problem}), raw, problem
    chosen = next((c for c in tied if c.name == choice), tied[0])
    return chosen, choice, trace, raw, ""


def _route_prompt(turn: Turn, candidates: Sequence[RouteCandidate]) -> str:
    tools = turn.tools
    lines = []
    for candidate in candidates:
        tool = tools.get(candidate.name)
        example = f' (e.g. "{tool.examples[0]}")' if tool.examples else ""
        lines.append(f"- {candidate.name}: {one_line(tool.description)}{example}")
    return render_prompt(
        "route", turn.ctx.agent_dir, candidates="\n".join(lines), request=turn.ctx.text
    )


def _read_choice(raw: str, names: list[str]) -> tuple[str, str]:
    try:
        value = extract_json(raw)
    except PlanFormatError as error:
        return "", error.problem
    choice = value.get("tool") if isinstance(value, dict) else None
    if choice == NO_TOOL or choice in names:
        return str(choice), ""
    return "", f"the choice must be one of {[*names, NO_TOOL]}, not {choice!r}"


def _which_question(turn: Turn, candidates: Sequence[RouteCandidate]) -> str:
    tools = turn.tools
    options = "\n".join(
        f"- {one_line(tools.get(c.name).description, 100)} ({c.name})" for c in candidates
    )
    return language.which_tool(options, language_of(turn), turn.ctx.agent_dir)


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


@dataclass(frozen=True, slots=True)
class FirstAction(Stage):
    """A strategy's start: the router's first action when it decides one (stored as the
    plan, then run; the strategy's own continuation follows the step), else *otherwise* —
    the router off or undecided. With *then_respond* a tool step is followed by an answer
    step (for strategies that execute a plan)."""

    otherwise: Stage
    then_respond: bool

    async def run(self, turn: Turn) -> AsyncIterator[AgentEvent | Stage]:
        routed = await choose(turn)
        if routed is None:
            yield self.otherwise
            return
        steps = _first_steps(routed, self.then_respond)
        state = store_plan(turn, "", steps, f"route-{turn.ctx.message_id}")
        yield plan_event(turn, state.goal, steps, False)
        yield run_step(steps[0])
