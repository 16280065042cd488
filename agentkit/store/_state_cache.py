"""What a :class:`~agentkit.store.files.FileConversationStore` last knew of each folder.

Why: every write of a turn needs the folder's state (the views' checkpoint); reading and
parsing ``meta.json`` for each would be repeated work on the hot path. An entry is trusted only
while ``meta.json`` keeps the inode, mtime and size it had when the entry was made and
``journal.log`` and ``history.json`` keep the sizes its checkpoint names: a write by another
process, or a person editing a file, changes one of them, and the folder is read again.
"""

from __future__ import annotations

import os
from pathlib import Path

from agentkit.layout import HISTORY_FILE, JOURNAL_FILE, META_FILE
from agentkit.store._views import Checkpoint, FolderState, read_state

__all__ = ["FolderStates", "is_clean"]

_Identity = tuple[int, int, int]


def is_clean(directory: Path, checkpoint: Checkpoint) -> bool:
    """The journal and history.json have exactly the sizes *checkpoint* names."""
    try:
        journal = os.stat(directory / JOURNAL_FILE).st_size
        history = os.stat(directory / HISTORY_FILE).st_size
    except FileNotFoundError:
        return False
    return journal == checkpoint.journal_bytes and history == checkpoint.history_bytes


def _meta_identity(directory: Path) -> _Identity:
    try:
        stat = os.stat(directory / META_FILE)
    except FileNotFoundError:
        return (-1, -1, -1)
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size)


class FolderStates:
    """Folder → the last state written or read there (bounded: cleared past *limit*)."""

    def __init__(self, limit: int = 4096) -> None:
        self._limit = limit
        self._entries: dict[Path, tuple[FolderState, _Identity]] = {}

    def read(self, directory: Path) -> FolderState | None:
        """The folder's state: the remembered one while still valid, else ``meta.json``'s
        (None when it is missing or does not parse)."""
        identity = _meta_identity(directory)
        cached = self._entries.get(directory)
        if (
            cached is not None
            and cached[1] == identity
            and is_clean(directory, cached[0].checkpoint)
        ):
            return cached[0]
        state = read_state(directory)
        if state is None:
            self._entries.pop(directory, None)
        else:
            self._put(directory, state, identity)
        return state

    def remember(self, directory: Path, state: FolderState) -> None:
        """*state* was just written to the folder."""
        self._put(directory, state, _meta_identity(directory))

    def forget(self, directory: Path) -> None:
        self._entries.pop(directory, None)

    def _put(self, directory: Path, state: FolderState, identity: _Identity) -> None:
        if len(self._entries) >= self._limit:
            self._entries.clear()
        self._entries[directory] = (state, identity)
