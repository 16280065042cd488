"""Language: the one home of what agentkit knows about words.

Tokens and spans (languages written without spaces included), numbers (digits, words to the
millions, Chinese numerals, units, percents, lists), stop words and the other word lists,
language detection, and the texts agentkit says to the user (questions, consents) as
templates per language. Each language is one file (:mod:`agentkit.language.en`,
:mod:`agentkit.language.zh`) holding a :class:`Language`; adding a language is adding one
file. No word list, stop list or script range lives anywhere else in agentkit (a test checks).
"""

from __future__ import annotations

from agentkit.language._lang import Language
from agentkit.language._numbers import numbers_in, parse_number
from agentkit.language._registry import LANGUAGES, language, merged, merged_map, pattern
from agentkit.language._script import (
    EDGE_PUNCTUATION,
    QUOTES,
    UNSPACED,
    count_cjk,
    detect,
    has_unspaced,
    is_cjk,
    normalize,
    spans,
    tokens,
    unspaced_runs,
    words,
)
from agentkit.language._texts import (
    answer_line,
    ask_arguments,
    consent,
    field_label,
    listed,
    which_tool,
)

__all__ = [
    "EDGE_PUNCTUATION",
    "LANGUAGES",
    "QUOTES",
    "UNSPACED",
    "Language",
    "answer_line",
    "ask_arguments",
    "consent",
    "count_cjk",
    "detect",
    "field_label",
    "has_unspaced",
    "is_cjk",
    "language",
    "listed",
    "merged",
    "merged_map",
    "normalize",
    "numbers_in",
    "parse_number",
    "pattern",
    "spans",
    "tokens",
    "unspaced_runs",
    "which_tool",
    "words",
]
