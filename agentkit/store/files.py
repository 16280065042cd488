"""The file store: the seed's conversation layout under a data root, crash-safe.

::

    {root}/agents/{agentId}/conversations/
      .{conversationId}.lock        the writer lock (beside the data, never replaced)
      {conversationId}/
        journal.log                 append-only framed records: the source of truth
        meta.json                   view, replaced atomically; carries the views checkpoint
        history.json                view, a JSON array updated in place
        {messageId}/messages.log    view, one per turn

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
* While a thread holds a conversation's lock it trusts the state it last wrote there and
  writes through the files it opened once (:mod:`._held`), closed when it lets go.
* One writer per conversation across threads and processes (:mod:`._locks`). Creation goes
  through a temp directory renamed into place; deletion renames to a tombstone first.
  Leftovers of either are cleaned by :meth:`FileConversationStore.recover`.
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

from agentkit.errors import (
    ConversationBusyError,
    ConversationNotFoundError,
    StoreError,
    UsageError,
)
from agentkit.ids import check_id, is_valid_id
from agentkit.layout import (
    HISTORY_FILE,
    JOURNAL_FILE,
    META_FILE,
    TURN_LOG_FILE,
    DataLayout,
)
from agentkit.store._checkpoint import TurnCheckpoint
from agentkit.store._fsio import append_durable, atomic_write, fsync_dir, make_dirs
from agentkit.store._held import HeldFolder
from agentkit.store._journal import encode_frame
from agentkit.store._locks import WriterLocks
from agentkit.store._records import (
    AnnotationRecord,
    CheckpointRecord,
    CreatedRecord,
    JournalRecord,
    MessageRecord,
    RecordEntry,
    StatusRecord,
    Views,
    encode_record,
    fold,
)
from agentkit.store._state_cache import FolderStates, is_clean
from agentkit.store._sweep import CREATING, DELETED, recover_folders, verify_folders
from agentkit.store._traces import FileTraceSink, read_trace
from agentkit.store._views import (
    EMPTY_HISTORY,
    Checkpoint,
    FolderState,
    append_history,
    load_journal,
    meta_bytes,
    read_history_view,
    rebuild_views,
)
from agentkit.store.base import (
    ConversationKey,
    ConversationStore,
    Prepare,
    TraceSink,
    VerifyReport,
    checked_journal,
)
from agentkit.store.forks import checkpoints_of, write_file_fork, write_folder
from agentkit.store.records import ConversationRecord
from agentkit.types import ConversationMeta, ConversationStatus, Message, utc_now

__all__ = ["FileConversationStore"]


class FileConversationStore(ConversationStore):
    """Conversations as folders under ``{root}/agents/{agentId}/conversations``."""

    def __init__(self, root: Path | str, *, lock_timeout: float = 10.0) -> None:
        self.root = Path(os.path.realpath(root))
        self.layout = DataLayout(self.root)
        self.lock_timeout = lock_timeout
        self._locks = WriterLocks(self._lock_path)
        self._pending: dict[ConversationKey, list[Callable[[int], JournalRecord]]] = {}
        self._suspect: set[Path] = set()  # conversations whose last write failed with an I/O error
        self._states = FolderStates()  # so a turn's writes do not re-read meta.json
        self._dirs: dict[ConversationKey, Path] = {}  # resolved and checked once per key
        # Each conversation whose lock this thread holds: its state as written or checked
        # there and the files open for writing (agentkit.store._held); dropped at release.
        self._held: dict[ConversationKey, HeldFolder] = {}

    # ------------------------------------------------------------------ paths

    def _under_root(self, path: Path) -> Path:
        resolved = os.path.realpath(path)
        if os.path.commonpath([resolved, self.root]) != str(self.root):
            raise UsageError(f"{path} resolves outside the data root {self.root}")
        return path

    def _conversations_dir(self, agent_id: str) -> Path:
        return self._under_root(self.layout.agent(agent_id).conversations_dir)

    def _dir(self, key: ConversationKey) -> Path:
        directory = self._dirs.get(key)
        if directory is None:
            self._conversations_dir(key.agent_id)
            directory = self._under_root(self.layout.conversation(key).dir)
            if len(self._dirs) > 4096:
                self._dirs.clear()
            self._dirs[key] = directory
        return directory

    def folder(self, key: ConversationKey) -> Path:
        """``{root}/agents/{agentId}/conversations/{conversationId}``."""
        return self._dir(key)

    def conversations_dir(self, agent_id: str) -> Path:
        """``{root}/agents/{agentId}/conversations`` (checked to be under the root)."""
        return self._conversations_dir(agent_id)

    def _existing_dir(self, key: ConversationKey) -> Path:
        directory = self._dir(key)
        if not os.path.isfile(os.path.join(directory, JOURNAL_FILE)):
            raise ConversationNotFoundError(key.agent_id, key.conversation_id)
        return directory

    # ------------------------------------------------------------------ locking

    def _lock_path(self, key: ConversationKey) -> Path:
        self._conversations_dir(key.agent_id)
        return self._under_root(self.layout.agent(key.agent_id).lock_file(key.conversation_id))

    @contextmanager
    def hold(self, key: ConversationKey, timeout: float | None = None) -> Iterator[None]:
        if self._locks.held(key):  # this thread holds it already (a write inside a turn)
            yield
            return
        self._existing_dir(key)  # never create a lock file for a conversation that is not there
        wait = self.lock_timeout if timeout is None else timeout
        lock = self._locks.get(key)
        if not lock.acquire(wait):
            raise ConversationBusyError(key.agent_id, key.conversation_id, wait)
        try:
            self._existing_dir(key)  # it may have been deleted while we waited
            yield
        finally:
            try:
                if self._pending.get(key):  # notes made under the lock, not yet written
                    with contextlib.suppress(StoreError, ConversationNotFoundError):
                        self._commit(key, durable=False)
            finally:
                self._pending.pop(key, None)
                self._let_go(key)
                lock.release()

    def _let_go(self, key: ConversationKey) -> None:
        """Forget what this thread knew of *key* under its lock, and close its files."""
        held = self._held.pop(key, None)
        if held is not None:
            held.close()

    def _keep(self, key: ConversationKey, state: FolderState) -> HeldFolder:
        held = self._held.get(key)
        if held is None:
            held = self._held[key] = HeldFolder(str(self._dir(key)), state)
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
        if self._locks.held(key):
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
        try:
            with self.hold(key, timeout=0 if state is not None else None):
                return self._writable_state(key)
        except ConversationBusyError:
            if state is None:
                raise
            return state  # a writer is mid-write: its record is not acknowledged yet

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

    def recover(self, agent_id: str | None = None, *, full: bool = False) -> list[ConversationKey]:
        """Repair every conversation (of one agent, or all) left inconsistent by a crash.

        Removes leftovers of interrupted creates and deletes; returns the conversations whose
        views were rebuilt. Conversations busy with a live writer are left to that writer.

        By default only conversations whose checkpoint disagrees with the sizes of
        ``journal.log`` and ``history.json`` are rebuilt (what a crash leaves). ``full=True``
        rebuilds every view of every conversation from its journal, which also repairs damage
        that check cannot see: a turn log or ``history.json`` edited in place, an edited
        ``meta.json``, a stray temp file (what :meth:`verify` reports).
        """
        return recover_folders(self, agent_id, full=full)

    # -- the seam forks and recovery use (agentkit.store._folders.Folders) -------------------

    def journal(self, key: ConversationKey) -> list[JournalRecord]:
        with self.hold(key):
            state = self._writable_state(key)
            end = state.checkpoint.journal_bytes
            _, _, located = self._load_journal(self._dir(key), end=end)
        return [record for _, record in located]

    def restore(
        self,
        key: ConversationKey,
        records: Sequence[JournalRecord],
        traces: Mapping[str, Sequence[str]],
    ) -> ConversationMeta:
        checked_journal(key, records)
        lines = {
            turn: "".join(f"{line}\n" for line in found).encode()
            for turn, found in traces.items()
            if found
        }
        for turn in lines:
            check_id(turn, "message")
        return write_folder(self, key, records, lines)

    def settled(self, folder: Path) -> bool:
        state = self._states.read(folder)
        return state is not None and is_clean(folder, state.checkpoint)

    def repair(self, key: ConversationKey, *, full: bool) -> None:
        if full:
            self._recover_conversation(key, full=True)
        else:
            self._writable_state(key)

    def conversation_dirs(self, agent_id: str | None) -> list[Path]:
        return self._conversation_dirs(agent_id)

    def _conversation_dirs(self, agent_id: str | None) -> list[Path]:
        if agent_id is not None:
            directory = self._conversations_dir(agent_id)
            return [directory] if directory.is_dir() else []
        agents = self.layout.agents_dir
        if not agents.is_dir():
            return []
        return sorted(
            self.layout.agent(path.name).conversations_dir
            for path in agents.iterdir()
            if is_valid_id(path.name) and self.layout.agent(path.name).conversations_dir.is_dir()
        )

    # ------------------------------------------------------------------ writes

    def _commit(
        self,
        key: ConversationKey,
        *builds: Callable[[int], JournalRecord],
        durable: bool = True,
        checkpoint: TurnCheckpoint | None = None,
    ) -> ConversationMeta:
        """Append the records ``build(seq)`` in one write (and one fsync when *durable*), then
        bring the views along (never fsynced: recovery rebuilds them). Holds the lock."""
        with self.hold(key):
            builds = (*self._pending.pop(key, ()), *builds)
            state = self._writable_state(key)
            directory = self._dir(key)
            views = Views.resume(state.meta, state.checkpoint.journal_records)
            records: list[JournalRecord] = []
            for build in builds:
                record = build(state.checkpoint.journal_records + len(records) + 1)
                views.apply(record)
                records.append(record)
            if checkpoint is not None:  # as the conversation stands after the records above
                done = {"messages": views.message_count, "status": views.status}
                seq = state.checkpoint.journal_records + len(records) + 1
                record = CheckpointRecord(seq=seq, checkpoint=checkpoint.model_copy(update=done))
                views.apply(record)
                records.append(record)
            frames = b"".join(encode_frame(encode_record(record)) for record in records)
            held = self._held[key]  # _writable_state keeps it
            try:
                journal_bytes = held.append_journal(frames, sync=durable)
                if journal_bytes != state.checkpoint.journal_bytes + len(frames):
                    raise StoreError(f"the journal of {key} changed under its lock")
                for message_id in views.turns:  # at most one: these records' turn
                    held.append_turn_log(message_id, views.turn_log(message_id).encode())
                history_bytes = state.checkpoint.history_bytes
                count = state.meta.stats.message_count
                for record in records:
                    if isinstance(record, MessageRecord):
                        history_bytes = append_history(
                            held.write_history, record.message, count, history_bytes
                        )
                        count += 1
                new_state = FolderState(
                    views.meta,
                    Checkpoint(
                        journal_bytes=journal_bytes,
                        journal_records=views.records,
                        history_bytes=history_bytes,
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
            self._states.appended(directory, state.checkpoint.journal_bytes, journal_bytes, records)
            return new_state.meta

    def create(self, key: ConversationKey, title: str) -> ConversationMeta:
        conversations = self._conversations_dir(key.agent_id)
        make_dirs(conversations)
        final = self._dir(key)
        if final.exists():
            raise UsageError(f"conversation {key} already exists")
        record = CreatedRecord(
            seq=1,
            conversation_id=key.conversation_id,
            agent_id=key.agent_id,
            title=title,
            at=utc_now(),
        )
        views = fold([record])
        frame = encode_frame(encode_record(record))
        state = FolderState(
            views.meta,
            Checkpoint(
                journal_bytes=len(frame),
                journal_records=1,
                history_bytes=len(EMPTY_HISTORY),
            ),
        )
        staging = conversations / f".{key.conversation_id}{CREATING}{secrets.token_hex(4)}"
        try:
            staging.mkdir()
            append_durable(staging / JOURNAL_FILE, frame)
            append_durable(staging / HISTORY_FILE, EMPTY_HISTORY)
            atomic_write(staging / META_FILE, meta_bytes(state))
            try:
                staging.rename(final)
            except OSError:
                raise UsageError(f"conversation {key} already exists") from None
            fsync_dir(conversations)
        except OSError as error:
            raise StoreError(f"could not create {key}: {error}") from error
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
        self._states.keep_recent(final, len(frame), [])
        return state.meta

    def append(
        self,
        key: ConversationKey,
        message: Message,
        *,
        status: ConversationStatus | None = None,
        checkpoint: TurnCheckpoint | None = None,
    ) -> ConversationMeta:
        def build_message(seq: int) -> JournalRecord:
            return MessageRecord(seq=seq, message=message)

        if status is None:
            return self._commit(key, build_message, checkpoint=checkpoint)

        def build_status(seq: int) -> JournalRecord:
            return StatusRecord(seq=seq, status=status, at=utc_now())

        return self._commit(key, build_message, build_status, checkpoint=checkpoint)

    def set_status(
        self,
        key: ConversationKey,
        status: ConversationStatus,
        *,
        checkpoint: TurnCheckpoint | None = None,
    ) -> ConversationMeta:
        return self._commit(
            key,
            lambda seq: StatusRecord(seq=seq, status=status, at=utc_now()),
            checkpoint=checkpoint,
        )

    def annotate(self, key: ConversationKey, message_id: str, label: str, text: str) -> None:
        """A note in the turn log. Not a durability point: inside a turn (this thread holds
        the lock) it is written with the turn's next commit, or when the turn lets go of the
        lock, whichever comes first; otherwise at once, without an fsync."""
        check_id(message_id, "message")
        at = utc_now()

        def build(seq: int) -> JournalRecord:
            return AnnotationRecord(seq=seq, message_id=message_id, label=label, text=text, at=at)

        if self._locks.held(key):
            if key not in self._held:  # held and written or checked: it is there
                self._existing_dir(key)
            self._pending.setdefault(key, []).append(build)
        else:
            self._commit(key, build, durable=False)

    # -- turn checkpoints and forks: agentkit.store.forks does the work ---------------------

    def record_checkpoint(self, key: ConversationKey, checkpoint: TurnCheckpoint) -> None:
        # Not a durability point: written right after the turn's final commit, it rides along
        # with the conversation's next fsync (a kill -9 loses nothing; a power loss before the
        # next turn can leave the last turn without its checkpoint, i.e. not forkable there).
        self._commit(key, durable=False, checkpoint=checkpoint)

    def last_checkpoint(self, key: ConversationKey) -> TurnCheckpoint | None:
        state = self._snapshot(key)
        try:
            return self._states.last_checkpoint(self._dir(key), state.checkpoint.journal_bytes)
        except FileNotFoundError:
            raise ConversationNotFoundError(key.agent_id, key.conversation_id) from None

    def checkpoints(self, key: ConversationKey) -> list[TurnCheckpoint]:
        state = self._snapshot(key)
        _, _, located = self._load_journal(self._dir(key), end=state.checkpoint.journal_bytes)
        return checkpoints_of([record for _, record in located])

    def fork(
        self,
        source: ConversationKey,
        target: ConversationKey,
        *,
        title: str,
        at: str | None,
        prepare: Prepare | None = None,
    ) -> ConversationMeta:
        return write_file_fork(self, source, target, title=title, at=at, prepare=prepare)

    # -- typed records and traces -------------------------------------------------------------

    def add_record(self, key: ConversationKey, record: ConversationRecord) -> None:
        def build(seq: int) -> JournalRecord:
            return RecordEntry(seq=seq, record=record)

        with self.hold(key):
            count = self._writable_state(key).meta.stats.message_count
            if record.start > count:
                raise UsageError(
                    f"a record of {key} starts at message {record.start}; it has {count}"
                )
            self._commit(key, build)

    def records(self, key: ConversationKey) -> list[ConversationRecord]:
        state = self._snapshot(key)
        try:
            return self._states.records(self._dir(key), state.checkpoint.journal_bytes)
        except FileNotFoundError:
            raise ConversationNotFoundError(key.agent_id, key.conversation_id) from None

    def open_trace(self, key: ConversationKey, message_id: str) -> TraceSink:
        check_id(message_id, "message")
        return FileTraceSink(self.layout.conversation(key).calls(message_id))

    def trace(self, key: ConversationKey, message_id: str) -> list[str]:
        check_id(message_id, "message")
        self._existing_dir(key)
        return read_trace(self.layout.conversation(key).calls(message_id))

    def delete(self, key: ConversationKey) -> None:
        with self.hold(key):
            directory = self._existing_dir(key)
            conversations = directory.parent
            tombstone = conversations / f".{key.conversation_id}{DELETED}{secrets.token_hex(4)}"
            self._states.forget(directory)
            self._pending.pop(key, None)
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
        self._locks.drop(key)

    # ------------------------------------------------------------------ reads

    def exists(self, key: ConversationKey) -> bool:
        return (self._dir(key) / JOURNAL_FILE).is_file()

    def conversations(self, agent_id: str) -> list[ConversationMeta]:
        directory = self._conversations_dir(agent_id)
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
        return sorted(metas, key=lambda m: (m.updated_at, m.conversation_id), reverse=True)

    def meta(self, key: ConversationKey) -> ConversationMeta:
        return self._snapshot(key).meta

    def messages(self, key: ConversationKey) -> Sequence[Message]:
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
        if limit < 0:
            raise UsageError("limit must be >= 0")
        state = self._snapshot(key)
        try:
            return self._states.recent(self._dir(key), state.checkpoint.journal_bytes, limit)
        except FileNotFoundError:
            raise ConversationNotFoundError(key.agent_id, key.conversation_id) from None

    def turn_log(self, key: ConversationKey, message_id: str) -> str:
        check_id(message_id, "message")
        if key in self._pending and self._locks.held(key):
            self._commit(key, durable=False)  # this thread's notes, not yet written
        self._snapshot(key)
        try:
            return (self._dir(key) / message_id / TURN_LOG_FILE).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UsageError(f"conversation {key} has no turn {message_id!r}") from None

    # ------------------------------------------------------------------ verify

    def verify(self, agent_id: str | None = None) -> VerifyReport:
        return verify_folders(self, agent_id)
