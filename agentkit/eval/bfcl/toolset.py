"""An item's functions as an agent's toolset.

A BFCL scenario's config names its toolset as ``{"python": "agentkit.eval.bfcl.toolset:ID"}``
(ID: the BFCL item id). The module resolves any such attribute (PEP 562 ``__getattr__``) to a
factory that builds the toolset of that item when the run's agent starts, so a run needs
nothing but the item id, in this process or on a worker.

* Every function becomes a tool whose argument schema is the function's JSON schema, as BFCL
  itself converts it for function-calling models (``convert_to_tool``: its ``dict``,
  ``float``, ``tuple`` … types as JSON-schema types). Tool names keep BFCL's where they can;
  a name a tool cannot have (dots, a leading ``_``) is rewritten and mapped back, so the
  checkers always see BFCL's names (:meth:`ItemToolset.bfcl_name`).
* No tool is side-effecting (no consent asked): a single-turn item's tools run nothing and
  answer that the call was made; the calls the turn made are what BFCL's checker scores.
* A multi-turn item's tools are BFCL's own simulated APIs (file system, trading bot, travel,
  vehicle, messaging, tickets, math …): one instance of each class the item involves, loaded
  with the item's initial state, kept for the whole run, each tool a method of one of them.
"""

from __future__ import annotations

import copy
import inspect
import json
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import JsonValue
from pydantic_core import to_jsonable_python

from agentkit.eval.bfcl._package import bfcl_module
from agentkit.eval.bfcl.catalog import BfclItem, load_items
from agentkit.tools import Tool, ToolContext, Toolset
from agentkit.tools.registry import SchemaArgs, ToolFailedError, schema_args_model

__all__ = ["MODULE", "TOOLSET", "ItemToolset", "find_item", "tool_names", "toolset_spec"]

#: the module a scenario's config names
MODULE = "agentkit.eval.bfcl.toolset"
#: the toolset's name in the agent's config
TOOLSET = "bfcl"
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
_RECORDED = {"status": "done"}


def toolset_spec(item: BfclItem) -> dict[str, JsonValue]:
    """The ``toolsets`` entry of a scenario's config for *item*."""
    return {"python": f"{MODULE}:{item.id}", "name": TOOLSET}


def find_item(item_id: str) -> BfclItem:
    """The item with BFCL id *item_id* (its category is read from the id, as BFCL does)."""
    category = bfcl_module("utils").extract_test_category_from_id(item_id)
    for item in load_items(category):
        if item.id == item_id:
            return item
    raise LookupError(f"no BFCL item {item_id!r} in category {category!r}")


