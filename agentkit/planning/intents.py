"""Short replies recognised in code, without a model call (seed 002, done differently).

The seed's reset rule ran before its resume check, so "好了" ("done") while a question was
pending threw the waiting state away. Here the pending question is checked first, with these
word lists; the reset rule (:func:`is_retry`, :func:`is_live_state_request`) only applies when
nothing is pending.

Matching is on a normalised form: case-folded, surrounding whitespace and punctuation removed.
Confirmations and refusals must be the whole message ("yes", "好的!"); retry words, switch
phrases and live-state keywords may appear anywhere in it.

The live-state rule is generic: no domain's words live here. A request is about live state
(state that can change outside the chat) when it contains one of the *agent's own* keywords,
``planner.live_state_keywords`` in its config.json (or when the optional classify call says
so); the planner then re-runs the agent's ``live_state`` tools before planning.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

__all__ = [
    "CONFIRMATIONS",
    "REFUSALS",
    "RETRY_WORDS",
    "SWITCH_PHRASES",
    "is_confirmation",
    "is_live_state_request",
    "is_refusal",
    "is_retry",
    "is_switch",
    "normalize",
]

CONFIRMATIONS: frozenset[str] = frozenset(
    {
        "是", "是的", "好", "好的", "好了", "对", "对的", "确认", "继续", "可以", "行",
        "yes", "y", "ok", "okay", "sure", "go ahead", "confirm", "yes please", "do it",
    }
)  # fmt: skip
REFUSALS: frozenset[str] = frozenset(
    {
        "不", "不要", "不用", "先不用", "取消", "算了", "别",
        "no", "n", "nope", "cancel", "stop", "don't", "dont", "no thanks",
    }
)  # fmt: skip
RETRY_WORDS: tuple[str, ...] = (
    "再试", "重试", "重新", "retry", "try again", "start over", "from scratch",
)  # fmt: skip
SWITCH_PHRASES: tuple[str, ...] = (
    "算了", "换个话题", "换个问题", "新任务", "never mind", "nevermind", "forget it",
    "new task", "something else", "instead",
)  # fmt: skip
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
