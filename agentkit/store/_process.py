"""This process's id, kept current across ``fork`` without a system call per question.

Why: the writer locks (:mod:`._locks`), the conversation layer's holds and the SQLite
config store refuse what a process inherited across ``fork()``, so each asks "am I still the
process that made this?" on every call of a turn's hot path; ``os.getpid()`` is a system call
(glibc stopped caching it). The id is read once and again in a forked child, before any of
its code runs (``os.register_at_fork``).
"""

from __future__ import annotations

import os

__all__ = ["pid"]

_current = [os.getpid()]
os.register_at_fork(after_in_child=lambda: _current.__setitem__(0, os.getpid()))


def pid() -> int:
    """``os.getpid()``, without the system call."""
    return _current[0]
