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
split at very common characters (的, 我, 个 …) so that no bigram straddles two words. Nothing is
learnt or downloaded: a tool added to the toolset is ranked at once.

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

from agentkit.tools import Tool, ToolRegistry

__all__ = ["RankedTool", "ToolIndex", "rank_tools", "terms"]

_TOKEN = re.compile(r"[a-z0-9]+|[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
#: English words that say nothing about which tool is meant
_STOP_WORDS = frozenset(
    """a an the and or but of to for from in on at by with about as into than then
    i me my mine we our us you your it its this that these those there here
    is are was were be been being am do does did done have has had having
    can could would should will shall may might must please pls kindly just also
    what which who whom whose when where why how all any some each every no not
    so if very really too now up out get got let lets make s t re ve ll d
    e g eg id ids new one returns return optional""".split()  # noqa: SIM905 - a word list
)
#: Chinese characters too common to tell tools apart on their own (their bigrams still count)
_STOP_CHARS = "的了是我你他她它们吗呢吧啊呀哦嗯好一下个有在和与或请帮把这那些么什也都就要给看"
_STOP_SPLIT = re.compile(f"[{_STOP_CHARS}]+")
#: how much each part of a tool's self-description weighs
_FIELD_WEIGHTS: Mapping[str, float] = {
    "name": 2.0,
    "example": 1.5,
    "description": 1.0,
    "argument": 0.75,
}
_UNIGRAM_WEIGHT = 0.5
_K1 = 1.2


def _stem(word: str) -> str:
    if word.isdigit() or len(word) <= 3:
        return word
    for suffix, keep in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("es", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "es" and word[-3] not in "sxzh":
                break
            return word[: -len(suffix)] + keep
    if word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def terms(text: str) -> dict[str, float]:
    """The weighted terms of *text*: stemmed English words, Chinese bigrams and characters."""
    found: defaultdict[str, float] = defaultdict(float)
    for token in _TOKEN.findall(text.casefold().replace("_", " ")):
        if _HAN.match(token):
            # common characters split a run into pieces, so no bigram straddles a word edge
            for piece in _STOP_SPLIT.split(token):
                for index in range(len(piece) - 1):
                    found[piece[index : index + 2]] += 1.0
                for char in piece:
                    found[char] += _UNIGRAM_WEIGHT
        elif token not in _STOP_WORDS:
            found[_stem(token)] += 1.0
    return dict(found)


def _tool_terms(tool: Tool[Any]) -> dict[str, float]:
    """What *tool* says about itself, each part weighted by where it was said."""
    parts: list[tuple[str, str]] = [("name", tool.name), ("description", tool.description)]
    properties = tool.json_schema().get("properties")
    if isinstance(properties, dict):
        for name, prop in properties.items():
            parts.append(("argument", name))
            if isinstance(prop, dict) and isinstance(prop.get("description"), str):
                parts.append(("argument", str(prop["description"])))
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
        self.bags = {tool.name: _tool_terms(tool) for tool in tools}
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
        asked = terms(request)
        ranked: list[RankedTool] = []
        for name, bag in self.bags.items():
            score, matched = 0.0, []
            for term, weight in asked.items():
                have = bag.get(term, 0.0)
                if not have:
                    continue
                saturated = have * (_K1 + 1) / (have + _K1)
                score += self.idf[term] * saturated * min(weight, 2.0)
                matched.append(term)
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
