"""Forks and turn checkpoints in the conversation stores.

A fork is a new conversation whose journal is the source journal's prefix up to and including
the checkpoint of one turn (re-numbered, after its own ``created`` and ``forked`` records),
ending with that turn's status. So the fork's history is the source's prefix, byte for byte
in ``history.json``, and its checkpoints are the source's (a fork can be forked again).

Why it is built this way:

* The source is only read, under its writer lock taken without waiting (a turn running there
  is a :class:`~agentkit.errors.ConversationBusyError`, nothing is written).
* The file store writes the whole fork in a temp folder ``.{id}.creating-…`` and renames it
  into place (as ``create`` does), so a crash leaves the fork complete or absent; recovery
  removes the temp folder. ``prepare`` runs just before the rename (the Agent restores the
  fork's memory there), so a visible fork always has its memory.
* Every bad request is found before anything is written: an unknown turn is
  :class:`~agentkit.errors.TurnNotFoundError`, a turn without a checkpoint (still running, or
  cut short) :class:`~agentkit.errors.TurnNotFinishedError`.
"""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Mapping, Sequence

from agentkit.errors import StoreError, TurnNotFinishedError, TurnNotFoundError, UsageError
from agentkit.layout import CALLS_FILE, HISTORY_FILE, JOURNAL_FILE, META_FILE, TURN_LOG_FILE
from agentkit.store._checkpoint import TurnCheckpoint
from agentkit.store._folders import Folders
from agentkit.store._fsio import append_durable, atomic_write, fsync_dir
from agentkit.store._journal import encode_frame
from agentkit.store._records import (
    CheckpointRecord,
    CreatedRecord,
    ForkedRecord,
    JournalRecord,
    MessageRecord,
    StatusRecord,
    encode_record,
    fold,
)
from agentkit.store._sweep import CREATING
from agentkit.store._views import Checkpoint, FolderState, meta_bytes, render_history
from agentkit.store.base import ConversationKey, Prepare
from agentkit.types import ConversationMeta, ForkOrigin, utc_now

__all__ = [
    "FORK_START",
    "Prepare",
    "checkpoints_of",
    "fork_records",
    "write_file_fork",
    "write_folder",
]

#: ``at`` for a fork taken before the first turn (an empty conversation with no memory)
FORK_START = ""


def checkpoints_of(records: Sequence[JournalRecord]) -> list[TurnCheckpoint]:
    return [r.checkpoint for r in records if isinstance(r, CheckpointRecord)]


def _cut(records: Sequence[JournalRecord], key: ConversationKey, at: str | None) -> int:
    """The index of the checkpoint record the fork ends at (0: before the first turn)."""
    if at == FORK_START:
        return 0
    marks = [
        (index, record.checkpoint.message_id)
        for index, record in enumerate(records)
        if isinstance(record, CheckpointRecord)
    ]
    turns = [r.message.message_id for r in records if isinstance(r, MessageRecord)]
    if at is None:
        if marks:
            return marks[-1][0]
        if not turns:
            return 0
        at = turns[-1]
    found = [index for index, message_id in marks if message_id == at]
    if found:
        return found[-1]
    if at in turns:
        why = (
            "it has no checkpoint: it is still running, or it was cut short (or recorded "
            "before checkpoints existed) before it finished"
        )
        raise TurnNotFinishedError(key.agent_id, key.conversation_id, at, why)
    raise TurnNotFoundError(key.agent_id, key.conversation_id, at)


