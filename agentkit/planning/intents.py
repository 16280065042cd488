"""Short replies recognised in code, without a model call (seed 002, done differently).

The seed's reset rule ran before its resume check, so "好了" ("done") while a question was
pending threw the waiting state away. Here the pending question is checked first, with the
word lists of :mod:`agentkit.language`; the reset rule (:func:`is_retry`,
:func:`is_live_state_request`) only applies when nothing is pending.

Matching is on a normalised form: case-folded, surrounding whitespace and punctuation removed.
Confirmations and refusals must be the whole message ("yes", "好的!"); retry words, switch
phrases and live-state keywords may appear anywhere in it.

The live-state rule is generic: no domain's words live here. A request is about live state
(state that can change outside the chat) when it contains one of the *agent's own* keywords,
``planner.live_state_keywords`` in its config.json (or when the optional classify call says
so); the planner then re-runs the agent's ``live_state`` tools before planning.

Small talk (:func:`is_small_talk`) is a message made only of greetings, thanks, farewells,
"how are you" and questions about the assistant itself (*who are you*, 你能做什么), in either
language: such a message needs no tool, so the router answers it without a model call. The
phrases are the conversation's, never a domain's.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from agentkit import language

__all__ = [
    "CONFIRMATIONS",
    "REFUSALS",
    "RETRY_WORDS",
    "SWITCH_PHRASES",
    "is_confirmation",
    "is_live_state_request",
    "is_refusal",
    "is_retry",
    "is_small_talk",
    "is_switch",
    "normalize",
]

CONFIRMATIONS: frozenset[str] = language.merged("confirmations")
REFUSALS: frozenset[str] = language.merged("refusals")
RETRY_WORDS: tuple[str, ...] = tuple(
    word for lang in language.LANGUAGES for word in lang.retry_words
)
SWITCH_PHRASES: tuple[str, ...] = tuple(
    phrase for lang in language.LANGUAGES for phrase in lang.switch_phrases
)
_EDGE = re.compile(r"^[\s\W_]+|[\s\W_]+$")
_SPACES = re.compile(r"\s+")


def normalize(text: str) -> str:
    """Case-folded, inner whitespace collapsed, leading/trailing punctuation removed."""
    return _SPACES.sub(" ", _EDGE.sub("", text.casefold()))


def is_confirmation(text: str) -> bool:
    return normalize(text) in CONFIRMATIONS


def is_refusal(text: str) -> bool:
    return normalize(text) in REFUSALS


def _contains(text: str, words: tuple[str, ...]) -> bool:
    folded = normalize(text)
    return any(word in folded for word in words)


def is_retry(text: str) -> bool:
    return _contains(text, RETRY_WORDS)


def is_switch(text: str) -> bool:
    """An explicit change of subject: a pending question is abandoned, not answered."""
    return _contains(text, SWITCH_PHRASES) and not is_refusal(text)


def is_live_state_request(text: str, keywords: Iterable[str] = ()) -> bool:
    """True when *text* contains one of *keywords* (the agent's live-state keywords)."""
    words = _normalized(tuple(keywords))
    return bool(words) and _contains(text, words)


@functools.lru_cache(maxsize=64)
def _normalized(keywords: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(word for word in (normalize(keyword) for keyword in keywords) if word)


def _small_talk() -> re.Pattern[str]:
    """The phrases small talk is made of, every language's (longest first; a language
    written with spaces needs word boundaries around its phrases)."""
    spaced = [p for lang in language.LANGUAGES if not lang.unspaced for p in lang.small_talk]
    unspaced = [p for lang in language.LANGUAGES if lang.unspaced for p in lang.small_talk]
    parts = []
    if spaced:
        parts.append(r"\b(?:" + "|".join(sorted(spaced, key=len, reverse=True)) + r")\b")
    parts += sorted(unspaced, key=len, reverse=True)
    return re.compile("(?:" + "|".join(parts) + ")")


_SMALL_TALK = _small_talk()
_LEFTOVER = re.compile(r"[\s\W_]+")


def is_small_talk(text: str) -> bool:
    """True when *text* is only greetings, thanks, farewells, "how are you" or questions about
    the assistant itself, in English or Chinese: it needs no tool."""
    folded = normalize(text).replace("\u2019", "'")
    if not folded:
        return False
    rest = _SMALL_TALK.sub(" ", folded)
    return not _LEFTOVER.sub("", rest)
