"""A call's arguments filled from what the user answered or named.

Why: when the gate asks for a call's arguments, the user's answer must land in the field that
was asked for — not be re-judged as a guess — so a field is never asked twice in a row. One
field asked: it takes the answer without its filler (*it's …*, *call it …*, 叫…). Several:
the ``label value`` pairs whose labels name them (``key AKEY-… secret SKEY-…``), else as many
plain values as fields, in order; the rest is asked again. A field whose description lists
values (``e.g. red, blue``, or quoted) takes the one of them the user said.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import JsonValue

from agentkit import language
from agentkit.memory import ExecutionState, PlanStep
from agentkit.planning.grounding import Sources, is_placeholder, schema_parts
from agentkit.tools import Tool

__all__ = [
    "asked_for",
    "fill_from_answer",
    "fill_from_examples",
    "fill_listed_options",
    "labelled_values",
    "value_of",
]

#: ``label:value`` / ``label=value`` written without a space (not a URL's ``://``)
_LABELLED = re.compile(r"([^\W\d]+)[:=\uff1a](?!//)(.+)")
#: what separates an answer's words (full-width comma and semicolon included)
_SEPARATORS = re.compile(r"[\s,;\uff0c\uff1b]+")
#: what separates a list's items in an answer
_ITEMS = re.compile(
    r"\s*(?:[,;\uff0c\uff1b\u3001]"
    + "".join(
        f"|\\b{re.escape(lang.list_last.strip())}\\b"
        for lang in language.LANGUAGES
        if lang.list_last.strip().isalpha()
    )
    + r")\s*"
)
#: where a description starts listing example values: "e.g. red, blue", "such as …"
_EXAMPLES = re.compile(r"\b(?:e\.g\.|for example|such as|one of|like)\s*:?\s*(.+)", re.IGNORECASE)
#: a value a description quotes: ``'draft' to keep it, 'final' to send it``
_QUOTED = re.compile(r"""(?<!\w)['"\u2018\u201c]([^'"\u2019\u201d]{1,40})['"\u2019\u201d](?!\w)""")


def value_of(answer: str) -> str:
    """*answer* without the filler it opens with (*it's todo* → ``todo``, 叫买牛奶 →
    ``买牛奶``), its closing punctuation and its quotes."""
    text = answer.strip().rstrip(".!\u3002\uff01").strip()
    folded = text.casefold()
    for lang in language.LANGUAGES:
        for filler in sorted(lang.answer_fillers, key=len, reverse=True):
            if not folded.startswith(filler):
                continue
            rest = text[len(filler) :]
            if not lang.unspaced and rest[:1].isalnum():
                continue  # "its" is no filler of "itself"
            rest = rest.strip().lstrip(":\uff1a").strip()
            if rest:
                text = rest
                break
        else:
            continue
        break
    return text.strip("'\"`\u201c\u201d\u2018\u2019\u300c\u300d")


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
    text = value_of(value)
    if kind == "array":  # "red, blue" / "red and blue" / 红、蓝
        items = schema.get("items")
        item_schema = items if isinstance(items, Mapping) else {}
        parts = [p for p in _ITEMS.split(text) if p.strip()]
        return [_coerce(part, item_schema) for part in parts]
    if kind in ("integer", "number"):
        number = language.parse_number(text)
        if number is not None:
            return int(number) if kind == "integer" and number.is_integer() else number
    if kind == "boolean":
        folded = language.normalize(text)
        if folded in language.merged("confirmations") | {"true"}:
            return True
        if folded in language.merged("refusals") | {"false"}:
            return False
    return text


def fill_from_answer(
    tool: Tool[Any], args: Mapping[str, JsonValue], missing: Sequence[str], answer: str
) -> dict[str, JsonValue]:
    """*args* with the *missing* fields filled from the user's *answer* (module docstring).
    A field the answer does not give stays as it was."""
    props, _ = schema_parts(tool)
    filled = dict(args)
    words = _label_pairs(answer)
    texts = [w for _, w in words]
    shares: dict[str, int] = {}
    for name in missing:
        for word in set(language.words(name)):
            shares[word] = shares.get(word, 0) + 1
    offers: list[tuple[float, str, int]] = []
    for name in missing:
        labels = set(language.words(name))
        for position, word in words:
            score = sum(1.0 / shares[w] for w in language.words(word) if w in labels)
            if score and position + 1 < len(texts):
                value = position + 1
                while value < len(texts) and texts[value].casefold() in language.merged("links"):
                    value += 1
                if value < len(texts) and not (set(language.words(texts[value])) & labels):
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
    elif len(missing) > 1 and not given and len(texts) == len(missing):
        for name, text in zip(missing, texts, strict=True):  # plain values, in order
            filled[name] = _coerce(text, props.get(name) or {})
    return filled


def labelled_values(tool: Tool[Any], text: str) -> dict[str, str]:
    """The string arguments of *tool* that *text* names and gives a value to: the word after
    the argument's name (*code to 1234*: ``code`` is ``1234``; a link word — *to*, *is*, *=* —
    skipped), else, when the next word names another argument or is a function word, the word
    before it (*the front door code*: ``door`` is ``front``). The user's own labelled words."""
    props, _ = schema_parts(tool)
    fields = {
        name: set(language.words(name)) for name, schema in props.items() if _free_string(schema)
    }
    if not fields:
        return {}
    every_label = set().union(*fields.values())
    links = language.merged("links")
    edges = language.merged("function_words")
    words = [w.strip(language.EDGE_PUNCTUATION) for w in text.split()]
    folded = [language.normalize(w) for w in words]
    found: dict[str, str] = {}
    for name, labels in fields.items():
        for at, word in enumerate(folded):
            if word not in labels:
                continue
            after = at + 1
            while after < len(folded) and folded[after] in links:
                after += 1
            if after < len(folded) and folded[after] not in every_label | edges and words[after]:
                found[name] = words[after]
                break
            before = at - 1
            if before >= 0 and folded[before] not in every_label | edges | links and words[before]:
                found[name] = words[before]
                break
    values = list(found.values())
    return {k: v for k, v in found.items() if values.count(v) == 1}  # one word, one field


def _free_string(schema: Mapping[str, Any]) -> bool:
    return schema.get("type") == "string" and not {"enum", "pattern", "format"} & set(schema)


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
    folded = {language.normalize(o) for o in said}
    return said[0] if len(folded) == 1 else None


def fill_from_examples(
    tool: Tool[Any], args: Mapping[str, JsonValue], missing: Sequence[str], found: Sources
) -> dict[str, JsonValue]:
    """*args* with each missing string field whose description lists values set to the one
    of them the user said (several said: left missing)."""
    props, _ = schema_parts(tool)
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
    the one of them the user said (*a final invoice* and ``e.g. 'draft', 'final'``)."""
    props, required = schema_parts(tool)
    optional = [name for name in props if name not in required and name not in args]
    return fill_from_examples(tool, args, optional, found)


def asked_for(state: ExecutionState, step: PlanStep) -> PlanStep | None:
    """The latest question asked for *step*'s arguments, if any."""
    prefix = f"ask_{step.id}_"
    asked = [s for s in state.steps if s.id.startswith(prefix) and s.type == "ask_user"]
    return asked[-1] if asked else None
