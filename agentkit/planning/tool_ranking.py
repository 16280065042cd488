"""Lexical ranking of an agent's tools for one request: the router's candidate stage.

A tool is known by what it says about itself: its name (``list_reminders`` → *list*, *reminder*),
its description, its argument names and its example requests (``@tool(examples=[…])``, or a
per-tool ``examples`` list in config for MCP tools). Each becomes a bag of terms, and a request
is scored against every tool with BM25-style weights whose document frequencies come from the
agent's own toolset, so a word every tool shares (*reminder* among reminder tools) counts
little and a word one tool owns counts a lot.

Terms: English words are case-folded and lightly stemmed (*reminders* → *reminder*, *listing* →
*list*); Chinese, written without spaces between words, becomes overlapping character
bigrams plus single characters at half weight (so 删除 matches 删掉 through 删), in pieces
split at very common characters (的, 我, 个 …) so that no bigram straddles two words. Numbers are
not terms: they are ids and amounts (``note-2``), not what a tool does.

Two languages, one vocabulary of actions: the generic verbs tools are made of — list/show/查看,
add/create/新建, delete/remove/删除, change/rename/修改, search/find/查找, save/remember/记住 — also
become an action term (``~list``, ``~add`` …) in either language, so 找 meets *find* and *show*
meets ``list_notes``. A question (*which …?*, *do I have …*, 哪些, 吗) counts as a *read* action
term, which counts only for a tool the request shares a content term with. Action terms rank
tools but never make a match on their own: a request must share a content term with some
tool, so "see you later" or 你能做什么 match nothing.

A tool's description is its own: a sentence or a bracket naming another tool (``list_notes
shows the ids``) is left out of its terms.

Nothing is learnt or downloaded: a tool added to the toolset is ranked at once.

The index is built once per registry (again when a tool is registered) and cached weakly;
ranking one request over ten tools takes well under a millisecond.
"""

from __future__ import annotations

import math
import re
import weakref
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from agentkit import language
from agentkit.tools import Tool, ToolRegistry

__all__ = [
    "RankedTool",
    "ToolIndex",
    "asks_for_change",
    "asks_to_read",
    "rank_tools",
    "reads_as_question",
    "says_change",
    "terms",
]

#: a word: Latin letters and digits, or a run of a script written without spaces
_TOKEN = re.compile(f"[a-z0-9]+|[{language.UNSPACED}]+")
_STOP_WORDS = frozenset(
    w for lang in language.LANGUAGES if not lang.unspaced for w in lang.stop_words
)
#: characters too common to tell tools apart on their own (their bigrams still count)
_COMMON_CHARS = "".join(
    sorted(c for lang in language.LANGUAGES if lang.unspaced for c in lang.stop_words)
)
_STOP_SPLIT = re.compile(f"[{re.escape(_COMMON_CHARS)}]+") if _COMMON_CHARS else None
#: how much each part of a tool's self-description weighs
_FIELD_WEIGHTS: Mapping[str, float] = {
    "name": 2.0,
    "example": 1.5,
    "description": 1.0,
    "argument": 0.75,
}
_UNIGRAM_WEIGHT = 0.5
_K1 = 1.2
#: generic actions (``~list``, ``~add`` …): each language's words for them (words written
#: without spaces are matched as substrings)
_ACTIONS: Mapping[str, tuple[frozenset[str], tuple[str, ...]]] = {
    action: (
        frozenset(w for lang in language.LANGUAGES if not lang.unspaced
                  for w in lang.actions.get(action, ())),
        tuple(w for lang in language.LANGUAGES if lang.unspaced
              for w in lang.actions.get(action, ())),
    )
    for action in dict.fromkeys(a for lang in language.LANGUAGES for a in lang.actions)
}  # fmt: skip
_ACTION_STEMS: Mapping[str, frozenset[str]] = {}  # filled below, once _stem exists
#: set phrases whose words say something else one by one ("get rid of" is no *get*)
_PHRASE_WORDS: Mapping[str, str] = {
    phrase: word for lang in language.LANGUAGES for phrase, word in lang.phrases.items()
}
_PHRASES = re.compile(r"\b(?:" + "|".join(map(re.escape, _PHRASE_WORDS)) + r")\b")
_READ = "~list"
#: a question reads: its opening words, or its end
_QUESTION = language.pattern("question")
#: "can you …" is a request, not a question
_CAN_YOU = language.pattern("request")


