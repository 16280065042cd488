"""An item's gold answer as calls: the oracle that checks the pipeline end to end.

A model that makes exactly these calls (``agentkit.testing.FunctionModel`` answering with
them) must score 100% in every category; a wrong argument must be marked by BFCL's checker.
For an AST item the gold call takes, for each parameter, the first value BFCL accepts
(leaving out an optional one whose first accepted value is "not given"); for a multi-turn
item the gold calls are BFCL's own call strings, parsed (positional arguments named from the
simulated API's method signature).
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Mapping

from pydantic import JsonValue

from agentkit.eval.bfcl.catalog import BfclItem
from agentkit.eval.bfcl.scoring import Call
from agentkit.eval.bfcl.toolset import ItemToolset

__all__ = ["gold_answer", "gold_turns", "parse_call"]


def gold_turns(item: BfclItem) -> list[list[Call]]:
    """The calls each turn of *item* should make (one turn for single-turn items; no call
    for irrelevance)."""
    if item.kind == "irrelevance":
        return [[]]
    if item.kind == "relevance":
        raise ValueError(f"{item.id}: a relevance item has no gold call (any call will do)")
    if item.kind == "memory":
        return [[]]
    if item.kind == "multi_turn":
        toolset = ItemToolset(item)
        signatures = {
            name: inspect.signature(method)
            for instance in toolset.instances.values()
            for name, method in inspect.getmembers(instance, predicate=inspect.ismethod)
        }
        truth = item.ground_truth
        assert isinstance(truth, list)
        return [[parse_call(str(text), signatures) for text in turn] for turn in truth]  # type: ignore[union-attr]
    truth = item.ground_truth
    assert isinstance(truth, list)
    docs = {str(doc["name"]): doc for doc in item.checker_functions}
    calls = []
    for answer in truth:
        assert isinstance(answer, dict)
        ((name, params),) = answer.items()
        assert isinstance(params, dict)
        properties = docs[name]["parameters"]["properties"]
        arguments: dict[str, JsonValue] = {}
        for param, accepted in params.items():
            assert isinstance(accepted, list)
            if accepted and accepted[0] != "":
                value = _first(accepted[0])
                if item.language != "python":
                    value = _source(value, str(properties[param]["type"]), item)
                arguments[param] = value
        calls.append(Call(name=name, arguments=arguments))
    return [calls]


def _first(value: JsonValue) -> JsonValue:
    """A gold value with every nested set of accepted values reduced to its first."""
    if isinstance(value, dict):
        return {
            key: _first(accepted[0] if isinstance(accepted, list) else accepted)
            for key, accepted in value.items()
            if not (isinstance(accepted, list) and accepted and accepted[0] == "")
        }
    if isinstance(value, list):
        return [_first(item) for item in value]
    return value


def _source(value: JsonValue, kind: str, item: BfclItem) -> str:
    """A Java or JavaScript argument as source text (how those categories pass arguments)."""
    java = item.language == "java"
    if isinstance(value, bool):
        return "true" if value else "false"
    if java and kind == "long" and isinstance(value, int):
        return f"{value}L"
    if java and kind == "float" and isinstance(value, int | float):
        return f"{float(value)}f"
    if isinstance(value, int | float | str):
        return str(value)
    raise ValueError(f"{item.id}: the oracle does not write a {kind} argument as source")


def gold_answer(item: BfclItem) -> str:
    """A memory question's first accepted answer."""
    truth = item.ground_truth
    return str(truth[0] if isinstance(truth, list) else truth)


def parse_call(text: str, signatures: Mapping[str, inspect.Signature]) -> Call:
    """``name(a=1, 'x')`` as a :class:`Call` (literal arguments only)."""
    node = ast.parse(text, mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a call: {text!r}")
    name = node.func.id
    arguments: dict[str, JsonValue] = {}
    if node.args:
        params = [p for p in signatures[name].parameters.values() if p.name != "self"]
        for param, value in zip(params, node.args, strict=False):
            arguments[param.name] = ast.literal_eval(value)
    for keyword in node.keywords:
        assert keyword.arg is not None
        arguments[keyword.arg] = ast.literal_eval(keyword.value)
    return Call(name=name, arguments=arguments)
