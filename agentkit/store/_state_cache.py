"""What a :class:`~agentkit.store.files.FileConversationStore` last knew of each folder.

Why: every write of a turn needs the folder's state (the views' checkpoint); reading and
parsing ``meta.json`` for each would be repeated work on the hot path. An entry is trusted only
while ``meta.json`` keeps the inode, mtime and size it had when the entry was made and
``journal.log`` and ``history.json`` keep the sizes its checkpoint names: a write by another
process, or a person editing a file, changes one of them, and the folder is read again.

Beside each state, the folder's last messages (:meth:`FolderStates.recent`): every turn reads
its chat window, and reading it backwards from the journal's end costs a parse per record.
The tail is kept only for the journal size it was read or written at: any other size (another
writer, a recovery that truncated a torn record) reads the journal again.
"""

from __future__ import annotations

import os
from pathlib import Path

from agentkit.layout import HISTORY_FILE, JOURNAL_FILE, META_FILE
from agentkit.store._records import CheckpointRecord, JournalRecord, MessageRecord, RecordEntry
from agentkit.store._views import Checkpoint, FolderState, read_state, tail_records
from agentkit.types import Message

__all__ = ["FolderStates", "Identity", "identity_of", "is_clean"]

Identity = tuple[int, int, int]
_MESSAGES = frozenset({"message"})
_CHECKPOINTS = frozenset({"checkpoint"})
_RECORDS = frozenset({"record"})
#: messages kept per folder: a planner turn reads at most 4 * max_turns + 2 of them
TAIL_KEEP = 256
#: messages read on a miss: the next turns' windows, read once
TAIL_READ = 64


class _Tail:
    """The last messages of a journal of exactly *journal_bytes* bytes; *complete* when they
    are all its messages (so any number can be served)."""

    __slots__ = ("complete", "journal_bytes", "messages")

    def __init__(self, journal_bytes: int, messages: list[Message], complete: bool) -> None:
        self.journal_bytes = journal_bytes
        self.messages = messages[-TAIL_KEEP:]
        self.complete = complete and len(messages) <= TAIL_KEEP


def is_clean(directory: Path, checkpoint: Checkpoint) -> bool:
    """The journal and history.json have exactly the sizes *checkpoint* names."""
    try:
        journal = os.stat(os.path.join(directory, JOURNAL_FILE)).st_size
        history = os.stat(os.path.join(directory, HISTORY_FILE)).st_size
    except FileNotFoundError:
        return False
    return journal == checkpoint.journal_bytes and history == checkpoint.history_bytes


def identity_of(stat: os.stat_result) -> Identity:
    """What tells one version of ``meta.json`` from another: inode, mtime, size."""
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size)


def _meta_identity(directory: Path) -> Identity:
    try:
        return identity_of(os.stat(os.path.join(directory, META_FILE)))
    except FileNotFoundError:
        return (-1, -1, -1)


