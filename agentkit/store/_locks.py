"""The writer lock of each conversation: a ``flock`` on a lock file beside its folder.

Why a separate file: locking a file that gets replaced loses updates, so the lock file is
never replaced and outlives the data it guards. Each acquisition opens its own descriptor, so
two threads of one process exclude each other exactly as two processes do (``flock`` locks
belong to an open file description). The lock is re-entrant per thread: a turn holds its
conversation's lock from start to end, and the writes inside the turn take it again at the
cost of a counter.

Why not the ``filelock`` package: measured here, its acquire + release costs ~140 µs against
~5 µs for the same open + ``flock`` + close (its fork bookkeeping, path resolution and parent
``mkdir`` on every call), and a turn takes the lock on its critical path.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from agentkit.store._process import pid
from agentkit.store.values import ConversationKey

__all__ = ["ConversationLock", "WriterLocks"]

_FIRST_PAUSE = 0.001
_LONGEST_PAUSE = 0.05


class ConversationLock:
    """``flock`` on *path*, re-entrant per thread (and never inherited across ``fork``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()

    def held(self) -> bool:
        """Does the calling thread (of this process) hold it?"""
        local = self._local
        return getattr(local, "depth", 0) > 0 and local.pid == pid()

    def acquire(self, timeout: float) -> bool:
        """Take the lock, waiting at most *timeout* seconds (0: one try); False if busy."""
        local = self._local
        if self.held():
            local.depth += 1
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        deadline = time.monotonic() + timeout
        pause = _FIRST_PAUSE
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    os.close(fd)
                    return False
                time.sleep(min(pause, left))
                pause = min(2 * pause, _LONGEST_PAUSE)
            except BaseException:
                os.close(fd)
                raise
        local.fd, local.depth, local.pid = fd, 1, pid()
        return True

    def release(self) -> None:
        local = self._local
        if not self.held():
            raise RuntimeError(f"{self.path} is not held by this thread")
        local.depth -= 1
        if local.depth == 0:
            fd, local.fd = local.fd, -1
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)


class WriterLocks:
    """Conversation → its lock (created on first use, at the path *path_of* names)."""

    def __init__(self, path_of: Callable[[ConversationKey], Path]) -> None:
        self._path_of = path_of
        self._locks: dict[ConversationKey, ConversationLock] = {}
        self._guard = threading.Lock()

    def get(self, key: ConversationKey) -> ConversationLock:
        with self._guard:
            lock = self._locks.get(key)
            if lock is None:
                lock = self._locks[key] = ConversationLock(self._path_of(key))
            return lock

    def held(self, key: ConversationKey) -> bool:
        """Does the calling thread hold *key*'s lock?"""
        lock = self._locks.get(key)
        return lock is not None and lock.held()

    def drop(self, key: ConversationKey) -> None:
        with self._guard:
            self._locks.pop(key, None)
