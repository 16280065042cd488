"""Compression strategies: how a dialogue is folded into TaskState (``compression.strategy``).

* ``model`` — the model's structured summary (the seed's way): every field is the model's;
* ``extractive`` — no model call: the facts the user stated, picked by rule
  (:mod:`agentkit.memory.extractive`), merged into the facts TaskState holds, bounded by
  ``compression.max_facts`` and ``compression.fact_tokens``; the goal from the latest user
  request that states one (else the current goal); flow, open loops and decision unchanged;
* ``hybrid`` — the model writes goal, flow, open loops and decision; the facts are the
  extractive ones plus the model's that are grounded in the window (bounded as above). When
  the model fails, hybrid keeps the extractive part and says so (``warning``).

Every model-written important fact is checked against the window it was written from
(:mod:`agentkit.memory.grounding`; for compression the whole window that was cut — the part
summarised and the part kept —, for the update the latest messages): an ungrounded one is
dropped and counted (``facts_ungrounded``). The same functions serve compression
(``archive``: the older part of the window) and the incremental update after a turn
(``update``: the latest messages).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from agentkit.config import CompressionConfig, CompressionStrategy
from agentkit.errors import ModelError
from agentkit.memory.extractive import ExtractedFact, extract_facts, latest_goal, select_facts
from agentkit.memory.grounding import ground_facts
from agentkit.memory.task_state import TaskState, TaskStateSummary
from agentkit.memory.tokens import TokenEstimator, message_text
from agentkit.types import Message, utc_now

__all__ = ["STRATEGIES", "Ask", "Folded", "fold", "grounding_source"]

#: the strategy names, in the order the lab and the bench show them
STRATEGIES: tuple[CompressionStrategy, ...] = ("model", "extractive", "hybrid")

#: asks the model for a summary of *messages* over *state* (the caller builds and traces the
#: request); the validated summary, or the model's failure
Ask = Callable[[Sequence[Message], TaskState], Awaitable[TaskStateSummary | ModelError]]


@dataclass(frozen=True, slots=True)
class Folded:
    """What a strategy made of the dialogue.

    ``error``: the model failed and nothing changed (``task_state`` is the one given);
    ``warning``: the model failed but the strategy still produced a state (hybrid, from its
    extractive part). ``ungrounded``: the model-written facts dropped by grounding."""

    task_state: TaskState
    strategy: CompressionStrategy
    ungrounded: tuple[str, ...] = ()
    error: ModelError | None = None
    warning: str = ""
    model_called: bool = False

    @property
    def facts_ungrounded(self) -> int:
        return len(self.ungrounded)


def grounding_source(messages: Sequence[Message], state: TaskState) -> str:
    """What a model-written fact must be found in: the summarised messages (every role) and
    the starting TaskState's own text."""
    parts = [message_text(message) for message in messages]
    parts.extend((state.current_goal, state.active_flow, *state.open_loops))
    parts.extend((*state.important_facts, *state.pinned_facts))
    return "\n".join(part for part in parts if part)


def _existing(state: TaskState) -> list[ExtractedFact]:
    sources = {source.fact.casefold(): source.message_ids for source in state.fact_sources}
    return [ExtractedFact(fact, sources.get(fact.casefold(), ())) for fact in state.important_facts]


def _with_facts(state: TaskState, facts: Sequence[ExtractedFact], **update: object) -> TaskState:
    moment = utc_now()
    return state.model_copy(
        update={
            "important_facts": tuple(fact.text for fact in facts),
            "fact_sources": tuple(fact.source() for fact in facts if fact.message_ids),
            "updated_at": moment,
            **update,
        }
    ).normalize(now=moment)


async def fold(
    strategy: CompressionStrategy,
    messages: Sequence[Message],
    state: TaskState,
    *,
    config: CompressionConfig,
    estimate: TokenEstimator,
    ask: Ask,
    scrub: Callable[[str], str] | None = None,
    ground_in: Sequence[Message] | None = None,
) -> Folded:
    """Fold *messages* into *state* with *strategy* (see the module docstring). Never raises
    for a model failure: it is in the result. *ground_in*: the messages a model-written fact
    must be found in (default *messages*; compression passes the whole window it cut)."""
    if strategy == "extractive":
        return Folded(_extractive(messages, state, config, estimate, scrub), "extractive")
    summary = await ask(messages, state)
    if isinstance(summary, ModelError):
        if strategy == "hybrid":
            fallback = _extractive(messages, state, config, estimate, scrub)
            return Folded(fallback, "hybrid", warning=str(summary), model_called=True)
        return Folded(state, strategy, error=summary, model_called=True)
    source = grounding_source(messages if ground_in is None else ground_in, state)
    grounding = ground_facts(summary.important_facts, source, state.important_facts)
    if strategy == "model":
        grounded = summary.model_copy(update={"important_facts": grounding.kept})
        return Folded(state.apply_summary(grounded), "model", grounding.dropped, model_called=True)
    written = state.apply_summary(summary.model_copy(update={"important_facts": ()}))
    extracted = extract_facts(messages, scrub=scrub)
    model_facts = [ExtractedFact(fact) for fact in grounding.kept]
    facts = select_facts(
        _existing(state),
        [*extracted, *model_facts],
        max_facts=config.max_facts,
        max_tokens=config.fact_tokens,
        estimate=estimate,
    )
    goal = written.current_goal or latest_goal(messages, scrub=scrub) or state.current_goal
    hybrid = _with_facts(written, facts, current_goal=goal)
    return Folded(hybrid, "hybrid", grounding.dropped, model_called=True)


def _extractive(
    messages: Sequence[Message],
    state: TaskState,
    config: CompressionConfig,
    estimate: TokenEstimator,
    scrub: Callable[[str], str] | None,
) -> TaskState:
    facts = select_facts(
        _existing(state),
        extract_facts(messages, scrub=scrub),
        max_facts=config.max_facts,
        max_tokens=config.fact_tokens,
        estimate=estimate,
    )
    goal = latest_goal(messages, scrub=scrub) or state.current_goal
    return _with_facts(state, facts, current_goal=goal)
