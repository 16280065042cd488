"""The languages agentkit knows: every public module of this package that defines
``LANGUAGE`` (so adding a language is adding one file), and their lists merged."""

from __future__ import annotations

import functools
import importlib
import pkgutil
import re
from collections.abc import Mapping

from agentkit.language._lang import Language

__all__ = ["LANGUAGES", "language", "merged", "merged_map", "pattern"]


def _discover() -> tuple[Language, ...]:
    package = importlib.import_module("agentkit.language")
    found: list[Language] = []
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"agentkit.language.{info.name}")
        value = getattr(module, "LANGUAGE", None)
        if isinstance(value, Language):
            found.append(value)
    return tuple(found)


LANGUAGES: tuple[Language, ...] = _discover()


def language(code: str) -> Language:
    """The language *code* (``en`` when agentkit has no such file)."""
    for item in LANGUAGES:
        if item.code == code:
            return item
    return language("en") if code != "en" else LANGUAGES[0]


@functools.cache
def merged(attr: str) -> frozenset[str]:
    """A word list of every language, merged (``merged("stop_words")``)."""
    out: set[str] = set()
    for item in LANGUAGES:
        out.update(getattr(item, attr))
    return frozenset(out)


@functools.cache
def merged_map(attr: str) -> Mapping[str, int]:
    out: dict[str, int] = {}
    for item in LANGUAGES:
        out.update(getattr(item, attr))
    return out


@functools.cache
def pattern(attr: str) -> re.Pattern[str] | None:
    """The regular expressions *attr* of every language, as one (case-insensitive)."""
    parts = [f"(?:{getattr(item, attr)})" for item in LANGUAGES if getattr(item, attr)]
    return re.compile("|".join(parts), re.IGNORECASE) if parts else None