def _stem(word: str) -> str:
    """A light stem: *notes* → *note*, *listing* → *list*, *saved*/*saves*/*save* → *sav*."""
    if word.isdigit() or len(word) <= 3:
        return word
    stem = word
    for suffix, keep in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("es", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "es" and word[-3] not in "sxzh":
                break
            stem = word[: -len(suffix)] + keep
            break
    else:
        if word.endswith("s") and not word.endswith("ss"):
            stem = word[:-1]
    if stem == word and word.endswith("es") and not word.endswith("sses"):
        stem = word[:-1]
    if stem.endswith("e") and len(stem) > 3:
        stem = stem[:-1]
    return stem


def terms(text: str) -> dict[str, float]:
    """The weighted terms of *text*: stemmed English words, Chinese bigrams and characters,
    and the action terms (``~list``, ``~add`` …) its words stand for."""
    found: defaultdict[str, float] = defaultdict(float)
    folded = _PHRASES.sub(lambda m: _PHRASE_WORDS[m.group(0)], text.casefold().replace("_", " "))
    for token in _TOKEN.findall(folded):
        if language.has_unspaced(token):
            for action, (_, chinese) in _ACTIONS.items():
                if any(word in token for word in chinese):
                    found[action] = 1.0
            # common characters split a run into pieces, so no bigram straddles a word edge
            for piece in _STOP_SPLIT.split(token) if _STOP_SPLIT else [token]:
                for index in range(len(piece) - 1):
                    found[piece[index : index + 2]] += 1.0
                for char in piece:
                    found[char] += _UNIGRAM_WEIGHT
        elif token.isdigit():
            continue  # an id or an amount, not what a tool does
        else:
            stem = _stem(token)
            for action, english in _ACTION_STEMS.items():
                if stem in english:
                    found[action] = 1.0
            if token not in _STOP_WORDS:
                found[stem] += 1.0
    return dict(found)


_ACTION_STEMS = {
    action: frozenset(_stem(word) for word in english) for action, (english, _) in _ACTIONS.items()
}


def reads_as_question(text: str) -> bool:
    """*text* asks about something (*which …?*, 哪些, 吗) rather than asking for a change;
    "can you …" is a request, not a question."""
    asks = _QUESTION is not None and _QUESTION.search(text) is not None
    return asks and not (_CAN_YOU is not None and _CAN_YOU.search(text))


_CHANGES = ("~add", "~delete", "~update", "~save")


def asks_for_change(text: str) -> bool:
    """*text* says a change in so many words (add, delete, rename, save … 新建, 删除, 记住),
    and is not a question about one."""
    found = terms(text)
    return any(action in found for action in _CHANGES) and not reads_as_question(text)


def says_change(text: str) -> bool:
    """*text* names a change (add, delete, rename, save … 新建, 删除, 记住), question or not."""
    found = terms(text)
    return any(action in found for action in _CHANGES)


def asks_to_read(text: str) -> bool:
    """A question, or a request to see or find something that says no change."""
    found = terms(text)
    reading = _READ in found or "~search" in found
    return reads_as_question(text) or (reading and not asks_for_change(text))


def _request_terms(text: str) -> tuple[dict[str, float], bool]:
    """The request's terms, and whether its read term comes only from its being a question."""
    found = terms(text)
    implied = reads_as_question(text) and _READ not in found
    if implied:
        found[_READ] = 1.0
    return found, implied


def _own_words(description: str, others: Iterable[str]) -> str:
    """*description* without the brackets and sentences that name another tool."""
    named = [name for name in others if name]
    if not named:
        return description

    def names_another(part: str) -> bool:
        return any(name in part for name in named)

    kept = re.sub(
        r"\([^()]*\)", lambda m: "" if names_another(m.group(0)) else m.group(0), description
    )
    sentences = re.split(r"(?<=[.;!?\u3002\uff1b])\s*", kept)
    return " ".join(part for part in sentences if not names_another(part))


def _tool_terms(tool: Tool[Any], others: Iterable[str] = ()) -> dict[str, float]:
    """What *tool* says about itself, each part weighted by where it was said (*others*: the
    other tools' names, whose mentions in the description are not this tool's words)."""
    description = _own_words(tool.description, others)
    parts: list[tuple[str, str]] = [("name", tool.name), ("description", description)]
    properties = tool.json_schema().get("properties")
    if isinstance(properties, dict):
        for name, prop in properties.items():
            parts.append(("argument", name))
            if isinstance(prop, dict) and isinstance(prop.get("description"), str):
                parts.append(("argument", _own_words(str(prop["description"]), others)))
    parts.extend(("example", example) for example in tool.examples)
    bag: dict[str, float] = {}
    for field, text in parts:
        for term, count in terms(text).items():
            bag[term] = max(bag.get(term, 0.0), count * _FIELD_WEIGHTS[field])
    return bag


@dataclass(frozen=True)
class RankedTool:
    """One tool's lexical match with a request: ``score`` (0 = nothing in common) and the
    request's terms it matched (for the trace)."""

    name: str
    score: float
    matched: tuple[str, ...]


class ToolIndex:
    """The term bags of a registry's tools with their document frequencies."""

    def __init__(self, tools: Iterable[Tool[Any]]) -> None:
        listed = list(tools)
        names = [tool.name for tool in listed]
        self.bags = {
            tool.name: _tool_terms(tool, [name for name in names if name != tool.name])
            for tool in listed
        }
        frequency: Counter[str] = Counter()
        for bag in self.bags.values():
            frequency.update(bag.keys())
        total = len(self.bags)
        # BM25's idf, floored so that a term every tool has still counts a little
        self.idf = {
            term: max(math.log(1 + (total - seen + 0.5) / (seen + 0.5)), 0.05)
            for term, seen in frequency.items()
        }

    def rank(self, request: str) -> list[RankedTool]:
        """Every tool, best match first (ties keep the registry's order)."""
        asked, implied = _request_terms(request)
        content = [
            t for t in asked if not t.startswith("~") and any(t in b for b in self.bags.values())
        ]
        if not content:  # an action alone is no match: "see you later", 你能做什么
            asked = {}
        ranked: list[RankedTool] = []
        for name, bag in self.bags.items():
            score, matched = 0.0, []
            for term, weight in asked.items():
                have = bag.get(term, 0.0)
                if not have or term not in self.idf:
                    continue
                saturated = have * (_K1 + 1) / (have + _K1)
                score += self.idf[term] * saturated * min(weight, 2.0)
                matched.append(term)
            if implied and matched == [_READ]:  # a question alone: "what's your name?"
                score, matched = 0.0, []
            ranked.append(RankedTool(name=name, score=round(score, 4), matched=tuple(matched)))
        order = {name: index for index, name in enumerate(self.bags)}
        ranked.sort(key=lambda item: (-item.score, order[item.name]))
        return ranked


_INDEXES: weakref.WeakKeyDictionary[ToolRegistry, tuple[tuple[str, ...], ToolIndex]] = (
    weakref.WeakKeyDictionary()
)


def rank_tools(tools: ToolRegistry, request: str) -> list[RankedTool]:
    """The tools of *tools* ranked for *request*. The index is built once per registry and
    built again when a tool was registered since."""
    names = tools.names()
    cached = _INDEXES.get(tools)
    if cached is None or cached[0] != names:
        cached = (names, ToolIndex(tools.get(name) for name in names))
        _INDEXES[tools] = cached
    return cached[1].rank(request)
