"""The file store: the seed's conversation layout under a data root, crash-safe.

::

    {root}/agents/{agentId}/conversations/
      .{conversationId}.lock        the writer lock (beside the data, never replaced)
      {conversationId}/
        journal.log                 append-only framed records: the source of truth
        meta.json                   view, replaced atomically; carries the views checkpoint
        history.json                view, a JSON array updated in place
        {messageId}/messages.log    view, one per turn
        turn-events.log             the last turn's events, under serve --workers N (not a
                                    view: agentkit.store.file_events)

(The paths are :mod:`agentkit.layout`'s, the one owner of the layout.)

Why it is built this way (figures in reference/reliability.md):

* One source of truth. Every write appends checksummed records to ``journal.log``; only then
  are the views updated, in the order turn log → ``history.json`` → ``meta.json``. The views
  are never fsynced: recovery rebuilds them from the journal, and a killed process loses
  nothing the kernel already has.
* Durability points, one group commit each. ``append`` (a message, with the status change
  that goes with it: one write, one fsync) and ``set_status`` fsync the journal before they
  return; ``annotate`` (turn-log notes) does not: inside a turn its record waits for the
  turn's next commit and rides along in it. So a turn costs two journal fsyncs: the user's
  message with ``running`` before the model is called, the answer with the final status
  before ``result``. (The planner's ExecutionState saves before and after a side-effecting
  tool are durability points of the ``system_config`` store, see
  :mod:`agentkit.store.sqlite_kv`.)
* ``meta.json`` carries a checkpoint ``{journalBytes, journalRecords, historyBytes}`` saying
  the views match the journal's first ``journalBytes`` bytes. When the files disagree with
  it, a write was interrupted: the next writer (or a reader that finds the lock free)
  *recovers* — truncates a torn journal tail, removes stale temp files, rebuilds the views
  from the journal, writes a new checkpoint. A damaged record in the middle is reported with
  :class:`CorruptJournalError` and a quarantined copy, never truncated away.
* Readers read only the checkpointed prefix of the journal, so they never see a record that
  is still being written, and never take the lock in the common case.
* ``history.json`` stays a valid JSON array: one entry per line, and an append rewrites only
  the closing ``\\n]\\n``. Appending costs O(1) however long the history is; the last N
  messages are read backwards from the journal's end.
* While a turn holds a conversation's lock it trusts the state it last wrote there and
  writes through the files it opened once (:mod:`._held`), closed when it lets go.
* One writer per conversation across threads and processes (:mod:`._locks`). Creation goes
  through a temp directory renamed into place; deletion renames to a tombstone first.
  Leftovers of either are cleaned by ``recover()``.
* This module is the file store's journal backend (:mod:`agentkit.store.backend`): it keeps
  the folders, the ``flock`` and the held files; numbering, folding, forks, checkpoints,
  turn logs and the shape of verify and recover are the one conversation layer's
  (:mod:`agentkit.store.conversation_store`), the same for every backend.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from agentkit.errors import ConversationBusyError, ConversationNotFoundError, StoreError, UsageError
from agentkit.ids import is_valid_id
from agentkit.layout import (
    CALLS_FILE,
    HISTORY_FILE,
    JOURNAL_FILE,
    META_FILE,
    TURN_LOG_FILE,
    DataLayout,
)
from agentkit.store._call_records import FileCallRecordSink, read_call_records
from agentkit.store._fsio import append_durable, atomic_write, fsync_dir, make_dirs
from agentkit.store._held import HeldFolder
from agentkit.store._journal import encode_frame
from agentkit.store._locks import ConversationLock, WriterLocks
from agentkit.store._records import (
    JournalRecord,
    MessageRecord,
    Views,
    encode_record,
    fold,
    render_turn,
    turn_of,
)
from agentkit.store._state_cache import FolderStates, is_clean
from agentkit.store._views import (
    VIEW_FORMAT,
    Checkpoint,
    FolderState,
    append_history,
    check_folder,
    load_journal,
    meta_bytes,
    read_history_view,
    rebuild_views,
    render_history,
    scan_journal,
    tail_records,
)
from agentkit.store.backend import (
    JournalBackend,
    Lease,
    LeaseMovedError,
    RecordKind,
    Scanned,
    held_lease,
)
from agentkit.store.conversation_store import ConversationStore
from agentkit.store.values import CallRecordSink, ConversationKey, Problem
from agentkit.types import ConversationMeta, Message

__all__ = ["FileConversationStore", "FileJournal"]

#: the names of the temp folders of a create and a delete: ``.{id}.creating-{pid}-{random}``
#: (the pid of the process making it)
CREATING = ".creating-"
DELETED = ".deleted-"


def _leftover(name: str) -> bool:
    return name.startswith(".") and (CREATING in name or DELETED in name)


def _temp_folder(key: ConversationKey, kind: str) -> str:
    return f".{key.conversation_id}{kind}{os.getpid()}-{secrets.token_hex(4)}"


def _in_progress(name: str) -> bool:
    """Whether the process that made the temp folder *name* still runs: then it may still be
    at work on it (another worker of ``agentkit serve --workers N`` creating or deleting a
    conversation while this one opens the agent), so it is no leftover yet."""
    rest = name.split(CREATING if CREATING in name else DELETED, 1)[1]
    pid, dash, _ = rest.partition("-")
    if not dash or not pid.isdigit():
        return False  # not named with a pid: from before names carried one
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it runs
        return True
    return True


class _FileLease(Lease):
    """The ``flock`` a turn holds on a conversation's lock file: the descriptor holding it."""

    __slots__ = ("deleted", "fd")

    def __init__(self, key: ConversationKey, state: FolderState, epoch: int, fd: int) -> None:
        super().__init__(key, state.meta, state.checkpoint.journal_records, epoch)
        self.fd = fd
        self.deleted = False


