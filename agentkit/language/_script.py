"""Scripts, tokens and spans: how text is cut into words, in languages written with spaces and
without them (Chinese and Japanese), and which language a conversation is in.

Why one module: a value said by the user is found by the same cut that the tool ranking and
the fact check use, so "said" means one thing everywhere.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence

__all__ = [
    "EDGE_PUNCTUATION",
    "QUOTES",
    "UNSPACED",
    "count_cjk",
    "detect",
    "has_unspaced",
    "is_cjk",
    "normalize",
    "spans",
    "tokens",
    "unspaced_runs",
    "words",
]

#: letters of scripts written without spaces between words: kana (Japanese), CJK ideographs
UNSPACED = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_UNSPACED_CHAR = re.compile(f"[{UNSPACED}]")
_UNSPACED_RUN = re.compile(f"[{UNSPACED}]+")
#: every CJK block (radicals, punctuation, compatibility forms too): one token each
_CJK_RANGES = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x2E80, 0x2FDF),  # CJK radicals, Kangxi
    (0x3000, 0x303F),  # CJK symbols and punctuation
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3100, 0x31FF),  # Bopomofo, Hangul compatibility, Katakana extensions
    (0x3200, 0x4DBF),  # enclosed CJK, compatibility, extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xAC00, 0xD7AF),  # Hangul syllables
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF00, 0xFFEF),  # half-width and full-width forms
    (0x20000, 0x3FFFF),  # extensions B and later
)
#: a word: letters and digits (``_`` apart)
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
#: punctuation stripped from the edges of a value (full-width forms included)
EDGE_PUNCTUATION = (
    ".,;:!?\"'`()[]{}<>\u201c\u201d\u2018\u2019\u3002\uff0c\uff1b\uff1a\uff01\uff1f\u3001"
)
#: the quotes that open or close a quoted value
QUOTES = frozenset("'\"`\u201c\u201d\u2018\u2019\u300c\u300d")
_POSSESSIVE = re.compile(r"['\u2019]s$")
#: the longest run of an unspaced script offered as one value
_UNSPACED_SPAN = 8


_CJK_CHAR = re.compile("[" + "".join(f"{chr(low)}-{chr(high)}" for low, high in _CJK_RANGES) + "]")


def count_cjk(text: str) -> int:
    """How many characters of *text* are in a CJK block (one token each in an estimate)."""
    return 0 if text.isascii() else len(_CJK_CHAR.findall(text))


def is_cjk(char: str) -> bool:
    """*char* is in a CJK block (for token estimates: one token each)."""
    code = ord(char)
    return any(low <= code <= high for low, high in _CJK_RANGES)


def has_unspaced(text: str) -> bool:
    """*text* holds letters of a script written without spaces."""
    return _UNSPACED_CHAR.search(text) is not None


def unspaced_runs(text: str) -> list[str]:
    """The runs of *text* written without spaces."""
    return _UNSPACED_RUN.findall(text)


def normalize(text: str) -> str:
    """NFKC, case-folded, whitespace collapsed: the form values are compared in."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def tokens(text: str) -> list[str]:
    """The words of *text* as written (letters and digits; an unspaced run is one token)."""
    return _TOKEN.findall(text)


def words(name: str) -> list[str]:
    """``api_key`` / ``apiKey`` / ``api-key`` → ``["api", "key"]`` (any text's words,
    case-folded)."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name)
    return [w for w in re.split(r"[\W_]+", spaced.casefold()) if w]


def detect(texts: Sequence[str]) -> str:
    """``zh`` when the latest text with letters in it is mostly written without spaces,
    else ``en`` (a bare ``2`` or ``?`` has no language: an earlier text says it)."""
    for text in texts:
        letters = [c for c in text if c.isalpha()]
        if not letters:
            continue
        unspaced = sum(1 for c in letters if _UNSPACED_CHAR.match(c))
        return "zh" if unspaced * 2 >= len(letters) else "en"
    return "en"


def spans(text: str, max_words: int, function_words: Iterable[str]) -> list[str]:
    """Runs of up to *max_words* words of *text* as written (edge punctuation off; none starts
    or ends with a function word, none crosses a quote: *'Acme Ltd.' since* is no value; a
    possessive also without its *'s*), and the runs of up to eight characters inside its
    unspaced runs."""
    edge_words = frozenset(function_words)
    split = text.split()
    edges = [normalize(word.strip(EDGE_PUNCTUATION)) in edge_words for word in split]
    opens = [word[0] in QUOTES for word in split]
    closes = [word.rstrip(".,;:!?")[-1:] in QUOTES for word in split]
    found: list[str] = []
    for start in range(len(split)):
        if edges[start]:
            continue
        for end in range(start + 1, min(len(split), start + max_words) + 1):
            if end - 1 > start and (opens[end - 1] or closes[end - 2]):
                break  # a quoted value is one: no run goes into or out of the quotes
            if not edges[end - 1]:
                span = " ".join(split[start:end]).strip(EDGE_PUNCTUATION)
                found.append(span)
                owner = _POSSESSIVE.sub("", span)  # "Einstein's" → also "Einstein"
                if owner != span:
                    found.append(owner)
    for run in unspaced_runs(text):
        for start in range(len(run)):
            found += [
                run[start:end]
                for end in range(start + 1, min(len(run), start + _UNSPACED_SPAN) + 1)
            ]
    return found
