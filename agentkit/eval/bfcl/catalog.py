"""BFCL's categories and items, read from the pinned ``bfcl-eval`` package.

An item is read with BFCL's own loader (``load_dataset_entry``: the language hints it adds to
function descriptions, the multi-turn function documents, the functions a ``miss_func`` item
holds back) and its gold answer with ``load_ground_truth_entry``, then kept as a typed
:class:`BfclItem`. Nothing here knows an item by name: a category is a name BFCL's own
category table lists, and a sample is a seeded draw (:func:`sample`), the same on every
machine for the same limit and seed.

Categories that need the network (``web_search_*``) are not offered; ``format_sensitivity``
does not score. ``memory`` is BFCL V4's memory set, run as a compression benchmark (its
questions asked after the prerequisite conversation of their domain, see
:mod:`agentkit.eval.bfcl.suite`), not through BFCL's memory backends.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

from pydantic import JsonValue

from agentkit.errors import UsageError
from agentkit.eval.bfcl._package import bfcl_module

__all__ = [
    "CATEGORIES",
    "BfclItem",
    "ItemKind",
    "Message",
    "category_kind",
    "check_category",
    "load_items",
    "sample",
]

ItemKind = Literal["ast", "irrelevance", "relevance", "multi_turn", "memory"]

_AST = (
    "simple_python",
    "simple_java",
    "simple_javascript",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
)
_MULTI_TURN = (
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
    "multi_turn_long_context",
)
#: every category agentkit runs offline, in BFCL's order
CATEGORIES: tuple[str, ...] = (
    *_AST,
    "irrelevance",
    "live_irrelevance",
    "live_relevance",
    *_MULTI_TURN,
    "memory",
)


def category_kind(category: str) -> ItemKind:
    """How items of *category* are run and scored."""
    check_category(category)
    if category in _MULTI_TURN:
        return "multi_turn"
    if category == "memory":
        return "memory"
    if category.endswith("irrelevance"):
        return "irrelevance"
    if category.endswith("relevance"):
        return "relevance"
    return "ast"


def check_category(category: str) -> None:
    """A :class:`UsageError` listing the categories, unless *category* is one."""
    if category not in CATEGORIES:
        raise UsageError(
            f"unknown BFCL category {category!r}; the categories are: {', '.join(CATEGORIES)}"
        )


@dataclass(frozen=True)
class Message:
    """One message of an item's question, as BFCL writes it."""

    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True)
class BfclItem:
    """One BFCL test entry with its gold answer.

    ``turns`` are the user turns (one for single-turn items; an empty turn is a ``miss_func``
    turn where BFCL adds the held-back functions). ``functions`` are BFCL's function documents
    as the loader gives them; ``ground_truth`` its possible answers (AST categories), the
    expected calls per turn (multi-turn) or the accepted answers (memory). ``held_back``: by
    turn index, the function documents a ``miss_func`` item adds at that turn.
    """

    id: str
    category: str
    kind: ItemKind
    turns: tuple[tuple[Message, ...], ...]
    functions: tuple[dict[str, Any], ...]
    ground_truth: JsonValue
    #: the function documents as BFCL's checker reads them (without the language hints)
    checker_functions: tuple[dict[str, Any], ...] = ()
    initial_config: dict[str, Any] = field(default_factory=dict)
    involved_classes: tuple[str, ...] = ()
    held_back: dict[int, tuple[dict[str, Any], ...]] = field(default_factory=dict)
    #: memory items: the domain whose prerequisite conversation comes first
    scenario: str = ""

    @property
    def language(self) -> Literal["python", "java", "javascript"]:
        if self.category.endswith("java"):
            return "java"
        if self.category.endswith("javascript"):
            return "javascript"
        return "python"

    def entry(self) -> dict[str, Any]:
        """The item as BFCL's checkers take it (a fresh copy: they may change it)."""
        entry: dict[str, Any] = {
            "id": self.id,
            "question": [[{"role": m.role, "content": m.content} for m in t] for t in self.turns],
            "function": copy.deepcopy(list(self.checker_functions or self.functions)),
        }
        if self.kind == "multi_turn":
            entry["initial_config"] = copy.deepcopy(self.initial_config)
            entry["involved_classes"] = list(self.involved_classes)
        return entry


