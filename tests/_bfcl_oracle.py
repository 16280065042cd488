"""Model functions for the BFCL tests: a FunctionModel that answers an item's gold calls.

``Oracle(item)`` is the function of an ``agentkit.testing.FunctionModel``: under the
``tool_loop`` strategy it makes each turn's gold calls one act call at a time, then answers
in text (on a turn whose gold is "no call", a question). ``reply`` is the same, found by the
item the request is about, for ``--model function:tests._bfcl_oracle:reply`` on the command
line; ``PromptOracle`` writes the gold calls in BFCL's prompt-mode format.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from agentkit.eval.bfcl.catalog import CATEGORIES, BfclItem, category_kind, load_items
from agentkit.eval.bfcl.gold import gold_answer, gold_turns
from agentkit.eval.bfcl.scoring import Call
from agentkit.eval.bfcl.suite import _text, scenario_for
from agentkit.eval.bfcl.toolset import tool_names
from agentkit.testing import ModelRequest, tool_call

QUESTION = "Which value should I use for that?"


def _any_value(schema: dict[str, Any]) -> Any:
    if "enum" in schema:
        return schema["enum"][0]
    values = {"integer": 1, "float": 1.0, "number": 1.0, "boolean": True, "array": [],
              "tuple": [], "dict": {}, "object": {}}  # fmt: skip
    return values.get(str(schema.get("type")), "x")


class Oracle:
    """Answers *item*'s gold calls (``wrong``: change the calls first)."""

    def __init__(
        self, item: BfclItem, wrong: Callable[[list[list[Call]]], list[list[Call]]] | None = None
    ) -> None:
        self.item = item
        turns = _relevant_call(item) if item.kind == "relevance" else gold_turns(item)
        self.turns = wrong(turns) if wrong is not None else turns
        self.names = {bfcl: ours for ours, bfcl in tool_names(item.functions).items()}
        self.texts = [turn.user for turn in scenario_for(item).turns]
        self.made: dict[int, int] = {}
        self.asked: list[int] = []

    def turn_of(self, request: ModelRequest) -> int:
        said = [message.content for message in request.messages]
        return max(
            (i for i, text in enumerate(self.texts) if any(text in c for c in said)), default=0
        )

    def __call__(self, request: ModelRequest) -> object:
        if self.item.kind == "memory":
            return gold_answer(self.item) if request.purpose != "summarize" else "{}"
        if not request.tools:
            return "Done."
        index = self.turn_of(request)
        calls = self.turns[index] if index < len(self.turns) else []
        done = self.made.get(index, 0)
        if done >= len(calls):
            if not calls:
                self.asked.append(index)
                return QUESTION
            return "Done."
        self.made[index] = done + 1
        call = calls[done]
        return tool_call(self.names.get(call.name, call.name), f"c{index}_{done}", **call.arguments)


def _relevant_call(item: BfclItem) -> list[list[Call]]:
    function = item.functions[0]
    properties = function["parameters"].get("properties", {})
    required = function["parameters"].get("required", [])
    return [[Call(function["name"], {k: _any_value(properties[k]) for k in required})]]


@cache
def _first_texts() -> dict[str, BfclItem]:
    """Every single-turn item by the text of its (first) user turn."""
    texts: dict[str, BfclItem] = {}
    for category in CATEGORIES:
        if category_kind(category) in ("ast", "irrelevance", "relevance"):
            for item in load_items(category):
                texts.setdefault(_text(item.turns[0]), item)
    return texts


def _item_of(request: ModelRequest) -> BfclItem:
    said = "\n".join(message.content for message in request.messages)
    found = [item for text, item in _first_texts().items() if text in said]
    if not found:
        raise LookupError("no BFCL item in this request")
    return max(found, key=lambda item: len(_text(item.turns[0])))


_ORACLES: dict[str, Oracle] = {}


def reply(request: ModelRequest) -> object:
    """The oracle of the (single-turn) item the request is about, for ``--model
    function:tests._bfcl_oracle:reply`` on the command line."""
    item = _item_of(request)
    oracle = _ORACLES.setdefault(item.id, Oracle(item))
    return oracle(request)


class PromptOracle:
    """Prompt mode: each turn's gold calls as text at its first step, no call after."""

    def __init__(self, item: BfclItem) -> None:
        self.item = item
        self.turns = gold_turns(item)

    def __call__(self, request: ModelRequest) -> object:
        if request.messages[-1].role == "tool":
            return "[]"
        last = request.messages[-1].content
        index = max(
            (i for i, turn in enumerate(self.item.turns) if turn and turn[-1].content in last),
            default=0,
        )
        calls = self.turns[index]
        if not calls:
            return "I cannot do that: a value is missing."
        written = [
            f"{call.name}({', '.join(f'{k}={v!r}' for k, v in call.arguments.items())})"
            for call in calls
        ]
        return "[" + ", ".join(written) + "]"


__all__ = ["QUESTION", "Oracle", "PromptOracle", "reply"]
