"""Small text files read on every turn (prompt files, prompt templates), cached while unchanged.

Why: an agent's prompts are read again for every model call, so an edit (the prompt lab, a
text editor) takes effect at the next call without a restart. A ``stat`` proves a cached copy
current for a fraction of a read. A file changed within the last second is read again every
time: a timestamp's granularity could hide an edit that keeps the size (git's "racily clean").
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

__all__ = ["read_text"]

_RACY_NS = 1_000_000_000
_LIMIT = 1024

_cache: dict[str, tuple[tuple[int, int, int], str]] = {}
_guard = threading.Lock()


def read_text(path: Path | str) -> str | None:
    """The file's text (UTF-8), or None when it is not there (or not a file)."""
    name = os.fspath(path)
    try:
        stat = os.stat(name)
    except (FileNotFoundError, NotADirectoryError):
        return None
    identity = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
    cached = _cache.get(name)
    if cached is not None and cached[0] == identity:
        return cached[1]
    try:
        with open(name, encoding="utf-8") as handle:
            text = handle.read()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    if time.time_ns() - stat.st_mtime_ns > _RACY_NS:
        with _guard:
            if len(_cache) >= _LIMIT:
                _cache.clear()
            _cache[name] = (identity, text)
    return text