class FolderStates:
    """Folder → the last state written or read there (bounded: cleared past *limit*)."""

    def __init__(self, limit: int = 4096) -> None:
        self._limit = limit
        self._entries: dict[Path, tuple[FolderState, Identity]] = {}
        self._tails: dict[Path, _Tail] = {}
        self._checkpoints: dict[Path, tuple[int, list[JournalRecord]]] = {}
        self._records: dict[Path, tuple[int, list[JournalRecord]]] = {}

    def read(self, directory: Path) -> FolderState | None:
        """The folder's state: the remembered one while still valid, else ``meta.json``'s
        (None when it is missing or does not parse)."""
        return self.read_checked(directory)[0]

    def read_checked(self, directory: Path) -> tuple[FolderState | None, bool]:
        """:meth:`read`, and whether the journal and ``history.json`` have the sizes its
        checkpoint names (:func:`is_clean`), checked once."""
        identity = _meta_identity(directory)
        cached = self._entries.get(directory)
        if (
            cached is not None
            and cached[1] == identity
            and is_clean(directory, cached[0].checkpoint)
        ):
            return cached[0], True
        state = read_state(directory)
        if state is None:
            self._entries.pop(directory, None)
            return None, False
        self._put(directory, state, identity)
        return state, is_clean(directory, state.checkpoint)

    def remember(
        self, directory: Path, state: FolderState, identity: Identity | None = None
    ) -> None:
        """*state* was just written to the folder (``meta.json`` now has *identity*: inode,
        mtime, size; looked up when not given)."""
        self._put(directory, state, _meta_identity(directory) if identity is None else identity)

    def meta_size(self, directory: Path) -> int | None:
        """The size of the folder's ``meta.json`` when its state was last read or written."""
        entry = self._entries.get(directory)
        return None if entry is None or entry[1][2] < 0 else entry[1][2]

    def forget(self, directory: Path) -> None:
        self._entries.pop(directory, None)
        self._tails.pop(directory, None)
        self._checkpoints.pop(directory, None)
        self._records.pop(directory, None)

    def _put(self, directory: Path, state: FolderState, identity: Identity) -> None:
        if len(self._entries) >= self._limit:
            self._entries.clear()
            self._tails.clear()
            self._checkpoints.clear()
            self._records.clear()
        self._entries[directory] = (state, identity)

    # -- the last messages ------------------------------------------------------------------

    def recent(self, directory: Path, journal_bytes: int, limit: int) -> list[Message]:
        """The last *limit* messages of the folder's journal at *journal_bytes* (read from its
        end when not known, at least :data:`TAIL_READ` of them). Raises ``FileNotFoundError``."""
        tail = self._tails.get(directory)
        if (
            tail is None
            or tail.journal_bytes != journal_bytes
            or (limit > len(tail.messages) and not tail.complete)
        ):
            wanted = max(limit, TAIL_READ)
            found = [
                record.message
                for record in tail_records(directory, journal_bytes, _MESSAGES, last=wanted)
                if isinstance(record, MessageRecord)
            ]
            if len(self._tails) >= self._limit:
                self._tails.clear()
            self._tails[directory] = _Tail(journal_bytes, found, len(found) < wanted)
            return found[-limit:] if limit else []  # the tail kept may be shorter
        return tail.messages[-limit:] if limit else []

    def keep_recent(self, directory: Path, journal_bytes: int, messages: list[Message]) -> None:
        """*messages* are all the messages of the journal at *journal_bytes*."""
        self._tails[directory] = _Tail(journal_bytes, list(messages), complete=True)

    def appended(
        self, directory: Path, before: int, after: int, records: list[JournalRecord]
    ) -> None:
        """The journal grew from *before* to *after* bytes by *records*."""
        messages = [record.message for record in records if isinstance(record, MessageRecord)]
        tail = self._tails.get(directory)
        if tail is None or tail.journal_bytes != before:
            self._tails.pop(directory, None)
        else:
            self._tails[directory] = _Tail(after, tail.messages + messages, tail.complete)
        marks: list[JournalRecord] = [r for r in records if isinstance(r, CheckpointRecord)]
        known = self._checkpoints.get(directory)
        if marks:
            self._checkpoints[directory] = (after, marks[-1:])
        elif known is not None and known[0] == before:
            self._checkpoints[directory] = (after, known[1])
        else:
            self._checkpoints.pop(directory, None)
        added: list[JournalRecord] = [r for r in records if isinstance(r, RecordEntry)]
        typed = self._records.get(directory)
        if typed is not None and typed[0] == before:
            self._records[directory] = (after, typed[1] + added)
        else:
            self._records.pop(directory, None)

    # -- the newest turn checkpoint ------------------------------------------------------------

    def last_checkpoint(self, directory: Path, journal_bytes: int) -> list[JournalRecord]:
        """The newest turn checkpoint record of the folder's journal at *journal_bytes* (none
        or one; read from its end when not known). Raises ``FileNotFoundError``."""
        known = self._checkpoints.get(directory)
        if known is None or known[0] != journal_bytes:
            if len(self._checkpoints) >= self._limit:
                self._checkpoints.clear()
            known = (journal_bytes, tail_records(directory, journal_bytes, _CHECKPOINTS, last=1))
            self._checkpoints[directory] = known
        return list(known[1])

    # -- the typed conversation records ----------------------------------------------------

    def records(self, directory: Path, journal_bytes: int) -> list[JournalRecord]:
        """The typed conversation records (``record`` entries) of the folder's journal at
        *journal_bytes* (read once, then kept up to date by :meth:`appended`). Raises
        ``FileNotFoundError``."""
        known = self._records.get(directory)
        if known is None or known[0] != journal_bytes:
            if len(self._records) >= self._limit:
                self._records.clear()
            known = (journal_bytes, tail_records(directory, journal_bytes, _RECORDS))
            self._records[directory] = known
        return list(known[1])
