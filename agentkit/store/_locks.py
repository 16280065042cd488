"""The writer lock of each conversation: a ``flock`` on a lock file beside its folder.

Why a separate file: locking a file that gets replaced loses updates, so the lock file is
never replaced and outlives the data it guards. The lock is re-entrant per thread (filelock
keeps a per-thread counter): a turn holds its conversation's lock from start to end, and every
write inside the turn takes it again — :meth:`WriterLocks.held` lets those inner writes skip
the lock call altogether.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import filelock

from agentkit.store.base import ConversationKey

__all__ = ["WriterLocks"]


class WriterLocks:
    """Conversation → its lock (created on first use, at the path *path_of* names)."""

    def __init__(self, path_of: Callable[[ConversationKey], Path]) -> None:
        self._path_of = path_of
        self._locks: dict[ConversationKey, filelock.FileLock] = {}
        self._guard = threading.Lock()

    def get(self, key: ConversationKey) -> filelock.FileLock:
        with self._guard:
            lock = self._locks.get(key)
            if lock is None:
                lock = filelock.FileLock(self._path_of(key), preserve_lock_file=True)
                self._locks[key] = lock
            return lock

    def held(self, key: ConversationKey) -> bool:
        """Does the calling thread hold *key*'s lock?"""
        lock = self._locks.get(key)
        return lock is not None and lock.is_locked

    def drop(self, key: ConversationKey) -> None:
        with self._guard:
            self._locks.pop(key, None)
