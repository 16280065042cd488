"""What a writer knows of a conversation while it holds the conversation's lock.

Why: a turn commits twice, and each commit appends to ``journal.log``, the turn's
``messages.log`` and ``history.json`` and rewrites ``meta.json`` in place. While a turn
holds the writer lock no other writer can change the folder, so the state it last wrote or
checked there is still the folder's (no stat needed) and the files it opened stay the files
(no path walk per write). Both are dropped together — the descriptors closed — when the lock
is let go, when a write fails, and before recovery (which replaces view files by rename), so a
descriptor never outlives the guarantee that makes it safe.
"""

from __future__ import annotations

import contextlib
import os

from agentkit.layout import HISTORY_FILE, JOURNAL_FILE, META_FILE, TURN_LOG_FILE
from agentkit.store._fsio import pwrite_all, write_all
from agentkit.store._state_cache import Identity, identity_of
from agentkit.store._views import FolderState

__all__ = ["HeldFolder"]

_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
_IN_PLACE = os.O_RDWR | os.O_CLOEXEC


class HeldFolder:
    """The folder *directory* as a turn holds it: :attr:`state` and its open files."""

    __slots__ = ("_fds", "_sizes", "_turn", "directory", "state")

    def __init__(self, directory: str, state: FolderState, meta_size: int | None = None) -> None:
        self.directory = directory
        self.state = state
        self._fds: dict[str, int] = {}
        # the files rewritten in place, as last written: history.json as its checkpoint (and
        # meta.json as last seen) says, both checked when the lock was taken
        self._sizes: dict[str, int] = {HISTORY_FILE: state.checkpoint.history_bytes}
        if meta_size is not None:
            self._sizes[META_FILE] = meta_size
        self._turn = ""  # the turn whose messages.log is open

    def _fd(self, name: str, flags: int) -> int:
        fd = self._fds.get(name)
        if fd is None:
            fd = os.open(os.path.join(self.directory, name), flags, 0o644)
            self._fds[name] = fd
        return fd

    def append_journal(self, frames: bytes, *, sync: bool) -> int:
        """Append *frames* in one ``O_APPEND`` write (fsynced with *sync*); the new size."""
        fd = self._fd(JOURNAL_FILE, _APPEND)
        write_all(fd, frames)
        if sync:
            os.fsync(fd)
        return os.fstat(fd).st_size

    def append_turn_log(self, message_id: str, text: bytes) -> None:
        """Append to ``{message_id}/messages.log``, making the turn's folder if it is new (not
        fsynced: the folder holds views and traces, none of them a durability point)."""
        name = f"{message_id}/{TURN_LOG_FILE}"
        if message_id != self._turn:
            self._close(f"{self._turn}/{TURN_LOG_FILE}")
            self._turn = message_id
            with contextlib.suppress(FileExistsError):
                os.mkdir(os.path.join(self.directory, message_id))
        write_all(self._fd(name, _APPEND), text)

    def write_history(self, offset: int, data: bytes) -> int:
        """``history.json`` from *offset* on becomes *data*; its new size."""
        return self._write_at(HISTORY_FILE, offset, data)

    def write_meta(self, data: bytes) -> Identity:
        """``meta.json`` becomes *data* (in place); its identity (inode, mtime, size) after."""
        self._write_at(META_FILE, 0, data)
        return identity_of(os.fstat(self._fds[META_FILE]))

    def _write_at(self, name: str, offset: int, data: bytes) -> int:
        fd = self._fd(name, _IN_PLACE)
        pwrite_all(fd, data, offset)
        end = offset + len(data)
        if end < self._sizes.get(name, end + 1):  # shorter than it was (or not known): cut
            os.ftruncate(fd, end)
        self._sizes[name] = end
        return end

    def _close(self, name: str) -> None:
        fd = self._fds.pop(name, None)
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        """Close every file; the state goes with it (the caller forgets this object)."""
        fds, self._fds = self._fds, {}
        self._sizes.clear()
        for fd in fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