class FileJournal(JournalBackend):
    """Conversations as folders under ``{root}/agents/{agentId}/conversations``."""

    def __init__(self, root: Path | str, *, lock_timeout: float = 10.0) -> None:
        self.root = Path(os.path.realpath(root))
        self.layout = DataLayout(self.root)
        self.lock_timeout = lock_timeout
        self._locks = WriterLocks(self._lock_path)
        self._suspect: set[Path] = set()  # conversations whose last write failed with an I/O error
        self._states = FolderStates()  # so a turn's writes do not re-read meta.json
        self._dirs: dict[ConversationKey, Path] = {}  # resolved and checked once per key
        # Each conversation whose lock a turn holds: its state as written or checked
        # there and the files open for writing (agentkit.store._held); dropped at release.
        self._held: dict[ConversationKey, HeldFolder] = {}
        self._epochs: dict[ConversationKey, int] = {}  # leases granted in this process

    # ------------------------------------------------------------------ paths

    def _under_root(self, path: Path) -> Path:
        resolved = os.path.realpath(path)
        if os.path.commonpath([resolved, self.root]) != str(self.root):
            raise UsageError(f"{path} resolves outside the data root {self.root}")
        return path

    def conversations_dir(self, agent_id: str) -> Path:
        """``{root}/agents/{agentId}/conversations`` (checked to be under the root)."""
        return self._under_root(self.layout.agent(agent_id).conversations_dir)

    def _dir(self, key: ConversationKey) -> Path:
        directory = self._dirs.get(key)
        if directory is None:
            self.conversations_dir(key.agent_id)
            directory = self._under_root(self.layout.conversation(key).dir)
            if len(self._dirs) > 4096:
                self._dirs.clear()
            self._dirs[key] = directory
        return directory

    def folder(self, key: ConversationKey) -> Path:
        """``{root}/agents/{agentId}/conversations/{conversationId}``."""
        return self._dir(key)

    def _existing_dir(self, key: ConversationKey) -> Path:
        directory = self._dir(key)
        if not os.path.isfile(os.path.join(directory, JOURNAL_FILE)):
            raise ConversationNotFoundError(key.agent_id, key.conversation_id)
        return directory

    def _lock_path(self, key: ConversationKey) -> Path:
        self.conversations_dir(key.agent_id)
        return self._under_root(self.layout.agent(key.agent_id).lock_file(key.conversation_id))

    def _conversation_dirs(self, agent_id: str | None) -> list[Path]:
        if agent_id is not None:
            directory = self.conversations_dir(agent_id)
            return [directory] if directory.is_dir() else []
        agents = self.layout.agents_dir
        if not agents.is_dir():
            return []
        return sorted(
            self.layout.agent(path.name).conversations_dir
            for path in agents.iterdir()
            if is_valid_id(path.name) and self.layout.agent(path.name).conversations_dir.is_dir()
        )

    # ------------------------------------------------------------------ the writer lease

    def acquire(self, key: ConversationKey, wait: float, *, brief: bool = False) -> Lease:
        self._existing_dir(key)  # never create a lock file for a conversation that is not there
        fd = self._locks.get(key).acquire(max(wait, 0))
        if fd is None:
            raise ConversationBusyError(key.agent_id, key.conversation_id, wait)
        try:
            self._existing_dir(key)  # it may have been deleted while we waited
            self._let_go(key)  # what an earlier holder kept is not to be trusted: read again
            state = self._writable_state(key)
        except BaseException:
            self._let_go(key)
            ConversationLock.release(fd)
            raise
        epoch = self._epochs[key] = self._epochs.get(key, 0) + 1
        return _FileLease(key, state, epoch, fd)

    def release(self, lease: Lease, *, failed: bool = False) -> None:
        own = _FileLease.own(lease)
        if not own.held:
            return
        own.held = False
        try:
            self._let_go(own.key)
        finally:
            ConversationLock.release(own.fd)
        if own.deleted:
            self._locks.drop(own.key)

    @contextmanager
    def exclusive(self, key: ConversationKey, wait: float) -> Iterator[None]:
        """The lock alone: no recovery (verify reports what a crash left; a read under it
        recovers what it must, as a write would)."""
        self._existing_dir(key)
        if held_lease(self, key) is not None:  # the calling turn's lease: its state stays
            yield
            return
        fd = self._locks.get(key).acquire(max(wait, 0))
        if fd is None:
            raise ConversationBusyError(key.agent_id, key.conversation_id, wait)
        try:
            self._existing_dir(key)  # it may have been deleted while we waited
            yield
        finally:
            self._let_go(key)
            ConversationLock.release(fd)

    def _let_go(self, key: ConversationKey) -> None:
        """Forget what the holder knew of *key* under its lock, and close its files."""
        held = self._held.pop(key, None)
        if held is not None:
            held.close()

    def _keep(self, key: ConversationKey, state: FolderState) -> HeldFolder:
        held = self._held.get(key)
        if held is None:
            directory = self._dir(key)
            size = self._states.meta_size(directory)
            held = self._held[key] = HeldFolder(str(directory), state, size)
        held.state = state
        return held

    # ------------------------------------------------------------------ state

    def _writable_state(self, key: ConversationKey) -> FolderState:
        """The conversation's state, recovered first if a write was interrupted. Hold the lock."""
        held = self._held.get(key)
        if held is not None:
            return held.state
        directory = self._existing_dir(key)
        state, clean = self._states.read_checked(directory)
        if not clean or directory in self._suspect:
            state = self._recover_conversation(key)
        assert state is not None
        self._keep(key, state)
        return state

    def _snapshot(self, key: ConversationKey) -> FolderState:
        """The last checkpointed state, for readers; repairs it when nobody is writing."""
        if held_lease(self, key) is not None:
            return self._writable_state(key)
        directory = self._existing_dir(key)
        state, clean = self._states.read_checked(directory)
        for pause in (0.0005, 0.002, 0.01):
            if state is not None:
                break
            time.sleep(pause)  # meta.json is written in place: maybe caught mid-write
            state, clean = self._states.read_checked(directory)
        if state is not None and clean:
            return state
        fd = self._locks.get(key).acquire(0 if state is not None else self.lock_timeout)
        if fd is None:
            if state is None:
                raise ConversationBusyError(key.agent_id, key.conversation_id, self.lock_timeout)
            return state  # a writer is mid-write: its record is not acknowledged yet
        try:
            self._existing_dir(key)
            return self._writable_state(key)
        finally:
            self._let_go(key)
            ConversationLock.release(fd)

    # ------------------------------------------------------------------ recovery

    def _load_journal(
        self, directory: Path, *, end: int | None = None, repair: bool = False
    ) -> tuple[Views, int, list[tuple[int, JournalRecord]]]:
        """:func:`load_journal`; with *repair*, a journal whose last write failed (a failed
        fsync may have dropped pages the kernel still shows us) is rewritten from what was read."""
        rewrite = repair and directory in self._suspect
        loaded = load_journal(directory, end=end, repair=repair, rewrite=rewrite)
        if rewrite:
            self._suspect.discard(directory)
        return loaded

    def _recover_conversation(self, key: ConversationKey, *, full: bool = False) -> FolderState:
        directory = self._existing_dir(key)
        previous = self._states.read(directory)
        self._let_go(key)  # recovery replaces view files: no descriptor may outlive that
        try:
            views, good_end, located = self._load_journal(directory, repair=True)
            state = rebuild_views(directory, views, good_end, located, previous, full=full)
        except OSError as error:
            self._states.forget(directory)
            raise StoreError(f"could not recover {key}: {error}") from error
        self._states.forget(directory)  # and the tail read before: the journal may have changed
        self._states.remember(directory, state)
        self._keep(key, state)  # recovery runs under the lock
        return state

    def leftovers(self, agent_id: str | None, *, remove: bool) -> list[Problem]:
        found: list[Problem] = []
        for conversations in self._conversation_dirs(agent_id):
            for entry in sorted(conversations.iterdir()):
                if not _leftover(entry.name) or _in_progress(entry.name):
                    continue
                if remove:
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    agent = conversations.parent.name
                    found.append(Problem(agent, "", "leftover", f"{entry.name} (interrupted)"))
        return found

    def keys(self, agent_id: str | None) -> list[ConversationKey]:
        return [
            ConversationKey(conversations.parent.name, entry.name)
            for conversations in self._conversation_dirs(agent_id)
            for entry in sorted(conversations.iterdir())
            if is_valid_id(entry.name) and entry.is_dir()
        ]

    def settled(self, key: ConversationKey) -> bool:
        directory = self._dir(key)
        state = self._states.read(directory)
        return state is not None and is_clean(directory, state.checkpoint)

    def repair(self, lease: Lease, *, full: bool) -> bool:
        """Taking the lease recovered views behind their journal; *full* rebuilds them all."""
        if full:
            self._recover_conversation(_FileLease.own(lease).key, full=True)
        return True

    def scan(self, key: ConversationKey) -> Scanned:
        try:
            return scan_journal(key, self._existing_dir(key))
        except FileNotFoundError:
            raise ConversationNotFoundError(key.agent_id, key.conversation_id) from None

    def check(self, key: ConversationKey, views: Views, scanned: Scanned) -> list[Problem]:
        return check_folder(key, self._dir(key), views, scanned.extent)

    # ------------------------------------------------------------------ writes

    def append(
        self,
        lease: Lease,
        records: Sequence[JournalRecord],
        meta: ConversationMeta,
        *,
        durable: bool,
    ) -> None:
        """One write of the records' frames (and one fsync when *durable*), then the views
        along (never fsynced: recovery rebuilds them)."""
        own = _FileLease.own(lease)
        key = own.key
        if not own.held:
            raise own.stale(self._epochs.get(key, own.epoch))
        state = self._writable_state(key)  # after a failed write: recovered first
        if state.checkpoint.journal_records != own.records:  # that write reached the journal
            own.meta, own.records = state.meta, state.checkpoint.journal_records
            raise LeaseMovedError(f"{key} moved on: a write reported failed had landed")
        directory = self._dir(key)
        frames = b"".join(encode_frame(encode_record(record)) for record in records)
        held = self._held[key]  # _writable_state keeps it
        try:
            journal_bytes = held.append_journal(frames, sync=durable)
            if journal_bytes != state.checkpoint.journal_bytes + len(frames):
                raise StoreError(f"the journal of {key} changed under its lock")
            history_bytes = state.checkpoint.history_bytes
            count = state.meta.stats.message_count
            for turn, text in _turn_logs(records):
                held.append_turn_log(turn, text)
            for record in records:
                if isinstance(record, MessageRecord):
                    history_bytes = append_history(
                        held.write_history, record.message, count, history_bytes
                    )
                    count += 1
            new_state = FolderState(
                meta,
                Checkpoint(
                    journal_bytes=journal_bytes,
                    journal_records=own.records + len(records),
                    history_bytes=history_bytes,
                    # the entries already there stay in the format they were written in
                    history_format=state.checkpoint.history_format,
                ),
            )
            # in place (8 µs) rather than replaced (~160 µs on ext4, which flushes a file
            # renamed over another): a torn meta.json is a view recovery rebuilds, and
            # readers retry one that does not parse (see _snapshot)
            identity = held.write_meta(meta_bytes(new_state))
        except StoreError:
            self._let_go(key)
            raise
        except OSError as error:
            # Whatever reached the disk is recovered (and the journal rewritten) before
            # the next write; this one is not acknowledged.
            self._suspect.add(directory)
            self._let_go(key)
            reason = f"could not write to {key}: {error}; nothing acknowledged"
            raise StoreError(reason) from error
        self._states.remember(directory, new_state, identity)
        held.state = new_state
        self._states.appended(
            directory, state.checkpoint.journal_bytes, journal_bytes, list(records)
        )
        own.moved(meta, len(records))

    def create(
        self,
        key: ConversationKey,
        records: Sequence[JournalRecord],
        meta: ConversationMeta,
        traces: Mapping[str, Sequence[str]],
        prepare: Callable[[], None] | None = None,
    ) -> None:
        """A new conversation folder holding *records* (its journal) and their views, with
        the turns' ``calls.jsonl`` from *traces*: built in a temp folder, *prepare* run,
        renamed into place, so it is complete or absent (a create, a fork, an import)."""
        conversations = self.conversations_dir(key.agent_id)
        final = self._dir(key)
        if final.exists():
            raise UsageError(f"conversation {key} already exists")
        views = fold(records)
        journal = b"".join(encode_frame(encode_record(record)) for record in records)
        history = render_history(views.messages)
        state = FolderState(
            meta,
            Checkpoint(
                journal_bytes=len(journal),
                journal_records=len(records),
                history_bytes=len(history),
                history_format=VIEW_FORMAT,
            ),
        )
        staging = conversations / _temp_folder(key, CREATING)
        try:
            make_dirs(conversations)
            staging.mkdir()
            append_durable(staging / JOURNAL_FILE, journal)
            append_durable(staging / HISTORY_FILE, history)
            for message_id in views.turns:
                turn = staging / message_id
                turn.mkdir()
                append_durable(turn / TURN_LOG_FILE, views.turn_log(message_id).encode())
                lines = traces.get(message_id)
                if lines:
                    append_durable(turn / CALLS_FILE, "".join(f"{x}\n" for x in lines).encode())
            if views.turns:
                fsync_dir(staging)
            atomic_write(staging / META_FILE, meta_bytes(state))
            if prepare is not None:
                prepare()
            try:
                staging.rename(final)
            except OSError:
                raise UsageError(f"conversation {key} already exists") from None
            fsync_dir(conversations)
        except OSError as error:
            raise StoreError(f"could not write {key}: {error}") from error
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
        if not views.messages:
            self._states.keep_recent(final, len(journal), [])

    def delete(self, lease: Lease) -> None:
        own = _FileLease.own(lease)
        key = own.key
        directory = self._existing_dir(key)
        conversations = directory.parent
        tombstone = conversations / _temp_folder(key, DELETED)
        self._states.forget(directory)
        self._let_go(key)
        try:
            directory.rename(tombstone)
            fsync_dir(conversations)
            shutil.rmtree(tombstone)
        except OSError as error:
            raise StoreError(f"could not delete {key}: {error}") from error
        # Waiters on the old lock file find the conversation gone once they get it.
        with contextlib.suppress(FileNotFoundError):
            self.layout.agent(key.agent_id).lock_file(key.conversation_id).unlink()
        own.deleted = True

    def writer_held(self, key: ConversationKey) -> bool:
        """Whether a writer, in any process, holds the conversation's lock now (read
        without taking it, see :meth:`ConversationLock.held`)."""
        return self._locks.get(key).held()

    # ------------------------------------------------------------------ reads

    def exists(self, key: ConversationKey) -> bool:
        return (self._dir(key) / JOURNAL_FILE).is_file()

    def listing(self, agent_id: str) -> list[ConversationMeta]:
        directory = self.conversations_dir(agent_id)
        if not directory.is_dir():
            return []
        metas: list[ConversationMeta] = []
        for entry in directory.iterdir():
            if not is_valid_id(entry.name):
                continue
            key = ConversationKey(agent_id, entry.name)
            try:
                metas.append(self._snapshot(key).meta)
            except ConversationNotFoundError:
                continue  # deleted meanwhile, or not a conversation folder
            except StoreError:
                state = self._states.read(entry)  # damaged: show what meta.json last said
                if state is not None:
                    metas.append(state.meta)
        return metas

    def meta(self, key: ConversationKey) -> ConversationMeta:
        return self._snapshot(key).meta

    def read(
        self,
        key: ConversationKey,
        kinds: frozenset[RecordKind] | None = None,
        *,
        turn: str | None = None,
        last: int | None = None,
    ) -> list[JournalRecord]:
        state = self._snapshot(key)
        directory = self._dir(key)
        end = state.checkpoint.journal_bytes
        try:
            if turn is None and kinds == _CHECKPOINTS and last == 1:
                return self._states.last_checkpoint(directory, end)
            if turn is None and kinds == _RECORDS and last is None:
                return self._states.records(directory, end)
            if kinds is not None or turn is not None:
                return tail_records(directory, end, kinds, turn=turn, last=last)
            _, _, located = self._load_journal(directory, end=end)
        except FileNotFoundError:
            raise ConversationNotFoundError(key.agent_id, key.conversation_id) from None
        records = [record for _, record in located]
        return records[-last:] if last is not None else records

    def messages(self, key: ConversationKey) -> Sequence[Message]:
        """From ``history.json`` when its checkpoint proves it is the journal's view."""
        state = self._snapshot(key)
        directory = self._dir(key)

        def from_journal() -> list[Message]:
            try:
                views, _, _ = self._load_journal(directory, end=state.checkpoint.journal_bytes)
            except FileNotFoundError:
                raise ConversationNotFoundError(key.agent_id, key.conversation_id) from None
            return views.messages

        if directory not in self._suspect and is_clean(directory, state.checkpoint):
            messages = read_history_view(directory, state, from_journal)
            if messages is not None:
                return messages
        return from_journal()

    def recent(self, key: ConversationKey, limit: int) -> list[Message]:
        """From the folder's tail cache (:mod:`._state_cache`), read backwards when stale."""
        state = self._snapshot(key)
        try:
            return self._states.recent(self._dir(key), state.checkpoint.journal_bytes, limit)
        except FileNotFoundError:
            raise ConversationNotFoundError(key.agent_id, key.conversation_id) from None

    # ------------------------------------------------------------------ traces

    def open_call_records(self, key: ConversationKey, message_id: str) -> CallRecordSink:
        return FileCallRecordSink(self.layout.conversation(key).calls(message_id))

    def call_records(self, key: ConversationKey, message_id: str) -> list[str]:
        self._existing_dir(key)
        return read_call_records(self.layout.conversation(key).calls(message_id))


