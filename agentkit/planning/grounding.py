"""Grounded arguments: a call is proposed only with values the conversation gave.

Why: a small model fills a tool's arguments with whatever its decoding allows — the schema
echoed back (``"{'minLength':1,'type':'string'}"``), brackets (``"]["``), placeholders
(``"<name>"``, ``"string"``, the argument's own name) or a plausible invention — and a consent
question showing those invites the user to approve an invention that is then written. So before
a side-effecting call is proposed (in every strategy: every tool step passes through
:class:`~agentkit.planning.steps.ToolStep`, the one hook), each **required** argument must be
grounded:

* said by the user in this conversation (this message, earlier ones, answers to questions, the
  facts TaskState kept), or
* returned by an earlier tool (this flow's observations and the previous flow's), or
* a default the tool declares — or a choice the tool's schema enumerates (an ``enum`` value,
  a boolean): the tool offers those, nobody invents them.

A value that is a schema fragment or a placeholder is never grounded, whoever said it. An
argument that is not grounded becomes a question to the user (``ask_user``, naming the
fields, in the conversation's language); an optional argument holding a fragment or a
placeholder is dropped, so the tool's own default applies. The answer goes back to the call
it was asked for (whatever the strategy would otherwise do after an answer): one missing field
takes the answer itself, several take the ``label value`` pairs of the answer whose labels
name them (``key AKEY-… secret SKEY-…``); a field whose description lists example values
(``e.g. red, blue``) takes the one the user said. The call is checked again before it is
proposed, so a field nobody gave is asked again.

``planner.grounding`` says which calls are checked: ``side_effect`` (the default: the calls that
need consent) or ``all`` (every call with required arguments — a simulated world whose
state-changing tools run without consent, as BFCL's multi-turn APIs do). Under said values
(below) every other call has its required *numbers* checked (:func:`numbers_only`), and an
optional string the call left out takes the value of those its description lists that the user
said (:func:`fill_listed_options`).

The same grounds can also steer the decoding, before any check (``planner.argument_values:
said``, :func:`said`): the model may then only write argument values the conversation holds —
runs of the user's words, strings earlier tools returned, numbers said — so a small model
chooses a value instead of inventing one (:class:`~agentkit.planning.schemas.Said`).
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import JsonValue

from agentkit.events import AgentEvent, AskUserEvent
from agentkit.memory import ExecutionState, PlanStep, Waiting
from agentkit.planning.consent import conversation_language
from agentkit.planning.graph import End, Stage, Turn
from agentkit.planning.schemas import Said
from agentkit.planning.schemas import name_words as _words
from agentkit.telemetry import semconv
from agentkit.tools import Tool
from agentkit.tools.registry import ToolArgumentsError

__all__ = [
    "INTENT",
    "AskArguments",
    "Grounding",
    "Sources",
    "applies",
    "asked_for",
    "check",
    "fill_from_answer",
    "fill_from_examples",
    "fill_listed_options",
    "ground_step",
    "is_fragment",
    "is_placeholder",
    "question",
    "said",
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
_TYPE_NAMES = frozenset({
    "string", "str", "text", "integer", "int", "number", "float", "double", "boolean", "bool",
    "object", "dict", "array", "list", "null", "none", "nil", "any", "value", "values", "tuple",
})  # fmt: skip
_PLACEHOLDER_WORDS = frozenset({
    "placeholder", "example", "sample", "tbd", "todo", "tbc", "unknown", "undefined", "n/a",
    "na", "xxx", "xxxx", "foo", "bar", "baz", "lorem ipsum", "something", "somewhere", "someone",
    "anything", "whatever", "insert here",
})  # fmt: skip
#: ``<name>``, ``{name}``, ``[name]``, ``${name}``, ``{{name}}``
_WRAPPED = re.compile(r"\$?[<{\[(]{1,2}\s*[\w .:/-]*\s*[>}\])]{1,2}")
#: ``your_api_key``, ``YOUR API KEY``, ``your-name``
_YOUR = re.compile(r"your[\s_-]+\w")
_FILLER = re.compile(r"(?:x+|\*+|\.{2,}|_+|-+|#+|\?+|0+|1234(?:5(?:6(?:78?9?)?)?)?)", re.IGNORECASE)
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
#: a number as written: not inside a word (``mp3``), but a unit may follow it (``6cm``,
#: ``100µF``, ``5m``)
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?(?!\d)|(?<![\w.])[-+]?\.\d+(?!\d)")
#: ``label:value`` / ``label=value`` written without a space (not a URL's ``://``)
_LABELLED = re.compile(r"([^\W\d]+)[:=\uff1a](?!//)(.+)")
#: what separates an answer's words (full-width comma and semicolon included)
_SEPARATORS = re.compile(r"[\s,;\uff0c\uff1b]+")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def applies(turn: Turn, tool: Tool[Any]) -> bool:
    """Whether calls of *tool* are checked in this turn: every required argument
    (``planner.grounding``), or under ``planner.argument_values: said`` the required numbers
    of any other call (:func:`numbers_only`)."""
    config = turn.ctx.config
    return tool.side_effect or config.grounding == "all" or config.argument_values == "said"


def numbers_only(turn: Turn, tool: Tool[Any]) -> bool:
    """Only *tool*'s required numbers are checked: a call that needs no consent, under said
    values. Decoding already limits a number to one said; where the conversation holds no
    number at all the grammar cannot, and the model invents one (a triangle's base for a
    question about a capital). That call is a question for the number, never a guess."""
    config = turn.ctx.config
    return not tool.side_effect and config.grounding != "all"


def _norm(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def is_fragment(value: str) -> bool:
    """*value* is a piece of a JSON schema or of JSON syntax, not a value: keywords used as
    keys (``{'minLength':1,'type':'string'}``), nothing but brackets and punctuation (``][``,
    ``{}``), or a type's name (``string``)."""
    text = value.strip()
    if not text:
        return True
    if not _TOKEN.search(text):
        return True
    if _SCHEMA_KEY.search(text) and (text[0] in "{[" or text.count(":") >= 1):
        return True
    return _norm(text).strip("'\"") in _TYPE_NAMES