def tool_names(functions: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Tool name → BFCL function name, for *functions* (rewritten names are unique)."""
    names: dict[str, str] = {}
    for function in functions:
        original = str(function["name"])
        candidate = original if _NAME.fullmatch(original) else _rewrite(original)
        stem, number = candidate, 2
        while candidate in names:
            suffix = f"_{number}"
            candidate = stem[: 64 - len(suffix)] + suffix
            number += 1
        names[candidate] = original
    return names


def _rewrite(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", name).lstrip("_-0123456789")
    return (cleaned or "function")[:64]


def _schemas(functions: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """BFCL's own conversion of its function documents to function-calling tools."""
    utils = bfcl_module("model_handler.utils")
    types = bfcl_module("constants.type_mappings")
    enums = bfcl_module("constants.enums")
    tools = utils.convert_to_tool(
        copy.deepcopy(list(functions)),
        types.GORILLA_TO_OPENAPI,
        enums.ModelStyle.OPENAI_COMPLETIONS,
    )
    return [tool["function"] for tool in tools]


@dataclass
class RunState:
    """What an item's tools keep for the whole run: the simulated APIs, the calls made, and
    how many times the agent opened them (a ``miss_func`` item's agent is opened afresh at
    each turn that adds held-back functions)."""

    instances: dict[str, object]
    calls: list[dict[str, JsonValue]] = field(default_factory=list)
    opened: int = 0


#: the state of the runs going on in this process, by the run's agent folder (a run's data
#: root is its own), the latest few only
_RUNS: OrderedDict[Path, RunState] = OrderedDict()
_RUNS_KEPT = 64


def _run_state(item: BfclItem, folder: Path) -> RunState:
    state = _RUNS.get(folder)
    if state is None:
        state = _RUNS[folder] = RunState(_instances(item) if item.kind == "multi_turn" else {})
        while len(_RUNS) > _RUNS_KEPT:
            _RUNS.popitem(last=False)
    _RUNS.move_to_end(folder)
    state.opened += 1
    return state


def offered(item: BfclItem, opened: int) -> list[dict[str, Any]]:
    """The functions offered at the *opened*-th opening of the run's agent: the item's, plus
    the held-back functions of as many ``miss_func`` turns as the agent was reopened for."""
    docs = list(item.functions)
    for index in sorted(item.held_back)[: max(0, opened - 1)]:
        docs += copy.deepcopy(list(item.held_back[index]))  # as BFCL offers them (no hint)
    return docs


class ItemToolset(Toolset):
    """The tools of one BFCL item (see the module docstring)."""

    def __init__(
        self,
        item: BfclItem,
        functions: Sequence[Mapping[str, Any]] | None = None,
        state: RunState | None = None,
    ) -> None:
        self.name = TOOLSET
        self.item = item
        docs = list(item.functions if functions is None else functions)
        self._names = tool_names(docs)
        run = state or RunState(_instances(item) if item.kind == "multi_turn" else {})
        self._instances = run.instances
        self._calls = run.calls
        methods = _methods(self._instances)
        schemas = _schemas(docs)
        tools: list[Tool[Any]] = []
        for (tool_name, original), schema in zip(self._names.items(), schemas, strict=True):
            method = methods.get(original)
            tools.append(
                Tool(
                    name=tool_name,
                    description=str(schema.get("description") or original),
                    args_model=schema_args_model(tool_name, schema.get("parameters") or {}),
                    handler=self._recording(original, method),
                    side_effect=False,
                    live_state=False,
                    source="bfcl",
                )
            )
        self._tools = tuple(tools)

    def tools(self) -> Sequence[Tool[Any]]:
        return self._tools

    def snapshot(self) -> JsonValue:
        """The calls made so far, in order, with BFCL's function names and the arguments the
        tool received (secret-named ones unmasked: the events show those masked)."""
        return {"calls": list(self._calls)}

    def _recording(
        self, original: str, method: Callable[..., object] | None
    ) -> Callable[[SchemaArgs], object]:
        def record(args: SchemaArgs) -> object:
            arguments = args.arguments()
            self._calls.append({"name": original, "arguments": copy.deepcopy(arguments)})
            if method is None:
                return _RECORDED
            try:
                result = method(**arguments)
            except Exception as error:  # the simulated API's answer, as BFCL's executor gives it
                raise ToolFailedError(f"Error during execution: {error}") from error
            return _jsonable(result)

        return record

    def bfcl_name(self, tool_name: str) -> str:
        """BFCL's name of the function behind *tool_name* (itself when it is not ours)."""
        return self._names.get(tool_name, tool_name)

    @property
    def instances(self) -> Mapping[str, object]:
        """The simulated APIs of a multi-turn item, by class name (empty otherwise)."""
        return self._instances


def _instances(item: BfclItem) -> dict[str, object]:
    """One instance of each class *item* involves, loaded with its initial state, as BFCL's
    own executor makes them."""
    backend = bfcl_module("constants.executable_backend_config")
    long_context = "long_context" in item.category or "composite" in item.category
    made: dict[str, object] = {}
    for class_name in item.involved_classes:
        module = bfcl_module(backend.CLASS_FILE_PATH_MAPPING[class_name].removeprefix("bfcl_eval."))
        instance = getattr(module, class_name)()
        if class_name not in backend.STATELESS_CLASSES:
            state = copy.deepcopy(item.initial_config.get(class_name, {}))
            instance._load_scenario(state, long_context=long_context)
        made[class_name] = instance
    return made


def _methods(instances: Mapping[str, object]) -> dict[str, Callable[..., object]]:
    methods: dict[str, Callable[..., object]] = {}
    for instance in instances.values():
        for name, method in inspect.getmembers(instance, predicate=inspect.ismethod):
            if not name.startswith("_"):
                methods[name] = method
    return methods


def _jsonable(value: object) -> JsonValue:
    try:
        converted: JsonValue = to_jsonable_python(value)
        json.dumps(converted)
    except (TypeError, ValueError):
        return str(value)
    return converted


def _factory(item_id: str) -> Callable[[ToolContext], Toolset]:
    def build(context: ToolContext) -> Toolset:
        item = find_item(item_id)
        state = _run_state(item, context.agent_dir.resolve())
        return ItemToolset(item, offered(item, state.opened), state)

    return build


def __getattr__(name: str) -> Callable[[ToolContext], Toolset]:
    """``toolset:ITEM_ID`` → the factory of that item's toolset."""
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        find_item(name)
    except (LookupError, KeyError, ValueError) as error:
        raise AttributeError(f"no BFCL item {name!r}: {error}") from None
    return _factory(name)