class FileConversationStore(ConversationStore):
    """The conversation store over :class:`FileJournal`: the seed's layout under *root*."""

    backend: FileJournal

    def __init__(self, root: Path | str, *, lock_timeout: float = 10.0) -> None:
        super().__init__(FileJournal(root, lock_timeout=lock_timeout))
        self.root = self.backend.root
        self.layout = self.backend.layout

    def folder(self, key: ConversationKey) -> Path:
        """``{root}/agents/{agentId}/conversations/{conversationId}``."""
        return self.backend.folder(key)

    def conversations_dir(self, agent_id: str) -> Path:
        """``{root}/agents/{agentId}/conversations`` (checked to be under the root)."""
        return self.backend.conversations_dir(agent_id)


_CHECKPOINTS: frozenset[RecordKind] = frozenset({"checkpoint"})
_RECORDS: frozenset[RecordKind] = frozenset({"record"})


def _turn_logs(records: Sequence[JournalRecord]) -> list[tuple[str, bytes]]:
    """What *records* add to turn logs, a turn at a time, in order."""
    found: dict[str, list[JournalRecord]] = {}
    for record in records:
        turn = turn_of(record)
        if turn is not None:
            found.setdefault(turn, []).append(record)
    return [(turn, render_turn(group).encode()) for turn, group in found.items()]
