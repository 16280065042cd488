"""The views in a conversation folder, read from its journal, rebuilt and checked.

The journal is the source of truth (:mod:`agentkit.store._journal`); ``meta.json`` (with the
checkpoint saying how far the views match the journal), ``history.json`` and the turn logs are
rendered from it here, byte for byte, so that writing, recovering and verifying a folder agree
on what the views must hold. :func:`load_journal` folds a journal (a damaged record is a
:class:`~agentkit.errors.CorruptJournalError` with a quarantined copy, never truncated away);
:func:`rebuild_views` is recovery; :func:`verify_conversation` compares a folder with its
journal without changing anything (what ``FileConversationStore.verify`` reports).
"""

from __future__ import annotations

import json
import os
import shutil
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pydantic_core
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from agentkit.errors import CorruptJournalError
from agentkit.layout import HISTORY_FILE, JOURNAL_FILE, META_FILE, TURN_LOG_FILE
from agentkit.store._checkpoint import TurnCheckpoint
from agentkit.store._fsio import atomic_write, fsync_dir, is_temp_name
from agentkit.store._journal import read_tail_frames, scan_frames
from agentkit.store._lazy import LazyMessages
from agentkit.store._records import (
    AnnotationRecord,
    CheckpointRecord,
    JournalRecord,
    MessageRecord,
    RecordEntry,
    Views,
    decode_record,
    decode_records,
    fold,
)
from agentkit.store.base import ConversationKey, Problem, ProblemKind
from agentkit.store.records import ConversationRecord
from agentkit.types import ConversationMeta, Message

__all__ = [
    "EMPTY_HISTORY",
    "HISTORY_CLOSE",
    "Checkpoint",
    "FolderState",
    "append_history",
    "history_entry",
    "last_checkpoint_in",
    "load_journal",
    "make_turn_dir",
    "meta_bytes",
    "parse_meta",
    "read_history_view",
    "read_state",
    "rebuild_views",
    "recent_messages",
    "records_in",
    "render_history",
    "verify_conversation",
]

EMPTY_HISTORY = b"[]\n"
HISTORY_CLOSE = b"\n]\n"
#: every message record's payload holds this; a JSON string cannot (its quotes are escaped)
_MESSAGE_KIND = b'"kind":"message"'
_CHECKPOINT_KIND = b'"kind":"checkpoint"'
_RECORD_KIND = b'"kind":"record"'


class Checkpoint(BaseModel):
    """How far the views in a conversation folder are known to match its journal."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")
    journal_bytes: int
    journal_records: int
    history_bytes: int


@dataclass(frozen=True, slots=True)
class FolderState:
    """What ``meta.json`` says: the metadata and the views checkpoint."""

    meta: ConversationMeta
    checkpoint: Checkpoint


def history_entry(message: Message) -> bytes:
    return json.dumps(message.to_json_dict(), ensure_ascii=False, separators=(",", ":")).encode()


def render_history(messages: list[Message]) -> bytes:
    if not messages:
        return EMPTY_HISTORY
    return b"[\n" + b",\n".join(history_entry(m) for m in messages) + HISTORY_CLOSE


def append_history(
    write: Callable[[int, bytes], int], message: Message, count: int, size: int
) -> int:
    """Add one entry to ``history.json`` (*count* entries, *size* bytes) in place with
    *write(offset, data)*: only the closing bracket is rewritten. Returns the new size."""
    entry = history_entry(message)
    if count == 0:
        return write(1, b"\n" + entry + HISTORY_CLOSE)
    return write(size - len(HISTORY_CLOSE), b",\n" + entry + HISTORY_CLOSE)


def meta_bytes(state: FolderState) -> bytes:
    data: dict[str, Any] = {"v": 1, **state.meta.to_json_dict()}
    data["views"] = state.checkpoint.model_dump(by_alias=True)
    # pydantic-core's writer: the same text as json.dumps(indent=2, ensure_ascii=False) at a
    # fraction of the cost (the pure-Python encoder runs whenever an indent is asked for)
    return pydantic_core.to_json(data, indent=2) + b"\n"


def parse_meta(raw: bytes) -> FolderState:
    data = json.loads(raw)
    if not isinstance(data, dict) or data.pop("v", None) != 1:
        raise ValueError("meta.json has no schema version 1")
    checkpoint = Checkpoint.model_validate(data.pop("views", None))
    return FolderState(ConversationMeta.model_validate(data), checkpoint)


def read_state(directory: Path) -> FolderState | None:
    """The folder's ``meta.json``, or None when it is missing or unreadable."""
    try:
        return parse_meta((directory / META_FILE).read_bytes())
    except (OSError, ValueError, ValidationError):
        return None


