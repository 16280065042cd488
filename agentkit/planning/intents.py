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

Small talk (:func:`is_small_talk`) is a message made only of greetings, thanks, farewells,
"how are you" and questions about the assistant itself (*who are you*, 你能做什么), in either
language: such a message needs no tool, so the router answers it without a model call. The
phrases are the conversation's, never a domain's.
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
    "is_small_talk",
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


#: the phrases small talk is made of (matched on the normalised text, longest first)
_SMALL_TALK_EN = (
    r"good (?:morning|afternoon|evening|night|day)", r"morning", r"evening", r"hi+", r"hello+",
    r"hey+", r"hiya", r"howdy", r"yo", r"greetings", r"what'?s up", r"sup",
    r"thanks?(?: you)?(?: (?:so|very) much| a lot| a bunch| again)?", r"thx", r"ty",
    r"cheers", r"(?:i )?appreciate (?:it|that|your help)", r"much appreciated",
    r"(?:good)?bye(?: bye)?", r"see (?:you|ya)(?: later| soon| around| tomorrow)?",
    r"later", r"take care", r"have a (?:nice|good|great) (?:day|evening|night|one|weekend)",
    r"nice to (?:meet|see) you", r"how (?:are|r) (?:you|u)(?: doing)?(?: today)?",
    r"how'?s it going", r"how is it going", r"how have you been",
    r"who (?:are|made|built|created) you", r"what (?:are|is) your (?:name|purpose|job)",
    r"what'?s your (?:name|purpose|job)", r"what are you",
    r"what kind of (?:assistant|bot|agent) are you",
    r"what (?:can|do) you do(?: for me)?", r"what are you (?:able to do|for|good at)",
    r"what can you help(?: me)? with", r"how can you help(?: me)?", r"what do you do",
    r"are you (?:a |an )?(?:bot|robot|human|ai|person|real)",
    r"ok(?:ay)?", r"cool", r"great", r"awesome", r"perfect", r"nice", r"alright", r"all right",
    r"that'?s (?:all|it|great|fine|good)", r"for now", r"no(?:thing)? (?:else|more)",
    r"you", r"there", r"again", r"too", r"friend", r"buddy", r"everyone", r"all", r"and",
    r"oh", r"ah", r"well", r"so", r"really", r"very much", r"today",
)  # fmt: skip
_SMALL_TALK_ZH = (
    "你好", "您好", "嗨", "哈喽", "哈啰", "早上好", "早安", "上午好", "中午好", "下午好",
    "晚上好", "晚安", "早", "谢谢你的帮助", "谢谢", "多谢", "谢啦", "感谢", "辛苦了",
    "再见", "拜拜", "回头见", "明天见", "你是谁", "你叫什么名字", "你叫什么", "你是做什么的",
    "你是什么", "你能做什么", "你会做什么", "你能帮我做什么", "你可以做什么", "你能干什么",
    "你会哪些", "你是机器人吗", "你是人吗", "今天怎么样", "最近怎么样", "怎么样", "你好吗",
    "好的", "好", "没事了", "就这样", "你", "啊", "呀", "呢", "吧", "哦", "嘛", "啦", "了", "哈",
)  # fmt: skip
_SMALL_TALK = re.compile(
    r"(?:\b(?:"
    + "|".join(sorted(_SMALL_TALK_EN, key=len, reverse=True))
    + r")\b"
    + "|"
    + "|".join(sorted(_SMALL_TALK_ZH, key=len, reverse=True))
    + ")"
)
_LEFTOVER = re.compile(r"[\s\W_]+")


def is_small_talk(text: str) -> bool:
    """True when *text* is only greetings, thanks, farewells, "how are you" or questions about
    the assistant itself, in English or Chinese: it needs no tool."""
    folded = normalize(text).replace("\u2019", "'")
    if not folded:
        return False
    rest = _SMALL_TALK.sub(" ", folded)
    return not _LEFTOVER.sub("", rest)
