# ruff: noqa: RUF001, RUF002 - CJK punctuation is what this module reads; word lists
"""Extractive memory: the facts the user stated, picked by rule, without a model call.

The baseline every compression study compares against, and the strategy that works on a
small local model: :func:`extract_facts` reads the *user's* messages sentence by sentence
and keeps a sentence as an important fact when it states something durable:

* a quantity with a unit or a currency (``12,000 EUR``, ``3000 USDT``, ``10%``, ``$40``);
* a date (``March 14``, ``2026-03-14``, ``14/3``, ``3月14日``, ``2026年``);
* a name: a capitalised word inside an English sentence (a first word only when it is not
  a common word such as "The" or "Also"), an all-caps or CamelCase token (``NASA``,
  ``GitHub``), any Latin word in a Chinese sentence;
* a quoted value (``"blue-green"``, 「蓝绿」);
* a constraint or a preference: no, not, never, must, only, always, avoid, without, don't,
  I prefer, I like, I'd rather …; 不, 别, 必须, 一定, 只, 禁止, 我喜欢, 偏好 ….

Questions (a sentence ending in ``?``/``？`` or 吗/呢) state nothing and are skipped. A
sentence with a key-like token has it masked (``****abcd``, as everywhere), the secret
values the caller knows are scrubbed, and a sentence that still names a credential ("my
password is …") is dropped: extractive memory never keeps a secret.

Each fact keeps the ids of the messages it came from (:class:`ExtractedFact`); the same
sentence said twice is one fact with both ids. :func:`select_facts` merges them into the
facts TaskState already holds, de-duplicated (a fact another one contains is dropped), and
bounded by a fact count and a token budget: past either, the oldest facts go first.
:func:`latest_goal` is the goal: the latest user sentence that asks for something ("I need
…", "please …", "help me …", 我想, 帮我, 请 …), "" when none does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from agentkit import language
from agentkit.calls.secrets import mask_value
from agentkit.language import is_cjk
from agentkit.memory.task_state import FactSource, looks_secret
from agentkit.memory.tokens import TokenEstimator
from agentkit.types import Message

__all__ = [
    "MAX_FACT_CHARS",
    "ExtractedFact",
    "extract_facts",
    "latest_goal",
    "select_facts",
    "sentences",
    "states_fact",
]

#: a longer sentence is cut at a clause boundary (or this many characters)
MAX_FACT_CHARS = 240

_SENTENCE_END = re.compile(r"(?<=[.!?;。！？；])\s+|(?<=[。！？；])|\n+")
_CLAUSE = re.compile(r"(?<=[,，、:：])\s*")
_UNIT_AFTER = rf"(?:%|‰|[A-Za-z]{{1,12}}\b|[{language.UNSPACED}])"
_QUANTITY = re.compile(
    rf"(?:[$€£¥₹]\s?\d[\d,.]*|\d[\d,.]*\s?(?:k|m|bn)?\s?{_UNIT_AFTER})", re.IGNORECASE
)
_NUMERIC_DATE = r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b"
_DATE = re.compile(
    "|".join([_NUMERIC_DATE, *(f"(?:{lang.date})" for lang in language.LANGUAGES if lang.date)]),
    re.IGNORECASE,
)
_QUOTED = re.compile(r"\"[^\"]{1,80}\"|“[^”]{1,80}”|「[^」]{1,80}」|『[^』]{1,80}』|'[^']{2,80}'")
_CONSTRAINT = language.pattern("constraint")
_GOAL = language.pattern("goal")
_LEADING_FILLER = re.compile(
    "^(?:" + "|".join(f"(?:{lang.leading_filler})" for lang in language.LANGUAGES
                      if lang.leading_filler) + ")+",
    re.IGNORECASE,
)  # fmt: skip
_QUESTION_END = language.pattern("question_end")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'’\-]*")
#: capitalised first words that are not names
_COMMON_FIRST = language.merged("common_first_words")
_KEY_LIKE = (
    re.compile(r"\b(?:sk|pk|rk|ak)[-_][A-Za-z0-9_-]{12,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\b(?:0x)?[0-9a-fA-F]{32,}\b"),
    re.compile(r"\b(?=[A-Za-z0-9+/=]*\d)(?=[A-Za-z0-9+/=]*[A-Za-z])[A-Za-z0-9+/=]{32,}"),
)


@dataclass(frozen=True, slots=True)
class ExtractedFact:
    """One fact the user stated, and the ids of the messages that stated it."""

    text: str
    message_ids: tuple[str, ...] = ()

    def source(self) -> FactSource:
        return FactSource(fact=self.text, message_ids=self.message_ids)


def _has_cjk(text: str) -> bool:
    return any(is_cjk(char) for char in text)


def sentences(text: str) -> list[str]:
    """*text* cut into sentences (and an over-long sentence into clauses), trimmed."""
    pieces: list[str] = []
    for raw in _SENTENCE_END.split(text):
        sentence = raw.strip()
        if not sentence:
            continue
        if len(sentence) <= MAX_FACT_CHARS:
            pieces.append(sentence)
            continue
        current = ""
        for clause in _CLAUSE.split(sentence):
            if current and len(current) + len(clause) > MAX_FACT_CHARS:
                pieces.append(current.strip())
                current = ""
            current += clause
        if current.strip():
            pieces.append(current.strip()[:MAX_FACT_CHARS])
    return pieces


def _is_question(sentence: str) -> bool:
    stripped = sentence.rstrip()
    return stripped.endswith(("?", "？")) or bool(_QUESTION_END and _QUESTION_END.search(stripped))


def _has_name(sentence: str) -> bool:
    words = _WORD.findall(sentence)
    if _has_cjk(sentence):
        return any(len(word) >= 2 for word in words)
    for index, word in enumerate(words):
        if word == "I" or word.startswith(("I'", "I’")) or not word[0].isupper():
            continue  # I, I'd, I'm: not names
        if len(word) >= 2 and (word.isupper() or any(c.isupper() for c in word[1:])):
            return True  # NASA, GitHub
        if index > 0 or word.casefold() not in _COMMON_FIRST:
            return True
    return False


def states_fact(sentence: str) -> bool:
    """Whether a user *sentence* states a durable fact (the rules in the module docstring)."""
    if _is_question(sentence):
        return False
    if _QUANTITY.search(sentence) or _DATE.search(sentence) or _QUOTED.search(sentence):
        return True
    if _CONSTRAINT is not None and _CONSTRAINT.search(sentence):
        return True
    return _has_name(sentence)


def _masked(sentence: str, scrub: Callable[[str], str] | None) -> str | None:
    """*sentence* with key-like tokens masked and known secrets scrubbed; None if it still
    names a credential."""
    text = scrub(sentence) if scrub is not None else sentence
    for pattern in _KEY_LIKE:
        text = pattern.sub(lambda found: mask_value(found.group(0)), text)
    return None if looks_secret(text) else text


def _clean(sentence: str) -> str:
    text = _LEADING_FILLER.sub("", sentence).strip()
    text = text.rstrip("。.!！;；")
    return " ".join(text.split())


def extract_facts(
    messages: Iterable[Message], *, scrub: Callable[[str], str] | None = None
) -> list[ExtractedFact]:
    """The facts the user stated in *messages*, oldest first, one per distinct sentence
    (its message ids merged). *scrub*: removes the secret values the caller knows."""
    found: dict[str, ExtractedFact] = {}
    for message in messages:
        if message.role != "user":
            continue
        for sentence in sentences(message.content):
            if not states_fact(sentence):
                continue
            masked = _masked(sentence, scrub)
            if masked is None:
                continue
            text = _clean(masked)
            if not text:
                continue
            key = text.casefold()
            earlier = found.get(key)
            ids = earlier.message_ids if earlier is not None else ()
            if message.message_id not in ids:
                ids = (*ids, message.message_id)
            found[key] = ExtractedFact(text, ids)
    return list(found.values())


def latest_goal(messages: Sequence[Message], *, scrub: Callable[[str], str] | None = None) -> str:
    """The latest user sentence that asks for something (see the module docstring), or ""."""
    for message in reversed(messages):
        if message.role != "user":
            continue
        for sentence in reversed(sentences(message.content)):
            if _GOAL is not None and _GOAL.search(sentence):
                masked = _masked(sentence, scrub)
                if masked is not None and _clean(masked):
                    return _clean(masked).rstrip("?？")
    return ""


def _contains(outer: str, inner: str) -> bool:
    return inner.casefold() in outer.casefold()


def select_facts(
    existing: Sequence[ExtractedFact],
    new: Sequence[ExtractedFact],
    *,
    max_facts: int,
    max_tokens: int,
    estimate: TokenEstimator,
) -> list[ExtractedFact]:
    """*existing* then *new*, de-duplicated and bounded (see the module docstring)."""
    merged: list[ExtractedFact] = []
    for fact in (*existing, *new):
        if not fact.text.strip():
            continue
        same = next((i for i, kept in enumerate(merged) if _contains(kept.text, fact.text)), None)
        if same is not None:  # already said (or said more fully): one fact, both sources
            kept = merged[same]
            ids = (*kept.message_ids, *(m for m in fact.message_ids if m not in kept.message_ids))
            merged[same] = ExtractedFact(kept.text, ids)
            continue
        wider = [i for i, kept in enumerate(merged) if _contains(fact.text, kept.text)]
        ids = fact.message_ids
        for index in reversed(wider):  # this one says more: it replaces them
            earlier = merged.pop(index).message_ids
            ids = (*earlier, *(m for m in ids if m not in earlier))
        merged.append(ExtractedFact(fact.text, ids))
    merged = merged[-max_facts:]
    while len(merged) > 1 and sum(estimate(fact.text) for fact in merged) > max_tokens:
        merged.pop(0)
    if merged and estimate(merged[0].text) > max_tokens:
        merged.pop(0)
    return merged