def read_history_view(
    directory: Path, state: FolderState, fallback: Callable[[], list[Message]]
) -> LazyMessages | None:
    """The whole history from ``history.json`` when its checkpoint proves it is the journal's
    view: the file read and cut into its entries (one per line), each message decoded when
    first read (:mod:`._lazy`; *fallback*, the journal's messages, if an entry does not
    validate). None when a writer moved on or the view is damaged (the journal decides)."""
    try:
        data = (directory / HISTORY_FILE).read_bytes()
    except OSError:
        return None
    count = state.meta.stats.message_count
    if len(data) != state.checkpoint.history_bytes:
        return None
    if count == 0:
        return LazyMessages([], fallback) if data == EMPTY_HISTORY else None
    if not (data.startswith(b"[\n") and data.endswith(HISTORY_CLOSE)):
        return None
    entries = data[2 : -len(HISTORY_CLOSE)].split(b",\n")
    if len(entries) != count:  # a comma and a newline never occur inside an entry's JSON text
        return None
    return LazyMessages(entries, fallback)


def recent_messages(directory: Path, end: int, limit: int) -> list[Message]:
    """The last *limit* messages of the journal's first *end* bytes, read backwards from its
    end (appending never makes this slower). Raises ``FileNotFoundError``."""
    journal = directory / JOURNAL_FILE
    found: list[Message] = []
    try:
        for payload in read_tail_frames(journal, end):
            if _MESSAGE_KIND not in payload:  # framed and checksummed, just not a message:
                continue  # skip the pydantic parse (notes and status changes outnumber them)
            record = decode_record(payload)
            if isinstance(record, MessageRecord):
                found.append(record.message)
                if len(found) == limit:
                    break
    except (ValueError, ValidationError) as error:
        raise CorruptJournalError(journal, -1, str(error), None) from None
    found.reverse()
    return found


def last_checkpoint_in(directory: Path, end: int) -> TurnCheckpoint | None:
    """The newest turn checkpoint in the journal's first *end* bytes, read backwards (a turn
    ends with one, so it is among the last records). Raises ``FileNotFoundError``."""
    journal = directory / JOURNAL_FILE
    try:
        for payload in read_tail_frames(journal, end):
            if _CHECKPOINT_KIND in payload:
                record = decode_record(payload)
                if isinstance(record, CheckpointRecord):
                    return record.checkpoint
    except (ValueError, ValidationError) as error:
        raise CorruptJournalError(journal, -1, str(error), None) from None
    return None


def records_in(directory: Path, end: int) -> list[ConversationRecord]:
    """The typed conversation records in the journal's first *end* bytes, oldest first
    (only their frames are parsed). Raises ``FileNotFoundError``."""
    journal = directory / JOURNAL_FILE
    found: list[ConversationRecord] = []
    try:
        for payload in read_tail_frames(journal, end):
            if _RECORD_KIND in payload:
                record = decode_record(payload)
                if isinstance(record, RecordEntry):
                    found.append(record.record)
    except (ValueError, ValidationError) as error:
        raise CorruptJournalError(journal, -1, str(error), None) from None
    found.reverse()
    return found


def make_turn_dir(directory: Path, message_id: str) -> Path:
    """``{directory}/{message_id}``, created (and the directory fsynced) if it is new (for
    recovery; a turn's own commits make it through :mod:`agentkit.store._held`)."""
    turn = directory / message_id
    try:
        turn.mkdir()
    except FileExistsError:
        return turn
    fsync_dir(directory)
    return turn


def _corrupt(journal: Path, data: bytes, offset: int, reason: str) -> CorruptJournalError:
    """The error for a damaged journal, with a quarantined copy of what was read."""
    quarantine = journal.with_name(f"journal.corrupt-{zlib.crc32(data):08x}.log")
    try:
        if not quarantine.exists():
            atomic_write(quarantine, data)
    except OSError:
        return CorruptJournalError(journal, offset, reason, None)
    return CorruptJournalError(journal, offset, reason, quarantine)


