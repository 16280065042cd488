"""BFCL items as ordinary agentkit scenarios: ``load_suite("bfcl:CATEGORY")``.

Each item becomes a :class:`BfclScenario` run by the evaluation harness like any scenario
(grids, ``--repeat``, budgets, concurrency, ``compare``, kept runs): the agent named (default
:data:`DEFAULT_AGENT`, a neutral planner agent without tools of its own) gets the item's
functions as its toolset (:mod:`agentkit.eval.bfcl.toolset`), the user turns are BFCL's (a
system message of the item goes before the user's text of its turn; earlier user/assistant
messages of the first turn are the conversation's history), and the run is scored by BFCL's
checker on the calls each turn made (:mod:`agentkit.eval.bfcl.scoring`), in the columns
:data:`COLUMNS`.

The memory set runs as a compression benchmark. A question's scenario replays its domain's
prerequisite conversation (BFCL's user messages) into the conversation, then, by
``memory_context``:

* ``compressed`` (the default): the last prerequisite message is sent as a turn, so that the
  memory upkeep after it compresses the window by the agent's ``compression`` settings (a grid
  axis: strategy, thresholds); then the agent is opened afresh and the question is asked as a
  new turn restored from history and TaskState (scenario C);
* ``whole``: the question is asked in the same session with the whole conversation in the
  window (no compression; the window is as long as the conversation);
* ``none``: the question alone, with no history.

The answer of the question's turn is scored by BFCL's string match; ``bfcl_prompt_tokens`` and
``bfcl_turn_ms`` are that turn's prompt tokens and latency.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, JsonValue

from agentkit.errors import UsageError
from agentkit.eval.bfcl._package import bfcl_module
from agentkit.eval.bfcl.catalog import (
    BfclItem,
    check_category,
    load_items,
    prerequisite,
    sample,
)
from agentkit.eval.bfcl.scoring import BfclScore, Call, score_answer, score_calls
from agentkit.eval.bfcl.toolset import TOOLSET, find_item, toolset_spec
from agentkit.eval.scenario import Expectations, Scenario, ScenarioMessage, Turn
from agentkit.eval.scorer import RunScorer, SourceColumns, SourceScore
from agentkit.eval.transcript import Transcript, UserTurn
from agentkit.events import ResultEvent

__all__ = [
    "COLUMNS",
    "DEFAULT_AGENT",
    "PREFIX",
    "BfclColumns",
    "BfclRef",
    "BfclScenario",
    "BfclScorer",
    "MemoryContext",
    "is_suite",
    "load_suite",
    "parse_suite",
    "scenario_for",
]

#: how a suite is named on the command line and in :func:`load_suite`
PREFIX = "bfcl:"
#: the agent BFCL items run on unless another is named
DEFAULT_AGENT = "bfcl-001"
#: the columns every BFCL row carries (beside the harness's own)
COLUMNS: tuple[str, ...] = ("bfcl_category", "bfcl_id", "bfcl_valid", "bfcl_error_type")
MemoryContext = Literal["compressed", "whole", "none"]
#: the ``bfcl_mode`` of agentkit's runs (the model-alone baseline's is ``prompt``)
MODE = "agentkit"
#: the whole-conversation baseline: no compression, a window as long as the conversation
_WHOLE: dict[str, JsonValue] = {
    "max_turns": 1000,
    "compression": {"max_messages": 100000, "token_threshold": 100000000},
}


class BfclRef(BaseModel):
    """Which BFCL item a scenario runs (and, for the memory set, with what context)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    item: str
    category: str
    memory_context: MemoryContext | None = None


class BfclColumns(SourceColumns):
    """A BFCL row's own columns (NA in the rows of other scenarios)."""

    bfcl_mode: str | None = None
    bfcl_category: str | None = None
    bfcl_id: str | None = None
    bfcl_valid: bool | None = None
    bfcl_error_type: str | None = None
    #: the memory set: which context the question had, its prompt tokens and latency
    bfcl_memory_context: str | None = None
    bfcl_prompt_tokens: int | None = None
    bfcl_turn_ms: float | None = None
    #: what BFCL's checker said when the run was not valid
    bfcl_error: str | None = None