def is_placeholder(value: str, name: str = "", schema: Mapping[str, Any] | None = None) -> bool:
    """*value* stands for a value rather than being one: ``<name>``, ``{name}``, ``your_key``,
    ``xxx``, ``...``, ``TBD``, ``example``, the argument's own name (``account_name`` for
    ``account_name``) or its description copied back."""
    text = value.strip()
    norm = _norm(text).strip("'\"`")
    if not norm:
        return True
    if _WRAPPED.fullmatch(text) or _FILLER.fullmatch(norm) or norm in _PLACEHOLDER_WORDS:
        return True
    if _YOUR.match(norm):
        return True
    if name and _words(text) == _words(name):
        return True
    described = str((schema or {}).get("description") or "")
    return bool(described) and norm == _norm(described)


@dataclass(frozen=True)
class Sources:
    """What can ground a value: what the user said and what earlier tools returned."""

    user: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    _texts: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _phrases: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _tokens: frozenset[str] = field(init=False, repr=False, compare=False)
    _numbers: frozenset[float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        texts = tuple(_norm(t) for t in (*self.user, *self.tools) if t)
        object.__setattr__(self, "_texts", texts)
        phrases = tuple(f" {' '.join(_TOKEN.findall(text))} " for text in texts)
        object.__setattr__(self, "_phrases", phrases)
        tokens = {tok for text in texts for tok in _TOKEN.findall(text)}
        object.__setattr__(self, "_tokens", frozenset(tokens))
        numbers = {n for text in texts for n in _numbers(text)}
        for text in self.user:  # a number the user wrote as a word (*five*, *a dozen*)
            numbers.update(_NUMBER_WORDS[w] for w in _words(text) if w in _NUMBER_WORDS)
        object.__setattr__(self, "_numbers", frozenset(numbers))

    def says(self, value: str) -> bool:
        """*value* appears in a source: its words in a row (case, spacing and punctuation
        aside), or every word of it somewhere (a CJK run as a substring); a number as the
        same number."""
        norm = _norm(value).strip("'\"`")
        tokens = _TOKEN.findall(norm)
        if not tokens:
            return False
        phrase = f" {' '.join(tokens)} "
        if any(phrase in text for text in self._phrases):
            return True
        number = _number(norm)
        if number is not None:
            return number in self._numbers
        return all(
            tok in self._tokens or (_HAN.search(tok) and any(tok in t for t in self._texts))
            for tok in tokens
        )

    def says_user(self, value: str) -> bool:
        """*value* is what the user said (the tools' results aside)."""
        return Sources(user=self.user).says(value)

    def has_number(self, value: float) -> bool:
        return float(value) in self._numbers

    def said(self) -> Said:
        """The values an argument may take when decoding is limited to what was said: runs
        of up to ``_SPAN_WORDS`` of the user's words (edge punctuation stripped; a run neither
        starts nor ends with a function word — *the*, *to*, *of*, *on* … — which no value
        does; runs of Han characters too), the strings in earlier tools' JSON results, and
        every number (digits, or an English number word the user wrote), at most
        ``_SAID_STRINGS`` strings, the user's first; and the user's words, which name the
        optional arguments the request gives."""
        strings: dict[str, None] = {}
        for text in self.user:
            strings.update(dict.fromkeys(_spans(text)))
        for text in self.tools:
            strings.update(dict.fromkeys(_tool_strings(text)))
        numbers = set(self._numbers)
        kept = [s for s in strings if s][:_SAID_STRINGS]
        words = frozenset(w for text in self.user for w in _words(text))
        return Said(tuple(kept), tuple(sorted(numbers)), words)


#: the longest run of words :meth:`Sources.said` offers as one value
_SPAN_WORDS = 6
#: at most this many strings are offered (the grammar stays small)
_SAID_STRINGS = 600
#: a tool result's string longer than this is not offered as a value
_TOOL_STRING_CHARS = 200
_EDGE = ".,;:!?\"'`()[]{}<>\u201c\u201d\u2018\u2019\u3002\uff0c\uff1b\uff1a\uff01\uff1f\u3001"
#: English words a value neither starts nor ends with (articles, prepositions, conjunctions,
#: pronouns, auxiliaries): a run of the user's words that does is not offered
_FUNCTION_WORDS = frozenset({
    "a", "an", "the", "to", "of", "on", "in", "at", "by", "for", "from", "with", "about",
    "into", "onto", "over", "under", "within", "without", "and", "against", "between", "per",
    "via", "as", "or", "but", "nor", "so", "if", "then", "than", "that", "this", "these",
    "those", "is", "are", "was", "were", "be", "been", "being", "do", "does", "did", "have",
    "has", "had", "will", "would", "can", "could", "should", "may", "might", "must", "i", "me",
    "my", "we", "us", "our", "you", "your", "he", "him", "his", "she", "her", "it", "its",
    "they", "them", "their", "what", "which", "who", "whom", "whose", "when", "where", "why",
    "how", "please", "also"
})  # fmt: skip
_POSSESSIVE = re.compile(r"['\u2019]s$")
_HAN_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_WORDS_0_20 = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty"
)
_NUMBER_WORDS = {word: float(value) for value, word in enumerate(_WORDS_0_20.split(" "))} | {
    "thirty": 30.0,
    "forty": 40.0,
    "fifty": 50.0,
    "hundred": 100.0,
    "dozen": 12.0,
}


