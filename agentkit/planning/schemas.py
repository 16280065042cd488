"""The JSON schemas a planner reply is asked to follow, generated from the reply types.

The pydantic reply types of :mod:`agentkit.planning.plan` are the one definition of a reply;
the schema a model is sent (``response_format`` for an endpoint, a grammar for the embedded
model) is derived from them here, so the two cannot drift apart. Two things are added that a
type cannot say on its own:

* **One variant per tool.** A tool step (a ``tool_loop`` action) is one of the registered
  tools, with that tool's own argument schema, so a grammar-constrained local model can only
  write calls that exist; the other step types are variants of their own.
* **Grammar-lean.** Upper length bounds, titles, descriptions, defaults and formats are
  dropped: the reply is validated against the full types anyway, and each ``maxLength`` turns
  into hundreds of grammar rules that slow a local model's constrained sampling to a crawl.
  ``minLength`` stays (cheap, and it stops a small model from writing empty ids).

* **Values said, on request** (``planner.argument_values: said``). With a :class:`Said`, a
  tool argument that is free text or a free number may only be one the conversation holds:
  a run of the user's words, a string an earlier tool returned, a number either said. A small
  model left free writes ``"seattle-10miles.com/cuisine,"`` for *Seattle*; constrained, it can
  only choose. Enumerations, booleans, patterns and formats stay as the tool declares them,
  and a free number stays free when nothing said holds a number. An *optional* free-text
  argument is offered only when the user's words name it (a word of its name, ``units`` for
  *in units of cm*): a small model fills every field it is offered, and an optional one the
  request does not mention is better left to the tool's default. The strings are one
  ``$defs`` rule the whole reply shares, so the grammar grows by one rule, not one per
  argument.

Schemas are built once per registry (and ``max_steps``) and cached; the returned dicts are
shared, so treat them as read-only. A schema with :class:`Said` values is built per call.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

from pydantic import BaseModel

from agentkit import language
from agentkit.models.base import JsonSchema
from agentkit.planning.plan import (
    ActReply,
    BatchReply,
    ClassifyReply,
    PlanReply,
    ReplanReply,
    StepReply,
)
from agentkit.tools import ToolRegistry

__all__ = [
    "STEP_FIELDS",
    "Said",
    "act_schema",
    "batch_schema",
    "classify_schema",
    "plan_schema",
    "replan_schema",
    "reply_fields",
    "tool_args_schema",
]

_GRAMMAR_NOISE = frozenset(
    {"maxLength", "format", "writeOnly", "description", "title", "default", "examples"}
)
#: the fields a step of each type is asked for (``requires_confirmation`` is never asked: a
#: side-effecting tool needs consent whatever the model writes)
STEP_FIELDS: Mapping[str, tuple[str, ...]] = {
    "tool": ("id", "type", "title", "tool_name", "tool_args"),
    "reason": ("id", "type", "title", "instruction"),
    "ask_user": ("id", "type", "title", "instruction"),
    "respond": ("id", "type", "title", "instruction"),
}
#: a step without tools to choose from is asked for with these fields required
_GENERIC_STEP_REQUIRED = ("id", "type", "title")
_ACT_FIELDS: Mapping[str, tuple[str, ...]] = {
    "tool": ("action", "tool_name", "tool_args"),
    "answer": ("action", "text"),
}


def _inline(node: Any, defs: Mapping[str, Any], depth: int = 0) -> Any:  # noqa: ANN401
    """*node* with local ``#/$defs/…`` references replaced by what they name."""
    if isinstance(node, list):
        return [_inline(item, defs, depth) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and depth < 8:
        target = defs.get(ref.removeprefix("#/$defs/"), {})
        rest = {key: value for key, value in node.items() if key != "$ref"}
        return _inline({**target, **rest}, defs, depth + 1)
    return {key: _inline(value, defs, depth) for key, value in node.items()}


def _lean(node: Any) -> Any:  # noqa: ANN401 - JSON in, JSON out
    """A schema without grammar noise (see the module docstring). ``additionalProperties``
    that allows anything is dropped (it is the default), and so is the ``type`` next to an
    ``enum`` or ``const`` (the values say it)."""
    if isinstance(node, list):
        return [_lean(item) for item in node]
    if not isinstance(node, dict):
        return node
    lean = {
        key: _lean_properties(value) if key == "properties" else _lean(value)
        for key, value in node.items()
        if key not in _GRAMMAR_NOISE
    }
    if lean.get("additionalProperties") in ({}, True):
        del lean["additionalProperties"]
    if "enum" in lean or "const" in lean:
        lean.pop("type", None)
    return lean


def _lean_properties(properties: Any) -> Any:  # noqa: ANN401
    """A ``properties`` mapping: its keys are field names (a field may be called ``title``)."""
    if not isinstance(properties, dict):
        return _lean(properties)
    return {name: _lean(schema) for name, schema in properties.items()}


@dataclass(frozen=True, slots=True)
class Said:
    """The values a turn's conversation holds, that a tool argument may take
    (``planner.argument_values: said``; built by :func:`agentkit.planning.grounding.said`)."""

    strings: tuple[str, ...] = ()
    numbers: tuple[float, ...] = ()
    #: the user's words (:func:`agentkit.language.words`): an optional free-text argument
    #: none of whose name's words is among them is not offered (None: every argument is)
    words: frozenset[str] | None = None


def _named(name: str, words: frozenset[str]) -> bool:
    """Some word of the argument's *name* is among *words* (a plural ``s`` aside)."""
    stems = {w.removesuffix("s") for w in words}
    return any(w.removesuffix("s") in stems for w in language.words(name))


def _free_text(node: Any) -> bool:  # noqa: ANN401
    """A string (or a list of strings, or either or null: ``str | None``) without an
    enumeration, pattern or format."""
    if not isinstance(node, dict) or "enum" in node or "const" in node:
        return False
    options = node.get("anyOf")
    if isinstance(options, list):
        kinds = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
        return bool(kinds) and all(_free_text(o) for o in kinds)
    if node.get("type") == "array":
        return _free_text(node.get("items"))
    return node.get("type") == "string" and "pattern" not in node


#: the ``$defs`` entry holding the strings said (one grammar rule, shared by every argument)
_SAID = "said_string"
_SAID_REF = f"#/$defs/{_SAID}"


def _said_values(node: Any, said: Said) -> Any:  # noqa: ANN401 - JSON in, JSON out
    """*node* (a lean argument schema) with free strings and numbers limited to *said*."""
    if isinstance(node, list):
        return [_said_values(item, said) for item in node]
    if isinstance(node, dict) and isinstance(node.get("enum"), list):
        return _said_choices(node, said)
    if not isinstance(node, dict) or "const" in node:
        return node
    kind = node.get("type")
    if kind == "string" and "pattern" not in node and said.strings:
        return {"$ref": _SAID_REF}
    if kind in ("integer", "number"):
        return _said_number(node, said)
    changed = dict(node)
    for key in ("items", "anyOf", "oneOf", "allOf", "additionalProperties"):
        if key in changed:
            changed[key] = _said_values(changed[key], said)
    if isinstance(changed.get("properties"), dict):
        required = set(changed.get("required") or ())
        changed["properties"] = {
            name: _at_least_one(_said_values(value, said))
            if name in required
            else _said_values(value, said)
            for name, value in changed["properties"].items()
            if name in required
            or said.words is None
            or not _free_text(value)
            or _named(name, said.words)
        }
    return changed


def _said_number(node: dict[str, Any], said: Said) -> dict[str, Any]:
    """A free number limited to the numbers said (the whole ones for an integer), or free
    when none was."""
    whole = node.get("type") == "integer"
    numbers = [n for n in said.numbers if not whole or float(n).is_integer()]
    if not numbers:
        return node
    return {"enum": [int(n) if float(n).is_integer() else n for n in numbers]}


def _said_choices(node: dict[str, Any], said: Said) -> dict[str, Any]:
    """An enumeration limited to the choices the user named (``parking`` and ``wifi`` of a
    hotel's amenities), or as declared when the user named none: the tool's own choices
    stay choices, and the one the request names is not left to chance."""
    folded = _folded(said.strings)
    named = [v for v in node["enum"] if isinstance(v, str) and v.casefold() in folded]
    return {**node, "enum": named} if named else node


@lru_cache(maxsize=8)
def _folded(strings: tuple[str, ...]) -> frozenset[str]:
    """The said strings case-folded, once per turn's values (every enumeration reads them)."""
    return frozenset(text.casefold() for text in strings)


def _at_least_one(node: Any) -> Any:  # noqa: ANN401 - JSON in, JSON out
    """A required list holds a value said: never empty (an empty list is no value at all,
    and what a small model writes when it cannot choose)."""
    if isinstance(node, dict) and node.get("type") == "array" and "minItems" not in node:
        return {**node, "minItems": 1}
    return node


def _with_said(schema: JsonSchema, said: Said | None) -> JsonSchema:
    """A whole reply's schema with the ``$defs`` rule its said strings refer to."""
    if said is None or not said.strings:
        return schema
    defs = dict(schema.get("$defs") or {})
    defs[_SAID] = {"enum": list(said.strings)}
    return {**schema, "$defs": defs}


def tool_args_schema(tool_schema: JsonSchema, said: Said | None = None) -> JsonSchema:
    """The schema a model fills a tool's arguments under: the tool's own, grammar-lean, its
    free values limited to *said* when given (a whole reply: the ``$defs`` it needs)."""
    lean = _lean(tool_schema)
    assert isinstance(lean, dict)
    return lean if said is None else _with_said(_said_values(lean, said), said)


def _schema_of(model: type[BaseModel]) -> JsonSchema:
    """A pydantic model's JSON schema, its references inlined, grammar-lean."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})
    lean = _lean(_inline(schema, defs))
    assert isinstance(lean, dict)
    return lean


@cache
def reply_fields(model: type[BaseModel]) -> Mapping[str, JsonSchema]:
    """The schema of each field of a reply type, in declaration order."""
    properties = _schema_of(model).get("properties", {})
    assert isinstance(properties, dict)
    return properties


def _object(
    properties: Mapping[str, Any], required: Sequence[str], *, closed: bool = False
) -> JsonSchema:
    schema: JsonSchema = {
        "type": "object",
        "properties": dict(properties),
        "required": list(required),
    }
    if closed:
        schema["additionalProperties"] = False
    return schema


def _variant(model: type[BaseModel], names: Sequence[str], fixed: Mapping[str, Any]) -> JsonSchema:
    """One closed variant of *model*: fields *names*, all required, *fixed* ones replaced."""
    fields = reply_fields(model)
    properties = {name: fixed.get(name, fields.get(name, {})) for name in names}
    return _object(properties, names, closed=True)


def _tool_args(tools: ToolRegistry, name: str, said: Said | None = None) -> JsonSchema:
    lean = _lean(tools.get(name).json_schema())
    assert isinstance(lean, dict)
    if said is None:
        return lean
    limited = _said_values(lean, said)
    assert isinstance(limited, dict)
    return limited


def _step_schema(tools: ToolRegistry | None, said: Said | None = None) -> JsonSchema:
    """One step; with tools, one variant per tool and one per other step type."""
    if tools is None or not tools.names():
        return _object(reply_fields(StepReply), _GENERIC_STEP_REQUIRED)
    variants = [
        _variant(
            StepReply,
            STEP_FIELDS["tool"],
            {
                "type": {"const": "tool"},
                "tool_name": {"const": name},
                "tool_args": _tool_args(tools, name, said),
            },
        )
        for name in tools.names()
    ]
    variants.extend(
        _variant(StepReply, fields, {"type": {"const": kind}})
        for kind, fields in STEP_FIELDS.items()
        if kind != "tool"
    )
    return {"anyOf": variants}


def _with_steps(
    model: type[BaseModel],
    tools: ToolRegistry | None,
    max_steps: int | None,
    required: Sequence[str],
    said: Said | None = None,
) -> JsonSchema:
    """*model*'s schema with its ``steps`` array made of :func:`_step_schema` items."""
    properties = dict(reply_fields(model))
    steps: JsonSchema = {"type": "array", "items": _step_schema(tools, said)}
    steps.update((k, v) for k, v in properties["steps"].items() if k not in ("type", "items"))
    if max_steps is not None:
        steps["maxItems"] = max_steps
    properties["steps"] = steps
    return _with_said(_object(properties, required), said)


# -- the cache: built once per registry ---------------------------------------------------------

_CACHE: weakref.WeakKeyDictionary[ToolRegistry, dict[tuple[object, ...], JsonSchema]] = (
    weakref.WeakKeyDictionary()
)
_NO_TOOLS = ToolRegistry()


def _cached(
    kind: str,
    tools: ToolRegistry | None,
    max_steps: int | None,
    build: Any,  # noqa: ANN401
    said: Said | None = None,
) -> JsonSchema:
    if said is not None:  # the turn's own values: not shared
        built: JsonSchema = build()
        return built
    registry = tools if tools is not None else _NO_TOOLS
    entries = _CACHE.setdefault(registry, {})
    key = (kind, max_steps, registry.names())  # a registry that gained a tool is asked anew
    schema = entries.get(key)
    if schema is None:
        schema = entries[key] = build()
    return schema


def plan_schema(
    tools: ToolRegistry | None = None, max_steps: int | None = None, said: Said | None = None
) -> JsonSchema:
    """What a ``plan`` reply (:class:`PlanReply`) is asked to follow: the goal and at least
    one step."""
    return _cached(
        "plan",
        tools,
        max_steps,
        lambda: _with_steps(PlanReply, tools, max_steps, ("goal", "steps"), said),
        said,
    )


def batch_schema(
    tools: ToolRegistry | None = None, max_steps: int | None = None, said: Said | None = None
) -> JsonSchema:
    """What the next batch of a ``next_step`` plan (:class:`BatchReply`) is asked to follow:
    as a plan, but no steps at all means the goal is reached."""
    return _cached(
        "batch",
        tools,
        max_steps,
        lambda: _with_steps(BatchReply, tools, max_steps, ("goal", "steps"), said),
        said,
    )


def replan_schema(
    tools: ToolRegistry | None = None, max_steps: int | None = None, said: Said | None = None
) -> JsonSchema:
    """What a ``replan`` decision (:class:`ReplanReply`) is asked to follow."""
    return _cached(
        "replan",
        tools,
        max_steps,
        lambda: _with_steps(ReplanReply, tools, max_steps, ("action",), said),
        said,
    )


def classify_schema() -> JsonSchema:
    """What a ``classify`` reply (:class:`ClassifyReply`) is asked to follow."""
    return _cached(
        "classify", None, None, lambda: _object(reply_fields(ClassifyReply), ("intent",))
    )


def act_schema(tools: ToolRegistry, said: Said | None = None) -> JsonSchema:
    """A ``tool_loop`` action (:class:`ActReply`): one variant per tool (its own argument
    schema) or the answer."""

    def build() -> JsonSchema:
        variants = [
            _variant(
                ActReply,
                _ACT_FIELDS["tool"],
                {
                    "action": {"const": "tool"},
                    "tool_name": {"const": name},
                    "tool_args": _tool_args(tools, name, said),
                },
            )
            for name in tools.names()
        ]
        variants.append(_variant(ActReply, _ACT_FIELDS["answer"], {"action": {"const": "answer"}}))
        return _with_said({"anyOf": variants}, said)

    return _cached("act", tools, None, build, said)