def fork_records(
    records: Sequence[JournalRecord],
    source: ConversationKey,
    target: ConversationKey,
    *,
    title: str,
    at: str | None,
) -> tuple[list[JournalRecord], TurnCheckpoint | None]:
    """The journal of a fork of *source* (its *records*) at turn *at* (None: the last
    finished turn; :data:`FORK_START`: before the first), and the checkpoint it ends at."""
    if source.agent_id != target.agent_id:
        raise UsageError("a fork belongs to the agent of its source")
    cut = _cut(records, source, at)
    checkpoint = None
    if cut:
        mark = records[cut]
        assert isinstance(mark, CheckpointRecord)
        checkpoint = mark.checkpoint
    now = utc_now()
    origin = ForkOrigin(
        conversation_id=source.conversation_id,
        message_id=checkpoint.message_id if checkpoint else None,
    )
    kept = [
        record
        for record in records[1 : cut + 1]
        if not isinstance(record, CreatedRecord | StatusRecord | ForkedRecord)
    ]
    messages = sum(isinstance(record, MessageRecord) for record in kept)
    if checkpoint is not None and messages != checkpoint.messages:
        raise StoreError(
            f"the checkpoint of turn {checkpoint.message_id} in {source} counts "
            f"{checkpoint.messages} messages, the journal {messages}"
        )
    result: list[JournalRecord] = [
        CreatedRecord(
            seq=1,
            conversation_id=target.conversation_id,
            agent_id=target.agent_id,
            title=title,
            at=now,
        ),
        ForkedRecord(seq=2, origin=origin),
    ]
    result += [record.model_copy(update={"seq": seq}) for seq, record in enumerate(kept, 3)]
    status = checkpoint.status if checkpoint else "idle"
    result.append(StatusRecord(seq=len(result) + 1, status=status, at=now))
    return result, checkpoint


def write_file_fork(
    store: Folders,
    source: ConversationKey,
    target: ConversationKey,
    *,
    title: str,
    at: str | None,
    prepare: Prepare | None,
) -> ConversationMeta:
    """The file store's fork: built in a temp folder, renamed into place (see above)."""
    with store.hold(source, timeout=0):
        source_dir = store.folder(source)
        records, checkpoint = fork_records(
            store.journal(source), source, target, title=title, at=at
        )
        traces = {}
        for message_id in fold(records).turns:
            copied = source_dir / message_id / CALLS_FILE
            if copied.is_file():
                traces[message_id] = copied.read_bytes()
        return write_folder(store, target, records, traces, prepare=prepare, checkpoint=checkpoint)


def write_folder(
    store: Folders,
    target: ConversationKey,
    records: Sequence[JournalRecord],
    traces: Mapping[str, bytes],
    *,
    prepare: Prepare | None = None,
    checkpoint: TurnCheckpoint | None = None,
) -> ConversationMeta:
    """A new conversation folder holding *records* (its journal) and their views, with the
    turns' ``calls.jsonl`` from *traces*: built in a temp folder, *prepare* run, renamed into
    place, so it is complete or absent (a fork, an import)."""
    conversations = store.conversations_dir(target.agent_id)
    final = store.folder(target)
    if final.exists():
        raise UsageError(f"conversation {target} already exists")
    views = fold(records)
    journal = b"".join(encode_frame(encode_record(record)) for record in records)
    history = render_history(views.messages)
    folder_state = FolderState(
        views.meta,
        Checkpoint(
            journal_bytes=len(journal),
            journal_records=views.records,
            history_bytes=len(history),
        ),
    )
    conversations.mkdir(parents=True, exist_ok=True)
    name = f".{target.conversation_id}{CREATING}{secrets.token_hex(4)}"
    staging = conversations / name
    try:
        staging.mkdir()
        append_durable(staging / JOURNAL_FILE, journal)
        append_durable(staging / HISTORY_FILE, history)
        for message_id in views.turns:
            turn = staging / message_id
            turn.mkdir()
            append_durable(turn / TURN_LOG_FILE, views.turn_log(message_id).encode())
            if message_id in traces:
                append_durable(turn / CALLS_FILE, traces[message_id])
        fsync_dir(staging)
        atomic_write(staging / META_FILE, meta_bytes(folder_state))
        if prepare is not None:
            prepare(checkpoint)
        try:
            staging.rename(final)
        except OSError:
            raise UsageError(f"conversation {target} already exists") from None
        fsync_dir(conversations)
    except OSError as error:
        raise StoreError(f"could not write {target}: {error}") from error
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return folder_state.meta