#: the quotes that open or close a quoted value
_QUOTES = frozenset("'\"`\u201c\u201d\u2018\u2019")


def _spans(text: str) -> list[str]:
    """Runs of up to ``_SPAN_WORDS`` words of *text*, as written (edge punctuation off; none
    crosses a quote: *'Acme Ltd.' since* is no value), and the runs of up to ``_SPAN_WORDS``
    characters inside its Han runs."""
    words = text.split()
    edges = [_norm(word.strip(_EDGE)) in _FUNCTION_WORDS for word in words]
    opens = [word[0] in _QUOTES for word in words]
    closes = [word.rstrip(".,;:!?")[-1:] in _QUOTES for word in words]
    spans = []
    for start in range(len(words)):
        if edges[start]:
            continue
        for end in range(start + 1, min(len(words), start + _SPAN_WORDS) + 1):
            if end - 1 > start and (opens[end - 1] or closes[end - 2]):
                break  # a quoted value is one: no run goes into or out of the quotes
            if not edges[end - 1]:
                span = " ".join(words[start:end]).strip(_EDGE)
                spans.append(span)
                owner = _POSSESSIVE.sub("", span)  # "Einstein's" → also "Einstein"
                if owner != span:
                    spans.append(owner)
    for run in _HAN_RUN.findall(text):
        for start in range(len(run)):
            spans += [run[start:end] for end in range(start + 1, min(len(run), start + 8) + 1)]
    return spans