@dataclass(frozen=True)
class BfclScorer(RunScorer):
    """BFCL's own checker scores the run from its transcript (the calls each turn added to
    the item toolset's record: the real arguments, which the events show masked)."""

    columns: ClassVar[type[SourceColumns]] = BfclColumns
    turn_state: ClassVar[bool] = True
    ref: BfclRef

    def score(self, transcript: Transcript) -> SourceScore:
        ref = self.ref
        base = BfclColumns(bfcl_mode=MODE, bfcl_category=ref.category, bfcl_id=ref.item)
        if not transcript.turns:  # never started, or stopped before its first turn
            return SourceScore(base.model_copy(update={"bfcl_valid": False, "bfcl_error_type": ""}))
        item = find_item(ref.item)
        try:
            score = _score(item, ref, transcript.turns)
        except Exception as error:  # a checker that crashed is a row, not a lost sweep
            score = BfclScore(False, "agentkit:checker_crashed", f"{type(error).__name__}: {error}")
        columns = base.model_copy(
            update={"bfcl_valid": score.valid, "bfcl_error_type": score.error_type}
        )
        if item.kind == "memory":
            result = _result(transcript.turns[-1])
            columns = columns.model_copy(
                update={
                    "bfcl_memory_context": ref.memory_context,
                    "bfcl_prompt_tokens": result.usage.input_tokens if result else None,
                    "bfcl_turn_ms": round(result.latency_ms, 3) if result else None,
                }
            )
        if not score.valid:
            columns = columns.model_copy(update={"bfcl_error": score.error})
        why = f"{score.error_type}: {score.error}" if not score.valid else ""
        return SourceScore(columns, passed=score.valid, kind="bfcl", detail=why[:500])


class BfclScenario(Scenario):
    """A scenario whose run BFCL's own checker scores (see the module docstring)."""

    bfcl: BfclRef


def _result(turn: UserTurn) -> ResultEvent | None:
    return next((e for e in reversed(turn.events) if isinstance(e, ResultEvent)), None)


def _score(item: BfclItem, ref: BfclRef, turns: Sequence[UserTurn]) -> BfclScore:
    if item.kind == "memory":
        asked = _result(turns[-1]) if len(turns) == _memory_turns(ref) else None
        return score_answer(item, asked.text if asked is not None else "")
    single = item.kind in {"relevance", "irrelevance", "ast"}
    chosen = turns[:1] if single else turns
    calls, seen = [], 0
    for turn in chosen:  # the calls each turn added to the item toolset's record
        made = _recorded(turn.after.state if turn.after is not None else {})
        calls.append([[call] for call in made[seen:]])
        seen = len(made)
    return score_calls(item, calls)


def _recorded(state: Mapping[str, JsonValue]) -> list[Call]:
    record = state.get(TOOLSET)
    made = record.get("calls") if isinstance(record, dict) else None
    calls = []
    for entry in made if isinstance(made, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("arguments"), dict):
            arguments = entry["arguments"]
            assert isinstance(arguments, dict)
            calls.append(Call(name=str(entry.get("name")), arguments=dict(arguments)))
    return calls


def _memory_turns(ref: BfclRef) -> int:
    return 2 if ref.memory_context == "compressed" else 1


def is_suite(name: str | object) -> bool:
    """True for a ``bfcl:…`` suite name."""
    return isinstance(name, str) and name.startswith(PREFIX)


def parse_suite(name: str) -> list[str]:
    """The categories ``bfcl:A,B`` names (each checked: an unknown one lists them all)."""
    if not is_suite(name):
        raise UsageError(f"not a BFCL suite: {name!r} (expected {PREFIX}CATEGORY)")
    categories = [part.strip() for part in name[len(PREFIX) :].split(",") if part.strip()]
    if not categories:
        raise UsageError(f"{name!r} names no category (expected {PREFIX}CATEGORY)")
    for category in categories:
        check_category(category)
    return categories


