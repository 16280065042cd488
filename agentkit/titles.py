"""The title a conversation gets from its first message.

The rule: **the last paragraph of the first message** — the text after its last blank line —
with whitespace collapsed, cut to :data:`TITLE_CHARS` characters (at a word boundary when
one is near, with an ellipsis). Why the last paragraph: clients put their own text *before*
the user's words, separated by a blank line (jupyter-ai prepends a ~300-character "System
note: When creating or editing Jupyter notebooks…" to the first prompt of each persona
process, and a recovery context that ends in "Current user message:"), so the user's own
words are what comes last. A message that is one paragraph is titled by its start, as
before.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["TITLE_CHARS", "conversation_title"]

#: the longest title derived from a message
TITLE_CHARS: Final = 60
_BLANK_LINE = re.compile(r"\n[ \t\r\f\v]*\n")


def conversation_title(text: str, limit: int = TITLE_CHARS) -> str:
    """The title for a conversation whose first message is *text* ("" for blank text)."""
    paragraphs = [" ".join(part.split()) for part in _BLANK_LINE.split(text)]
    words = next((part for part in reversed(paragraphs) if part), "")
    if len(words) <= limit:
        return words
    cut = words[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:.-") + "…"
