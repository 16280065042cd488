"""Fact checks: is a fact the model wrote into TaskState found in what it summarised?

A small model invents plausible facts ("the user lives in Berlin"). Every model-written
important fact is checked against its *source* — the transcript of the messages it
summarised and the TaskState it started from — and an ungrounded one is dropped and counted.

The rule (:func:`is_grounded`), deliberately simple and deterministic:

* a fact is split into *units*: Latin words of three letters or more that are not stop
  words, every token with a digit (a number, ``10%``, ``2026-03-14``), and every CJK
  character that is not a common function character (的, 了, 是, …);
* a number is found only as a number of the source, compared without thousands separators
  (``12,000`` = ``12000``); a number the source does not hold makes the fact ungrounded;
* a word is found when the source holds the same stem (one trailing ``ing``, ``ed``,
  ``es``, ``ly`` or ``s`` removed, then a final ``e``: trade, trades, traded, trading are
  one word); a CJK character when the source holds that character;
* the fact is grounded when every number is found and at least :data:`GROUNDED_SHARE` of all
  its units are; a fact with no unit at all (punctuation, stop words) is ungrounded.

Characters rather than words for Chinese because it has no spaces to find words by, and a
summariser rewrites 只做 BTC 和 ETH as 只交易 BTC、ETH — the characters survive, the
segmentation does not. The price: a fact made of common characters can pass by accident.
A fact equal (case-insensitively) to one the starting TaskState already holds is grounded by
that state (it was checked when it was written).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from agentkit import language
from agentkit.language import is_cjk

__all__ = ["GROUNDED_SHARE", "FactCheck", "Units", "ground_facts", "is_grounded", "source_units"]

#: the share of a fact's units the source must hold (every number must be there)
GROUNDED_SHARE = 0.8

_TOKEN = re.compile(r"[0-9][0-9,.:/%\-]*[0-9%]?|[^\W\d_]+", re.UNICODE)
_STOP_WORDS = frozenset(
    w for lang in language.LANGUAGES if not lang.unspaced for w in lang.fact_stop_words
)
_CJK_FUNCTION = frozenset(
    c for lang in language.LANGUAGES if lang.unspaced for w in lang.fact_stop_words for c in w
)
_SUFFIXES = ("ing", "ed", "es", "ly", "s")


def _number(token: str) -> str:
    return token.replace(",", "").rstrip(".")


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            word = word[: -len(suffix)]
            break
    return word[:-1] if len(word) > 3 and word.endswith("e") else word


@dataclass(frozen=True, slots=True)
class Units:
    """What a text is made of, for grounding: numbers, word stems, CJK characters."""

    numbers: frozenset[str]
    words: frozenset[str]
    chars: frozenset[str]

    @property
    def size(self) -> int:
        return len(self.numbers) + len(self.words) + len(self.chars)


@cache
def source_units(text: str) -> Units:
    """The units of *text* (see the module docstring); cached: one source, many facts."""
    numbers: set[str] = set()
    words: set[str] = set()
    chars: set[str] = set()
    for token in _TOKEN.findall(text.casefold()):
        if token[0].isdigit():
            number = _number(token)
            numbers.add(number)
            continue
        latin = "".join(char for char in token if not is_cjk(char))
        chars.update(char for char in token if is_cjk(char) and char not in _CJK_FUNCTION)
        if len(latin) >= 3 and latin not in _STOP_WORDS:
            words.add(_stem(latin))
    return Units(frozenset(numbers), frozenset(words), frozenset(chars))


def _plain(number: str) -> str:
    return number.rstrip("%")


def is_grounded(fact: str, source: str) -> bool:
    """Whether *fact* is grounded in *source* (the rule in the module docstring)."""
    found, wanted = source_units(source), source_units(fact)
    if wanted.size == 0:
        return False
    plain = {_plain(number) for number in found.numbers}
    if any(_plain(number) not in plain for number in wanted.numbers):
        return False
    hits = len(wanted.numbers) + len(wanted.words & found.words) + len(wanted.chars & found.chars)
    return hits >= GROUNDED_SHARE * wanted.size


@dataclass(frozen=True, slots=True)
class FactCheck:
    """Which model-written facts were kept (grounded) and which were dropped."""

    kept: tuple[str, ...]
    dropped: tuple[str, ...]


def ground_facts(facts: Iterable[str], source: str, known: Iterable[str] = ()) -> FactCheck:
    """Split *facts* into grounded and ungrounded ones against *source*; a fact equal to one
    of *known* (the starting TaskState's) is kept without a check."""
    already = {item.strip().casefold() for item in known}
    kept: list[str] = []
    dropped: list[str] = []
    for fact in facts:
        if fact.strip().casefold() in already or is_grounded(fact, source):
            kept.append(fact)
        else:
            dropped.append(fact)
    return FactCheck(tuple(kept), tuple(dropped))
