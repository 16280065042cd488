"""Numbers as people write them: digits (``1,250``, ``6cm``, ``5%``, ``[200,300]``), words
(*sixty*, *two hundred and five*, *a dozen*) and numerals written without spaces (六十, 两百,
三千五百, 一万), each language's words from its file.

Why here: "was this number said?" must count *sixty* and 六十 the same way wherever it is
asked (grounding a call's argument, offering values to the decoder, filling an answer).
"""

from __future__ import annotations

import functools
import math
import re

from agentkit.language._registry import LANGUAGES

__all__ = ["numbers_in", "parse_number"]

#: a number as written: not inside a word (``mp3``), but a unit may follow it (``6cm``)
_DIGITS = r"(?<![A-Za-z0-9_.])[-+]?\d[\d,]*(?:\.\d+)?(?!\d)|(?<![A-Za-z0-9_.])[-+]?\.\d+(?!\d)"
_GROUPED = re.compile(r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?,?|[-+]?[\d.]+,?")
_WORD = re.compile(r"[^\W\d_]+")


@functools.cache
def _scaled() -> re.Pattern[str]:
    """A number in digits, and the multiplier or percent sign after it (*50 million*, *5万*)."""
    spaced = [w for lang in LANGUAGES if not lang.unspaced for w in lang.multipliers]
    unspaced = [w for lang in LANGUAGES if lang.unspaced for w in lang.multipliers]
    after = [r"\s+(?P<scale>" + "|".join(map(re.escape, spaced)) + r")\b"] if spaced else []
    after += [r"\s*(?P<unit>" + "|".join(map(re.escape, unspaced)) + ")"] if unspaced else []
    after.append(r"\s*(?P<percent>%|per\s?cent\b)")
    return re.compile(f"(?P<number>{_DIGITS})(?:{'|'.join(after)})?", re.IGNORECASE)


@functools.cache
def _multiplier(word: str) -> int | None:
    for lang in LANGUAGES:
        if word in lang.multipliers:
            return lang.multipliers[word]
    return None


def _plain(text: str) -> float | None:
    try:
        number = float(text.replace(",", ""))
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _list_parts(written: str) -> set[float]:
    """The numbers of a list written without spaces (``200,300,400``): its comma-separated
    parts, where they are not a number's thousands (``1,000,000``: groups after the first
    start with 0) — for three parts or more, or commas that group nothing."""
    parts = [part for part in written.split(",") if part]
    if len(parts) < 2:
        return set()
    grouped = _GROUPED.fullmatch(written) is not None
    if grouped and (len(parts) < 3 or any(part.startswith("0") for part in parts[1:])):
        return set()
    return {n for n in (_plain(part) for part in parts) if n is not None}


def _digit_numbers(text: str) -> set[float]:
    found: set[float] = set()
    for match in _scaled().finditer(text):
        written = match["number"]
        found.update(_list_parts(written))
        number = _plain(written) if _GROUPED.fullmatch(written) else None
        if number is None:
            continue
        found.add(number)
        groups = match.groupdict()
        scale = groups.get("scale") or groups.get("unit")
        multiplier = _multiplier(scale.casefold()) if scale else None
        if multiplier is not None:
            found.add(number * multiplier)
        if groups.get("percent"):
            found.add(round(number / 100, 12))  # 5% is 5 and 0.05
    return found


def _spaced_runs(text: str) -> list[int]:
    """The numbers written as words in the languages written with spaces: *sixty*, *two
    hundred and five*, *three thousand*, *a dozen*."""
    langs = [lang for lang in LANGUAGES if not lang.unspaced]
    values = {w: v for lang in langs for w, v in lang.digits.items()}
    scales = {w: v for lang in langs for w, v in lang.multipliers.items()}
    counts = {w: v for lang in langs for w, v in lang.counts.items()}
    found: list[int] = []
    total = current = 0
    running = False
    pending_a = False
    for word in [*_WORD.findall(text.casefold()), ""]:
        if word in values:
            current += values[word]
            running = True
        elif word in scales and (running or pending_a):
            current = max(current, 1)
            if scales[word] >= 1000:
                total += current * scales[word]
                current = 0
            else:
                current *= scales[word]
            running = True
        elif word in counts:
            current = max(current, 1) * counts[word]
            running = True
        elif word == "and" and running:
            continue
        else:
            if running:
                found.append(total + current)
            total = current = 0
            running = False
            pending_a = word in ("a", "an")
            if word in scales:  # a bare "hundred"
                found.append(scales[word])
            continue
        pending_a = False
    return found


def _unspaced_value(run: str, digits: dict[str, int], scales: dict[str, int]) -> int:
    if not any(char in scales for char in run):
        return int("".join(str(digits[char]) for char in run))  # 二零二六 → 2026
    total = section = number = 0
    for char in run:
        if char in digits:
            number = digits[char]
        elif scales[char] >= 10_000:  # 万, 亿 close a group (alone: one of them)
            total = max(total + section + number, 1) * scales[char]
            section = number = 0
        else:  # 十, 百, 千 multiply the digit before them (十二: one ten)
            section += max(number, 1) * scales[char]
            number = 0
    return total + section + number


def _unspaced_runs(text: str) -> list[int]:
    """The numerals of the languages written without spaces (六十, 两百, 三千五百, 一万)."""
    found: list[int] = []
    for lang in LANGUAGES:
        if not lang.unspaced or not lang.digits:
            continue
        chars = "".join(map(re.escape, [*lang.digits, *lang.multipliers]))
        for run in re.findall(f"[{chars}]+", text):
            found.append(_unspaced_value(run, dict(lang.digits), dict(lang.multipliers)))
    return found


def numbers_in(text: str, *, words: bool = True) -> set[float]:
    """Every number *text* says: in digits (scaled where a multiplier or a percent sign
    follows: *50 million* is 50 and 50,000,000, *5%* is 5 and 0.05; a list's parts), and with
    *words* also written in words or numerals."""
    found = _digit_numbers(text)
    if words:
        found.update(float(n) for n in _spaced_runs(text))
        found.update(float(n) for n in _unspaced_runs(text))
    return found


def parse_number(text: str) -> float | None:
    """*text* as one number (digits with thousands commas, words or numerals), else None."""
    stripped = text.strip()
    number = _plain(stripped)
    if number is not None:
        return number
    runs = _spaced_runs(stripped) + _unspaced_runs(stripped)
    if len(runs) == 1 and not _leftover(stripped):
        return float(runs[0])
    return None


def _leftover(text: str) -> bool:
    """*text* holds words that are no number word (*sixty cats*)."""
    known = {w for lang in LANGUAGES for w in (*lang.digits, *lang.multipliers, *lang.counts)}
    known |= {"and", "a", "an"}
    rest = [w for w in _WORD.findall(text.casefold()) if w not in known]
    return any(not all(c in known for c in w) for w in rest)