def _tool_strings(text: str) -> list[str]:
    """The strings of a tool's JSON result (the whole text when it is a short plain one)."""
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


def _numbers(text: str) -> set[float]:
    """The numbers *text* says: as written, and scaled where a scale word or a percent sign
    follows (*50 million* is 50 and 50,000,000; *5%* is 5 and 0.05)."""
    found = set()
    for match in _SCALED.finditer(text):
        written = match.group(1)
        parts = _list_parts(written)
        found.update(parts)
        number = _number(written) if _grouped(written) else None
        if number is None:
            continue
        found.add(number)
        scale = (match.group(2) or "").casefold()
        if scale in _SCALES:
            found.add(number * _SCALES[scale])
        if match.group(3):  # 5% is 5 and 0.05
            found.add(round(number / 100, 12))
    return found


#: scale words after a number, and what they multiply it by
_SCALES = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
_SCALED = re.compile(
    rf"({_NUMBER.pattern})(?:\s+({'|'.join(_SCALES)})\b|\s*(%|per\s?cent\b))?",
    re.IGNORECASE,
)


_GROUPED = re.compile(r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?,?|[-+]?[\d.]+,?")


def _grouped(written: str) -> bool:
    """*written* is one number: no comma, or commas that group thousands (``1,250``)."""
    return _GROUPED.fullmatch(written) is not None


def _list_parts(written: str) -> set[float]:
    """The numbers of a list written without spaces (``200,300,400,500``; ``12,5``): its
    comma-separated parts, where they are not a number's thousands (``1,000,000``: whose
    groups after the first start with 0) — for three parts or more, or commas that group
    nothing."""
    parts = [part for part in written.split(",") if part]
    if len(parts) < 2:  # a list has two parts
        return set()
    grouped = _grouped(written)
    leading_zero = any(part.startswith("0") for part in parts[1:])
    if grouped and (len(parts) < 3 or leading_zero):  # see the docstring
        return set()
    found = {_number(part) for part in parts}
    return {n for n in found if n is not None}


def _number(text: str) -> float | None:
    cleaned = text.replace(",", "")
    try:
        number = float(cleaned)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def sources(turn: Turn) -> Sources:
    """This turn's grounds: the user's messages (this one, the conversation's, the answers to
    questions, the facts TaskState kept) and the earlier tools' results (this flow's and the
    previous flow's observations)."""
    ctx = turn.ctx
    user = [ctx.text]
    user += [m.content for m in turn.intake.history if m.role == "user" and m.content]
    user += list(turn.intake.task.value.important_facts)
    tools: list[str] = []
    for state in (turn.state, turn.request.previous):
        if state is None:
            continue
        for observation in state.observations:
            if observation.kind == "user_reply":
                user.append(observation.content)
            elif observation.kind in ("tool_result", "live_state"):
                tools.append(observation.content)
        tools += [s.result_summary for s in state.steps if s.type == "tool" and s.result_summary]
    return Sources(tuple(user), tuple(tools))


def said(turn: Turn) -> Said | None:
    """What the turn's tool arguments may be decoded from (``planner.argument_values:
    said``), or None: free decoding."""
    if turn.ctx.config.argument_values != "said":
        return None
    return sources(turn).said()


@dataclass(frozen=True)
class Grounding:
    """A call checked: its arguments with placeholders of optional fields dropped, and the
    required fields whose values are not grounded (in the schema's order)."""

    args: dict[str, JsonValue]
    missing: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()


def _grounded(value: JsonValue, name: str, schema: Mapping[str, Any], found: Sources) -> bool:
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


def _invented(value: JsonValue, name: str, schema: Mapping[str, Any]) -> bool:
    """A schema fragment or a placeholder, anywhere in *value*."""
    if isinstance(value, str):
        return is_fragment(value) or is_placeholder(value, name, schema)
    if isinstance(value, list):
        return any(_invented(v, name, {}) for v in value)
    if isinstance(value, dict):
        return any(_invented(v, str(k), {}) for k, v in value.items())
    return False


def _schema_parts(tool: Tool[Any]) -> tuple[Mapping[str, Any], tuple[str, ...]]:
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
    props, required = _schema_parts(tool)
    if numbers:
        required = tuple(r for r in required if _is_number(props.get(r) or {}))
    kept: dict[str, JsonValue] = {}
    dropped: list[str] = []
    for name, value in args.items():
        if name not in required and _invented(value, name, props.get(name) or {}):
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


def _label_pairs(answer: str) -> list[tuple[int, str]]:
    """The answer's words with their positions (``label: value`` and ``label=value`` split,
    separators and quotes apart)."""
    words: list[str] = []
    for piece in _SEPARATORS.split(answer.strip()):
        labelled = _LABELLED.fullmatch(piece)
        parts = [labelled[1], labelled[2]] if labelled else [piece]
        words += [w for w in (p.strip(":=\uff1a").strip("'\"`") for p in parts) if w]
    return list(enumerate(words))


def _coerce(value: str, schema: Mapping[str, Any]) -> JsonValue:
    kind = schema.get("type")
    text = value.strip().rstrip(".!\u3002\uff01").strip().strip("'\"`")
    if kind in ("integer", "number"):
        number = _number(text)
        if number is not None:
            return int(number) if kind == "integer" and number.is_integer() else number
    if kind == "boolean" and text.casefold() in ("yes", "true", "是", "no", "false", "否"):
        return text.casefold() in ("yes", "true", "是")
    return text


def fill_from_answer(
    tool: Tool[Any], args: Mapping[str, JsonValue], missing: Sequence[str], answer: str
) -> dict[str, JsonValue]:
    """*args* with the *missing* fields filled from the user's *answer*: one field takes the
    answer itself (unless it names labelled values), several take the ``label value`` pairs
    whose label words name them (a word two fields share counts for less). A field the answer
    does not name stays as it was."""
    props, _ = _schema_parts(tool)
    filled = dict(args)
    words = _label_pairs(answer)
    texts = [w for _, w in words]
    shares: dict[str, int] = {}
    for name in missing:
        for word in set(_words(name)):
            shares[word] = shares.get(word, 0) + 1
    offers: list[tuple[float, str, int]] = []
    for name in missing:
        labels = set(_words(name))
        for position, word in words:
            score = sum(1.0 / shares[w] for w in _words(word) if w in labels)
            if score and position + 1 < len(texts):
                value = position + 1
                while value < len(texts) and texts[value].casefold() in ("is", "为", "是"):
                    value += 1
                if value < len(texts) and not (set(_words(texts[value])) & labels):
                    offers.append((score, name, value))
    taken: set[int] = set()
    given: set[str] = set()
    for _score, name, value in sorted(offers, key=lambda o: (-o[0], o[2])):
        if name in given or value in taken:
            continue
        filled[name] = _coerce(texts[value], props.get(name) or {})
        given.add(name)
        taken.add(value)
    if len(missing) == 1 and not given and answer.strip():
        filled[missing[0]] = _coerce(answer, props.get(missing[0]) or {})
    return filled


#: where a description starts listing example values: "e.g. red, blue", "such as …"
_EXAMPLES = re.compile(r"\b(?:e\.g\.|for example|such as|one of|like)\s*:?\s*(.+)", re.IGNORECASE)


#: a value a description quotes: ``'draft' to keep it, 'final' to send it``
_QUOTED = re.compile(r"""(?<!\w)['"\u2018\u201c]([^'"\u2019\u201d]{1,40})['"\u2019\u201d](?!\w)""")


def _listed(description: str, name: str) -> list[str]:
    """The values *description* lists for a string field: after *e.g.* (``e.g. red, blue``)
    and the ones it quotes."""
    options: list[str] = []
    listed = _EXAMPLES.search(description)
    if listed is not None:
        options += [o.strip(" .;'\"") for o in re.split(r",|\bor\b|/", listed[1])]
    options += [o.strip() for o in _QUOTED.findall(description)]
    return [o for o in dict.fromkeys(options) if o and not is_placeholder(o, name)]


def _said_choice(schema: Mapping[str, Any], name: str, found: Sources) -> str | None:
    """The one value a string field's description lists that the user said, or None."""
    if schema.get("type") not in ("string", None) or "enum" in schema:
        return None
    options = _listed(str(schema.get("description") or ""), name)
    said = [o for o in options if found.says_user(o)]
    folded = {_norm(o) for o in said}
    return said[0] if len(folded) == 1 else None


def fill_from_examples(
    tool: Tool[Any], args: Mapping[str, JsonValue], missing: Sequence[str], found: Sources
) -> dict[str, JsonValue]:
    """*args* with each missing string field whose description lists values (``e.g. red,
    blue``, or quoted: ``'draft' to …, 'final' to …``) set to the one of them the user said
    (several said: left missing)."""
    props, _ = _schema_parts(tool)
    filled = dict(args)
    for name in missing:
        choice = _said_choice(props.get(name) or {}, name, found)
        if choice is not None:
            filled[name] = choice
    return filled


def fill_listed_options(
    tool: Tool[Any], args: Mapping[str, JsonValue], found: Sources
) -> dict[str, JsonValue]:
    """*args* with each optional string field left out whose description lists values set to
    the one of them the user said (*a final invoice* and ``e.g. 'draft', 'final'``): under said
    values, what the request chose among the tool's own options is not left to its default."""
    props, required = _schema_parts(tool)
    optional = [name for name in props if name not in required and name not in args]
    return fill_from_examples(tool, args, optional, found)


def _field_label(name: str) -> str:
    return " ".join(_words(name)) or name


def question(tool: Tool[Any], missing: Sequence[str], language: str = "en") -> str:
    """The question asking for *missing* arguments of a call of *tool*."""
    labels = [_field_label(name) for name in missing]
    does = " ".join(tool.description.split())
    if len(does) > 120:
        does = does[:117].rstrip() + "..."
    if language == "zh":
        return f"运行 {tool.name} 之前, 我还需要知道: {'、'.join(labels)}。请告诉我。"
    listed = labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + f" and {labels[-1]}"
    what = f" ({does.rstrip('.')})" if does else ""
    verb = "is it" if len(labels) == 1 else "are they"
    return f"Before I run {tool.name}{what}, I need the {listed}. What {verb}?"


def asked_for(state: ExecutionState, step: PlanStep) -> PlanStep | None:
    """The latest question asked for *step*'s arguments, if any."""
    prefix = f"ask_{step.id}_"
    asked = [s for s in state.steps if s.id.startswith(prefix) and s.type == "ask_user"]
    return asked[-1] if asked else None


@dataclass(frozen=True, slots=True)
class AskArguments(Stage):
    """A call's required arguments are not grounded: the question, asked as an ``ask_user``
    step placed before the call (which stays pending); the turn ends with it. The answer
    brings the flow back to the call (:data:`INTENT`)."""

    step: PlanStep
    missing: tuple[str, ...]

    async def run(self, turn: Turn) -> AsyncIterator[AgentEvent | End]:
        step, ctx = self.step, turn.ctx
        tool = turn.tools.get(step.tool_name)
        user = [ctx.text] + [m.content for m in reversed(turn.intake.window) if m.role == "user"]
        text = ctx.scrub(question(tool, self.missing, conversation_language(user)))
        state = turn.state
        ids = {s.id for s in state.steps}
        number = 1
        while f"ask_{step.id}_{number}" in ids:
            number += 1
        ask = PlanStep(
            id=f"ask_{step.id}_{number}", type="ask_user", title="Question", instruction=text
        )
        steps: list[PlanStep] = []
        for s in state.steps:
            if s.id == step.id:
                steps.append(ask)
            steps.append(s)
        if step.id not in ids:
            steps.append(ask)
        state = state.with_steps(tuple(steps), plan_id=state.plan_id).mark_step_running(ask.id)
        waiting = Waiting(question=text, intent=INTENT, pending_fields=self.missing)
        turn.flow.save(state.pause(waiting))
        ctx.note("GROUNDING", f"{step.tool_name}: asked for {', '.join(self.missing)}")
        if turn.trace is not None:
            turn.trace.event(semconv.QUESTION_EVENT, {"agentkit.step_id": ask.id})
        yield AskUserEvent(question=text, step_id=ask.id)
        yield End(text)


def ground_step(turn: Turn, step: PlanStep, tool: Tool[Any]) -> tuple[PlanStep, Grounding]:
    """*step* checked before it is proposed: filled from the answer to a question asked for it
    (this turn's message), placeholders of optional fields dropped; the step as it will run
    (its stored arguments updated when they changed) and the check."""
    flow = turn.flow
    args: dict[str, JsonValue] = dict(flow.tool_args(step))
    found = sources(turn)
    numbers = numbers_only(turn, tool)
    checked = check(tool, args, found, numbers=numbers)
    asked = asked_for(turn.state, step)
    if checked.missing and asked is not None and asked.status == "done":
        filled = fill_from_answer(tool, checked.args, checked.missing, turn.ctx.text)
        checked = check(tool, _valid_fill(turn, tool, checked.args, filled), found, numbers=numbers)
    if checked.missing:
        filled = fill_from_examples(tool, checked.args, checked.missing, found)
        checked = check(tool, _valid_fill(turn, tool, checked.args, filled), found, numbers=numbers)
    if turn.ctx.config.argument_values == "said":
        listed = fill_listed_options(tool, checked.args, found)
        checked = replace(checked, args=_valid_fill(turn, tool, checked.args, listed))
    if checked.args != args:
        state = flow.replace_args(turn.state, step.id, checked.args)
        turn.flow.save(state)
        step = turn.state.step(step.id)
        dropped = f"; dropped {', '.join(checked.dropped)}" if checked.dropped else ""
        turn.ctx.note("GROUNDING", f"{step.tool_name}: arguments updated{dropped}")
    return step, checked


def _valid_fill(
    turn: Turn, tool: Tool[Any], before: dict[str, JsonValue], filled: dict[str, JsonValue]
) -> dict[str, JsonValue]:
    """*filled*, less each filled field that makes the call invalid (it is asked again)."""
    result = dict(filled)
    for name in [n for n in filled if filled[n] != before.get(n)]:
        try:
            turn.tools.validate(tool.name, result)
        except ToolArgumentsError as error:
            if any(problem_field.split(".")[0] == name for problem_field, _ in error.problems):
                if name in before:
                    result[name] = before[name]
                else:
                    result.pop(name)
    return result