def load_suite(
    name: str | Iterable[str],
    *,
    limit: int | None = None,
    seed: int = 0,
    agent: str = DEFAULT_AGENT,
    memory_context: MemoryContext = "compressed",
) -> list[BfclScenario]:
    """The scenarios of ``bfcl:CATEGORY`` (several: ``bfcl:A,B`` or a list of names): each
    category whole, or *limit* of its items drawn with *seed*, run on *agent*."""
    names = [name] if isinstance(name, str) else list(name)
    categories = [category for each in names for category in parse_suite(each)]
    scenarios: list[BfclScenario] = []
    for category in dict.fromkeys(categories):
        for item in sample(load_items(category), limit, seed):
            scenarios.append(scenario_for(item, agent=agent, memory_context=memory_context))
    return scenarios


def scenario_for(
    item: BfclItem, *, agent: str = DEFAULT_AGENT, memory_context: MemoryContext = "compressed"
) -> BfclScenario:
    """The scenario that runs *item* on *agent*."""
    if item.kind == "memory":
        return _memory_scenario(item, agent, memory_context)
    history, first = _first_turn(item)
    turns = [Turn(user=first)]
    for number, messages in enumerate(item.turns[1:], 1):
        if number in item.held_back:  # BFCL adds the held-back functions: a fresh agent
            turns.append(Turn(user=_more_functions(), restart=True))
        else:
            turns.append(Turn(user=_text(messages)))
    config: dict[str, JsonValue] = {"toolsets": [toolset_spec(item)]}
    return BfclScenario(
        id=item.id,
        title=f"BFCL {item.category} {item.id}",
        language="en",
        agent=agent,
        tags=("bfcl", item.category),
        config=config,
        history=tuple(history),
        turns=tuple(turns),
        bfcl=(ref := BfclRef(item=item.id, category=item.category)),
        scorer=BfclScorer(ref),
    )


def _more_functions() -> str:
    """BFCL's own message for a turn that adds functions (its function-calling wording)."""
    return str(
        bfcl_module("constants.default_prompts").DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC
    )


def _text(messages: Sequence[object]) -> str:
    """A turn's messages as one user text: system messages first, then the user's."""
    from agentkit.eval.bfcl.catalog import Message

    parts = [m.content for m in messages if isinstance(m, Message) and m.role == "system"]
    parts += [m.content for m in messages if isinstance(m, Message) and m.role == "user"]
    text = "\n\n".join(part.strip() for part in parts if part.strip())
    return text or "(no message)"


def _first_turn(item: BfclItem) -> tuple[list[ScenarioMessage], str]:
    """The first turn's earlier user/assistant messages (history) and its text."""
    messages = list(item.turns[0]) if item.turns else []
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    history = [
        ScenarioMessage(role=m.role, content=m.content)
        for m in messages[:last_user]
        if m.role in ("user", "assistant") and m.content.strip()
    ]
    rest = [m for i, m in enumerate(messages) if i >= last_user or m.role == "system"]
    return history, _text(rest)


def _memory_scenario(item: BfclItem, agent: str, context: MemoryContext) -> BfclScenario:
    said = [text for entry in prerequisite(item.scenario) for text in entry if text.strip()]
    question = _text(item.turns[0]) if item.turns else ""
    config: dict[str, JsonValue] = {}
    turns: tuple[Turn, ...]
    if context == "compressed":
        history = [ScenarioMessage(role="user", content=text) for text in said[:-1]]
        restored = Expectations(session="C")  # the protocol itself, checked by the harness
        turns = (Turn(user=said[-1]), Turn(user=question, restart=True, expect=restored))
    elif context == "whole":
        history = [ScenarioMessage(role="user", content=text) for text in said]
        turns = (Turn(user=question),)
        config = dict(_WHOLE)
    else:
        history, turns = [], (Turn(user=question),)
    return BfclScenario(
        id=f"{item.id}--{context}" if context != "compressed" else item.id,
        title=f"BFCL memory {item.id} ({context})",
        language="en",
        agent=agent,
        tags=("bfcl", "memory", item.scenario),
        config=config,
        history=tuple(history),
        turns=turns,
        bfcl=(ref := BfclRef(item=item.id, category=item.category, memory_context=context)),
        scorer=BfclScorer(ref),
    )