def _messages(turn: Sequence[dict[str, Any]]) -> tuple[Message, ...]:
    return tuple(Message(role=m["role"], content=str(m["content"])) for m in turn)


@cache
def load_items(category: str) -> tuple[BfclItem, ...]:
    """Every item of *category*, in BFCL's order (read once per process)."""
    kind = category_kind(category)
    utils = bfcl_module("utils")
    if kind == "memory":
        return _memory_items(utils)
    entries = utils.load_dataset_entry(
        category, include_prereq=False, include_language_specific_hint=True
    )
    plain = {
        entry["id"]: entry.get("function") or ()
        for entry in utils.load_dataset_entry(
            category, include_prereq=False, include_language_specific_hint=False
        )
    }
    answers: dict[str, Any] = {}
    if kind in ("ast", "multi_turn"):
        answers = {a["id"]: a["ground_truth"] for a in utils.load_ground_truth_entry(category)}
    items = []
    for entry in entries:
        held = {
            int(index): tuple(docs) for index, docs in (entry.get("missed_function") or {}).items()
        }
        items.append(
            BfclItem(
                id=entry["id"],
                category=category,
                kind=kind,
                turns=tuple(_messages(turn) for turn in entry["question"]),
                functions=tuple(entry.get("function") or ()),
                ground_truth=answers.get(entry["id"]),
                checker_functions=tuple(plain[entry["id"]]),
                initial_config=entry.get("initial_config") or {},
                involved_classes=tuple(entry.get("involved_classes") or ()),
                held_back=held,
            )
        )
    return tuple(items)


def _memory_items(utils: Any) -> tuple[BfclItem, ...]:  # noqa: ANN401 - bfcl_eval.utils
    """BFCL V4's memory questions (their raw entries, before BFCL binds them to a backend)."""
    config = bfcl_module("constants.eval_config")
    prefix = bfcl_module("constants.category_mapping").VERSION_PREFIX
    entries = utils.load_file(config.PROMPT_PATH / f"{prefix}_memory.json")
    answers = {
        a["id"]: a["ground_truth"]
        for a in utils.load_file(config.POSSIBLE_ANSWER_PATH / f"{prefix}_memory.json")
    }
    return tuple(
        BfclItem(
            id=entry["id"],
            category="memory",
            kind="memory",
            turns=tuple(_messages(turn) for turn in entry["question"]),
            functions=(),
            ground_truth=answers[entry["id"]],
            scenario=entry["scenario"],
        )
        for entry in entries
    )


@cache
def prerequisite(scenario: str) -> tuple[tuple[str, ...], ...]:
    """A memory domain's prerequisite conversation: its entries, each a run of user
    messages, in BFCL's order."""
    utils = bfcl_module("utils")
    config = bfcl_module("constants.eval_config")
    names = bfcl_module("constants.category_mapping").MEMORY_SCENARIO_NAME
    if scenario not in names:
        raise UsageError(f"unknown memory domain {scenario!r} (BFCL's: {', '.join(names)})")
    entries = utils.load_file(config.MEMORY_PREREQ_CONVERSATION_PATH / f"memory_{scenario}.json")
    return tuple(
        tuple(str(m["content"]) for turn in entry["question"] for m in turn if m["role"] == "user")
        for entry in entries
    )


def sample(items: Sequence[BfclItem], limit: int | None, seed: int) -> list[BfclItem]:
    """*limit* of *items* drawn with *seed* (in their catalogue order), or all of them."""
    if limit is None or limit >= len(items):
        return list(items)
    if limit < 1:
        raise UsageError(f"--limit must be at least 1, got {limit}")
    chosen = set(random.Random(seed).sample(range(len(items)), limit))  # noqa: S311 - a sample
    return [item for index, item in enumerate(items) if index in chosen]