def load_journal(
    directory: Path, *, end: int | None = None, repair: bool = False, rewrite: bool = False
) -> tuple[Views, int, list[tuple[int, JournalRecord]]]:
    """Fold the journal (its first *end* bytes). Returns views, good end, records+offsets.

    With *repair*, a torn tail is cut off; with *rewrite* too, the journal is rewritten from
    what was read, so the bytes on disk are the bytes that were validated.
    """
    journal = directory / JOURNAL_FILE
    with open(journal, "rb") as handle:
        data = handle.read() if end is None else handle.read(end)
    scan = scan_frames(data)
    if scan.damage or (scan.bad_offset is not None and end is not None):
        raise _corrupt(journal, data, scan.bad_offset or 0, scan.bad_reason)
    try:
        records = decode_records([frame.payload for frame in scan.frames])
    except ValidationError as error:
        first = error.errors()[0]
        index = first["loc"][0] if first["loc"] else 0
        offset = scan.frames[index].offset if isinstance(index, int) else 0
        reason = f"not a journal record: {first['msg']}"
        raise _corrupt(journal, data, offset, reason) from None
    try:
        views = fold(records)
    except ValueError as error:
        raise _corrupt(journal, data, 0, str(error)) from None
    if repair and rewrite:
        atomic_write(journal, data[: scan.good_end])
    elif repair and scan.bad_offset is not None:
        os.truncate(journal, scan.good_end)  # a torn tail: no good record follows it
        fd = os.open(journal, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    located = [(frame.offset, record) for frame, record in zip(scan.frames, records, strict=True)]
    return views, scan.good_end, located


def rebuild_views(
    directory: Path,
    views: Views,
    good_end: int,
    located: list[tuple[int, JournalRecord]],
    previous: FolderState | None,
    *,
    full: bool = False,
) -> FolderState:
    """Recovery: bring every view of the folder in line with its journal (read by
    :func:`load_journal`); temp files and orphaned turn folders go. Raises ``OSError``."""
    turns = [p for p in directory.iterdir() if p.is_dir()]
    for folder in (directory, *turns):
        for entry in folder.iterdir():
            if is_temp_name(entry.name):
                entry.unlink()
    # A turn folder that no record names outlived its record: the journal lost its tail
    # after the views were written. Only folders holding just a turn log are ours.
    orphans = [
        folder
        for folder in turns
        if folder.name not in views.turns
        and {entry.name for entry in folder.iterdir()} <= {TURN_LOG_FILE}
    ]
    for folder in orphans:
        shutil.rmtree(folder)
    if orphans:
        fsync_dir(directory)
    history = render_history(views.messages)
    atomic_write(directory / HISTORY_FILE, history)
    # Turn logs can only be stale for records after the old checkpoint.
    offsets = {offset for offset, _ in located}
    start = 0
    if not full and previous is not None and previous.checkpoint.journal_bytes in offsets:
        start = previous.checkpoint.journal_bytes
    touched = {
        r.message.message_id if isinstance(r, MessageRecord) else r.message_id
        for offset, r in located
        if offset >= start and isinstance(r, MessageRecord | AnnotationRecord)
    }
    for message_id in touched:
        expected = views.turn_log(message_id).encode()
        log = directory / message_id / TURN_LOG_FILE
        if not log.is_file() or log.read_bytes() != expected:
            make_turn_dir(directory, message_id)
            atomic_write(log, expected)
    checkpoint = Checkpoint(
        journal_bytes=good_end, journal_records=views.records, history_bytes=len(history)
    )
    state = FolderState(views.meta, checkpoint)
    atomic_write(directory / META_FILE, meta_bytes(state))
    return state


def verify_conversation(key: ConversationKey, directory: Path) -> list[Problem]:
    """What is wrong with the folder of conversation *key* (held by the caller)."""

    def problem(kind: ProblemKind, detail: str) -> Problem:
        return Problem(key.agent_id, key.conversation_id, kind, detail)

    data = (directory / JOURNAL_FILE).read_bytes()
    scan = scan_frames(data)
    found: list[Problem] = []
    if scan.damage:
        return [problem("corrupt-record", f"byte {scan.bad_offset}: {scan.bad_reason}")]
    if scan.bad_offset is not None:
        found.append(
            problem("torn-tail", f"{len(data) - scan.good_end} bytes after the last record")
        )
    try:
        views = fold(decode_records([frame.payload for frame in scan.frames]))
    except (ValidationError, ValueError) as error:
        return [*found, problem("corrupt-record", str(error).splitlines()[0])]
    for folder in (directory, *(p for p in directory.iterdir() if p.is_dir())):
        found.extend(
            problem("temp-file", str(entry.relative_to(directory)))
            for entry in folder.iterdir()
            if is_temp_name(entry.name)
        )
    history = render_history(views.messages)
    state = read_state(directory)
    expected = Checkpoint(
        journal_bytes=scan.good_end, journal_records=views.records, history_bytes=len(history)
    )
    if state is None:
        found.append(problem("missing-file", f"{META_FILE} is missing or unreadable"))
    elif state.meta != views.meta or state.checkpoint != expected:
        found.append(problem("meta-mismatch", f"{META_FILE} does not match the journal"))
    try:
        actual = (directory / HISTORY_FILE).read_bytes()
    except FileNotFoundError:
        found.append(problem("missing-file", f"{HISTORY_FILE} is missing"))
    else:
        if actual != history:
            try:
                json.loads(actual)
                detail = f"{HISTORY_FILE} does not match the journal"
            except ValueError:
                detail = f"{HISTORY_FILE} is not valid JSON"
            found.append(problem("history-mismatch", detail))
    for message_id in views.turns:
        log = directory / message_id / TURN_LOG_FILE
        if not log.is_file() or log.read_bytes() != views.turn_log(message_id).encode():
            found.append(problem("turn-log-mismatch", f"{message_id}/{TURN_LOG_FILE}"))
    found.extend(
        problem("orphan-turn", entry.name)
        for entry in directory.iterdir()
        if entry.is_dir() and entry.name not in views.turns
    )
    return found
