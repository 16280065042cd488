"""Grounded arguments: a call is proposed only with values the conversation gave.

Why: a small model fills a tool's arguments with whatever its decoding allows — the schema
echoed back (``"{'minLength':1,'type':'string'}"``), brackets (``"]["``), placeholders
(``"<name>"``, ``"string"``, the argument's own name) or a plausible invention — and a consent
question showing those invites the user to approve an invention. So before a call is proposed
the gate's grounding rule (:mod:`agentkit.planning.gate`) checks each **required** argument
with :func:`check`; a value is grounded when it is

* **typed by the user** in this conversation (this message, earlier ones, answers to
  questions, the facts TaskState kept) — whatever it looks like: the user's own words win,
  so ``todo``, ``xxx``, ``N/A`` or ``1234`` typed by the user are values, not placeholders;
* otherwise, when it is no schema fragment or placeholder (:func:`is_fragment`,
  :func:`is_placeholder`, which apply only to values the user never typed), said in the
  sources: the user's words (each word somewhere), an earlier tool's result (this flow's
  observations and the previous flow's), a number said (digits, words, numerals);
* a default the tool declares, or a choice its schema enumerates (an ``enum`` value, a
  boolean): the tool offers those, nobody invents them.

An argument that is not grounded becomes a question (the gate's ``ask``); an optional
argument holding a fragment or a placeholder is dropped, so the tool's own default applies.

The same grounds can steer decoding before any check (``planner.argument_values: said``,
:func:`said`): the model may then only write values the conversation holds
(:class:`~agentkit.planning.schemas.Said`).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue

from agentkit import language
from agentkit.planning.graph import Turn
from agentkit.planning.schemas import Said
from agentkit.tools import Tool, is_secret_key

__all__ = [
    "INTENT",
    "Grounding",
    "Sources",
    "check",
    "is_fragment",
    "is_placeholder",
    "said",
    "schema_parts",
    "sources",
]

#: the ``Waiting.intent`` of a question asked for a call's missing arguments: its answer goes
#: back to that call (:mod:`agentkit.planning.routing`)
INTENT = "provide_tool_arguments"

_SCHEMA_WORDS = (
    "type|minLength|maxLength|minimum|maximum|exclusiveMinimum|exclusiveMaximum|properties|"
    "required|enum|const|format|items|additionalProperties|pattern|anyOf|oneOf|allOf|\\$ref|"
    "\\$defs|default|description|title|minItems|maxItems|writeOnly|readOnly|nullable"
)
#: ``'type':``, ``"minLength" :`` …: a JSON schema's keyword used as a key
_SCHEMA_KEY = re.compile(rf"""["']?\b(?:{_SCHEMA_WORDS})\b["']?\s*[:=]""")
#: JSON schema's and Python's type names: a type echoed back as a value
_TYPE_NAMES = frozenset({
    "string", "str", "text", "integer", "int", "number", "float", "double", "boolean", "bool",
    "object", "dict", "array", "list", "null", "none", "nil", "any", "value", "values", "tuple",
})  # fmt: skip
#: ``<name>``, ``{name}``, ``[name]``, ``${name}``, ``{{name}}``
_WRAPPED = re.compile(r"\$?[<{\[(]{1,2}\s*[\w .:/-]*\s*[>}\])]{1,2}")
#: ``your_api_key``, ``YOUR API KEY``, ``your-name``
_YOUR = re.compile(r"your[\s_-]+\w")
_FILLER = re.compile(r"(?:x+|\*+|\.{2,}|_+|-+|#+|\?+|0+|1234(?:5(?:6(?:78?9?)?)?)?)", re.IGNORECASE)
#: a live-state observation: ``tool_name: {json}``
_NAMED_RESULT = re.compile(r"^[A-Za-z_][\w.-]*:\s*([\[{].*)$", re.DOTALL)
#: a tool result's string longer than this is not offered as a value
_TOOL_STRING_CHARS = 200


def is_fragment(value: str) -> bool:
    """*value* is a piece of a JSON schema or of JSON syntax, not a value: keywords used as
    keys (``{'minLength':1,'type':'string'}``), nothing but brackets and punctuation (``][``,
    ``{}``), or a type's name (``string``)."""
    text = value.strip()
    if not text or not language.tokens(text):
        return True
    if _SCHEMA_KEY.search(text) and (text[0] in "{[" or text.count(":") >= 1):
        return True
    return language.normalize(text).strip("'\"") in _TYPE_NAMES


def is_placeholder(value: str, name: str = "", schema: Mapping[str, Any] | None = None) -> bool:
    """*value* stands for a value rather than being one: ``<name>``, ``{name}``, ``your_key``,
    ``xxx``, ``...``, ``TBD``, ``example``, the argument's own name (``account_name`` for
    ``account_name``) or its description copied back. (Only for values the user never typed.)"""
    text = value.strip()
    norm = language.normalize(text).strip("'\"`")
    if not norm:
        return True
    if _WRAPPED.fullmatch(text) or _FILLER.fullmatch(norm):
        return True
    if norm in language.merged("placeholder_words") or _YOUR.match(norm):
        return True
    if name and language.words(text) == language.words(name):
        return True
    described = str((schema or {}).get("description") or "")
    return bool(described) and norm == language.normalize(described)


@dataclass(frozen=True)
class Sources:
    """What can ground a value: what the user said and what earlier tools returned."""

    user: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    _user_texts: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _texts: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _phrases: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _tokens: frozenset[str] = field(init=False, repr=False, compare=False)
    _numbers: frozenset[float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        users = tuple(language.normalize(t) for t in self.user if t)
        texts = users + tuple(language.normalize(t) for t in self.tools if t)
        phrases = tuple(f" {' '.join(language.tokens(text))} " for text in texts)
        tokens = {tok for text in texts for tok in language.tokens(text)}
        numbers = {n for text in users for n in language.numbers_in(text)}
        numbers |= {n for text in self.tools for n in language.numbers_in(text, words=False)}
        object.__setattr__(self, "_user_texts", users)
        object.__setattr__(self, "_texts", texts)
        object.__setattr__(self, "_phrases", phrases)
        object.__setattr__(self, "_tokens", frozenset(tokens))
        object.__setattr__(self, "_numbers", frozenset(numbers))

    def typed(self, value: str) -> bool:
        """The user typed *value* as it stands (case and spacing aside), not inside a word:
        a value the user's own words give, whatever it looks like."""
        norm = language.normalize(value).strip()
        if not norm:
            return False
        # not inside a word: a letter of a spaced script may not touch it (an unspaced
        # script's may: 标题是todo)
        letter = f"[^\\W_{language.UNSPACED}]"
        edge = f"(?<!{letter})" if norm[0].isalnum() and not language.has_unspaced(norm[0]) else ""
        tail = f"(?!{letter})" if norm[-1].isalnum() and not language.has_unspaced(norm[-1]) else ""
        found = re.compile(edge + re.escape(norm) + tail)
        return any(found.search(text) for text in self._user_texts)

    def says(self, value: str) -> bool:
        """*value* appears in a source: its words in a row (case, spacing and punctuation
        aside), or every word of it somewhere (an unspaced run as a substring); a number as
        the same number."""
        norm = language.normalize(value).strip("'\"`")
        tokens = language.tokens(norm)
        if not tokens:
            return False
        phrase = f" {' '.join(tokens)} "
        if any(phrase in text for text in self._phrases):
            return True
        number = language.parse_number(norm)
        if number is not None:
            return number in self._numbers
        return all(
            tok in self._tokens
            or (language.has_unspaced(tok) and any(tok in t for t in self._texts))
            for tok in tokens
        )

    def says_user(self, value: str) -> bool:
        """*value* is what the user said (the tools' results aside)."""
        return self._user_only.says(value)

    @functools.cached_property
    def _user_only(self) -> Sources:
        """The user's words alone (built once, however many values are asked about)."""
        return Sources(user=self.user) if self.tools else self

    def has_number(self, value: float) -> bool:
        return float(value) in self._numbers

    def said(self, max_words: int = 6, max_strings: int = 600) -> Said:
        """The values an argument may take when decoding is limited to what was said: runs
        of up to *max_words* of the user's words (:func:`agentkit.language.spans`), the
        strings in earlier tools' JSON results, and every number said, at most *max_strings*
        strings, the user's first; and the user's words, which name the optional arguments
        the request gives."""
        strings: dict[str, None] = {}
        edges = language.merged("function_words")
        for text in self.user:
            strings.update(dict.fromkeys(language.spans(text, max_words, edges)))
        for text in self.tools:
            strings.update(dict.fromkeys(_tool_strings(text)))
        # a string holding a quote or a backslash is not offered: llama.cpp's grammar from a
        # JSON schema mis-escapes it and its process dies (seen with a live-state result)
        kept = [s for s in strings if s and '"' not in s and "\\" not in s][:max_strings]
        words = frozenset(w for text in self.user for w in language.words(text))
        return Said(tuple(kept), tuple(sorted(self._numbers)), words)


def _tool_strings(text: str) -> list[str]:
    """The strings of a tool's JSON result (the whole text when it is a short plain one); a
    live-state observation (``tool: {json}``) is read after its tool's name."""
    named = _NAMED_RESULT.match(text)
    if named is not None:
        text = named[1]
    try:
        value = json.loads(text)
    except ValueError:
        return [text.strip()] if len(text) <= _TOOL_STRING_CHARS else []
    found: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, str) and 0 < len(node) <= _TOOL_STRING_CHARS:
            found.append(node)
        elif isinstance(node, dict):
            for item in node.values():
                walk(item)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(value)
    return found


def sources(turn: Turn) -> Sources:
    """This turn's grounds: the user's messages (this one, the conversation's, the answers to
    questions but never the questions' own words, the facts TaskState kept) and the earlier
    tools' results (this flow's and the previous flow's observations)."""
    ctx = turn.ctx
    user = [ctx.text]
    user += [m.content for m in turn.intake.history if m.role == "user" and m.content]
    user += list(turn.intake.task.value.important_facts)
    tools: list[str] = []
    for state in (turn.state, turn.request.previous):
        if state is None:
            continue
        for observation in state.observations:
            if observation.kind in ("tool_result", "live_state"):
                tools.append(observation.content)
        for step in state.steps:
            if step.type == "tool" and step.result_summary:
                tools.append(step.result_summary)
            elif step.type == "ask_user" and step.status == "done" and step.result_summary:
                user.append(step.result_summary)  # the answer, not the question asked
    return Sources(tuple(user), tuple(tools))


def said(turn: Turn) -> Said | None:
    """What the turn's tool arguments may be decoded from (``planner.argument_values:
    said``), or None: free decoding."""
    config = turn.ctx.config
    if config.argument_values != "said":
        return None
    return sources(turn).said(config.said_span_words, config.said_max_strings)


@dataclass(frozen=True)
class Grounding:
    """A call checked: its arguments with placeholders of optional fields dropped, and the
    required fields whose values are not grounded (in the schema's order)."""

    args: dict[str, JsonValue]
    missing: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()


def _grounded(  # noqa: PLR0911 - one return per kind of value
    value: JsonValue, name: str, schema: Mapping[str, Any], found: Sources
) -> bool:
    enum = schema.get("enum")
    if (
        isinstance(value, bool)  # a choice the tool offers
        or (isinstance(enum, list) and value in enum)
        or ("default" in schema and value == schema["default"])
    ):
        return True
    if isinstance(value, int | float):
        return found.has_number(value)
    if isinstance(value, str):
        if is_secret_key(name) and not _credential(value):
            return False  # a credential is never a plain word of the request
        if found.typed(value):
            return True  # the user's own words win
        invented = is_fragment(value) or is_placeholder(value, name, schema)
        return not invented and found.says(value)
    if isinstance(value, list):
        items = schema.get("items")
        return all(
            _grounded(v, name, items if isinstance(items, Mapping) else {}, found) for v in value
        )
    if isinstance(value, dict):
        props = schema.get("properties")
        props = props if isinstance(props, Mapping) else {}
        return all(_grounded(v, str(k), props.get(k) or {}, found) for k, v in value.items())
    return False  # null: only a declared default stands for nothing


def _credential(value: str) -> bool:
    """*value* can be a credential (a key, a token, a password): one word, at least six
    characters, with a digit or a sign in it — never a plain word or a phrase."""
    text = value.strip()
    return len(text) >= 6 and not any(c.isspace() for c in text) and not text.isalpha()


def _invented(value: JsonValue, name: str, schema: Mapping[str, Any], found: Sources) -> bool:
    """A schema fragment or a placeholder the user never typed, anywhere in *value*."""
    if isinstance(value, str):
        return not found.typed(value) and (
            is_fragment(value) or is_placeholder(value, name, schema)
        )
    if isinstance(value, list):
        return any(_invented(v, name, {}, found) for v in value)
    if isinstance(value, dict):
        return any(_invented(v, str(k), {}, found) for k, v in value.items())
    return False


def schema_parts(tool: Tool[Any]) -> tuple[Mapping[str, Any], tuple[str, ...]]:
    """*tool*'s argument schemas by name, and its required arguments."""
    schema = tool.json_schema()
    props = schema.get("properties")
    required = schema.get("required")
    return (
        props if isinstance(props, Mapping) else {},
        tuple(str(r) for r in required) if isinstance(required, list) else (),
    )


def check(
    tool: Tool[Any], args: Mapping[str, JsonValue], found: Sources, *, numbers: bool = False
) -> Grounding:
    """*args* of a call of *tool* checked against what grounds them (see the module
    docstring); with *numbers*, only the required arguments that are numbers."""
    props, required = schema_parts(tool)
    if numbers:
        required = tuple(r for r in required if _is_number(props.get(r) or {}))
    kept: dict[str, JsonValue] = {}
    dropped: list[str] = []
    for name, value in args.items():
        if name not in required and _invented(value, name, props.get(name) or {}, found):
            dropped.append(name)
        else:
            kept[name] = value
    missing = []
    for name in required:
        schema = props.get(name) or {}
        if name not in kept:
            if "default" not in schema:
                missing.append(name)
        elif not _grounded(kept[name], name, schema, found):
            missing.append(name)
    return Grounding(kept, tuple(missing), tuple(dropped))


def _is_number(schema: Mapping[str, Any]) -> bool:
    return schema.get("type") in ("integer", "number") and "enum" not in schema
