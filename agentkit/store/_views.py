"""The views in a conversation folder, read from its journal, rebuilt and checked.

The journal is the source of truth (:mod:`agentkit.store._journal`); ``meta.json`` (with the
checkpoint saying how far the views match the journal), ``history.json`` and the turn logs are
rendered from it here, so that writing, recovering and verifying a folder agree on what the
views must hold. :func:`load_journal` folds a journal (a damaged record is a
:class:`~agentkit.errors.CorruptJournalError` with a quarantined copy, never truncated away);
:func:`rebuild_views` is recovery; :func:`scan_journal` and :func:`check_folder` compare a
folder with its journal without changing anything (what ``verify`` reports for the file
store).

Views outlive the release that wrote them, so they are versioned and checked by what they
say. ``meta.json`` carries its format (``v``, :data:`VIEW_FORMAT` now) and, in its views
checkpoint, the oldest format an entry of ``history.json`` was written in
(``historyFormat``; a ``meta.json`` of format 1 has none: its history is format 1 too).
:func:`check_folder` parses both and compares them with the journal's fold field by field
(a field an older format did not write takes its default, as the journal's own record of it
does), so a view an earlier release wrote is reported as ``earlier-format`` (fine), and a
changed or missing entry as a mismatch. Turn logs have had one format (1) since the first
release; they are compared with that rendering, byte for byte.

An old view is brought to the current format by writing, never by reading or verifying:

* the next turn rewrites ``meta.json`` in the current format and appends its entries to
  ``history.json`` in the current format (in place, as every append does), carrying the
  older ``historyFormat`` along, since the older entries stay as they were written;
* ``agentkit verify --repair`` (and recovery after a crash) rebuild ``history.json`` whole
  from the journal — temp file, fsync, ``os.replace``, fsync of the folder — then
  ``meta.json`` the same way, so a crash at any point leaves either the old views (which
  verify clean) or the new ones, and the journal, the source of truth, is never touched.

Format history: 1 (to 2026-12-02): ``usage`` without ``calls``; ``meta.json`` ``v`` 1 and no
``historyFormat``. 2 (2026-12-07): ``usage.calls``; ``v`` 2 and ``historyFormat``.
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
from agentkit.layout import HISTORY_FILE, JOURNAL_FILE, META_FILE, TURN_EVENTS_FILE, TURN_LOG_FILE
from agentkit.store._fsio import atomic_write, fsync_dir, is_temp_name
from agentkit.store._journal import read_tail_frames, scan_frames
from agentkit.store._lazy import LazyMessages
from agentkit.store._records import (
    JournalRecord,
    Views,
    decode_record,
    decode_records,
    fold,
    turn_of,
)
from agentkit.store.backend import Scanned
from agentkit.store.values import ConversationKey, Problem, ProblemKind
from agentkit.types import ConversationMeta, Message

__all__ = [
    "EMPTY_HISTORY",
    "HISTORY_CLOSE",
    "VIEW_FORMAT",
    "Checkpoint",
    "FolderState",
    "append_history",
    "check_folder",
    "history_entry",
    "load_journal",
    "make_turn_dir",
    "meta_bytes",
    "parse_meta",
    "read_history_view",
    "read_state",
    "rebuild_views",
    "render_history",
    "scan_journal",
    "tail_records",
]

EMPTY_HISTORY = b"[]\n"
HISTORY_CLOSE = b"\n]\n"

#: the format this release writes views in (the module docstring lists every format)
VIEW_FORMAT = 2
_FORMATS = frozenset({1, 2})
_EARLIER = "written by an earlier release (fine)"


class Checkpoint(BaseModel):
    """How far the views in a conversation folder are known to match its journal, and the
    oldest format an entry of its ``history.json`` is in (1 when a format-1 ``meta.json``
    does not say)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")
    journal_bytes: int
    journal_records: int
    history_bytes: int
    history_format: int = 1


@dataclass(frozen=True, slots=True)
class FolderState:
    """What ``meta.json`` says: the metadata, the views checkpoint and the format
    ``meta.json`` itself was written in."""

    meta: ConversationMeta
    checkpoint: Checkpoint
    format: int = VIEW_FORMAT


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
    """``meta.json`` in the current format (whatever format *state* was read in)."""
    data: dict[str, Any] = {"v": VIEW_FORMAT, **state.meta.to_json_dict()}
    data["views"] = state.checkpoint.model_dump(by_alias=True)
    # pydantic-core's writer: the same text as json.dumps(indent=2, ensure_ascii=False) at a
    # fraction of the cost (the pure-Python encoder runs whenever an indent is asked for)
    return pydantic_core.to_json(data, indent=2) + b"\n"


def parse_meta(raw: bytes) -> FolderState:
    """``meta.json`` of any format this release reads (fields a format did not write take
    their defaults). Raises ``ValueError`` (``ValidationError`` is one)."""
    data = json.loads(raw)
    if not isinstance(data, dict) or data.get("v") not in _FORMATS:
        raise ValueError(f"meta.json has no schema version this release reads ({sorted(_FORMATS)})")
    version = data.pop("v")
    views = data.pop("views", None)
    if version == 1 and isinstance(views, dict) and "historyFormat" in views:
        raise ValueError("meta.json of format 1 with a format-2 field (historyFormat)")
    checkpoint = Checkpoint.model_validate(views)
    return FolderState(ConversationMeta.model_validate(data), checkpoint, version)


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


def tail_records(
    directory: Path,
    end: int,
    kinds: frozenset[str] | None,
    *,
    turn: str | None = None,
    last: int | None = None,
) -> list[JournalRecord]:
    """The records of *kinds* (None: any) and of *turn* (its messages and notes) in the
    journal's first *end* bytes, the *last* N of them, oldest first. Read backwards from the
    end, so the last few cost O(N), not O(history); only the frames that can match are
    parsed (a kind or an id can only occur as such in a payload: the quotes of a JSON string
    inside it are escaped). Raises ``FileNotFoundError``."""
    journal = directory / JOURNAL_FILE
    marks = None if kinds is None else [b'"kind":"%s"' % kind.encode() for kind in kinds]
    wanted = None if turn is None else b'"%s"' % turn.encode()
    found: list[JournalRecord] = []
    if last is not None and last <= 0:
        return found
    try:
        for payload in read_tail_frames(journal, end):
            if marks is not None and not any(mark in payload for mark in marks):
                continue
            if wanted is not None and wanted not in payload:
                continue
            record = decode_record(payload)
            if (kinds is not None and record.kind not in kinds) or (
                turn is not None and turn_of(record) != turn
            ):
                continue
            found.append(record)
            if len(found) == last:
                break
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
    touched = {turn for offset, r in located if offset >= start and (turn := turn_of(r))}
    for message_id in touched:
        expected = views.turn_log(message_id).encode()
        log = directory / message_id / TURN_LOG_FILE
        if not log.is_file() or log.read_bytes() != expected:
            make_turn_dir(directory, message_id)
            atomic_write(log, expected)
    checkpoint = Checkpoint(
        journal_bytes=good_end,
        journal_records=views.records,
        history_bytes=len(history),
        history_format=VIEW_FORMAT,
    )
    state = FolderState(views.meta, checkpoint)
    atomic_write(directory / META_FILE, meta_bytes(state))
    return state


def scan_journal(key: ConversationKey, directory: Path) -> Scanned:
    """Every record of the folder's journal, as ``verify`` reads it (the caller holds its
    lock): damage in the middle is a ``corrupt-record``, a torn tail a ``torn-tail`` after
    the records before it. Raises ``FileNotFoundError``."""
    agent, name = key.agent_id, key.conversation_id
    data = (directory / JOURNAL_FILE).read_bytes()
    scan = scan_frames(data)
    if scan.damage:
        detail = f"byte {scan.bad_offset}: {scan.bad_reason}"
        return Scanned(None, problems=[Problem(agent, name, "corrupt-record", detail)])
    found: list[Problem] = []
    if scan.bad_offset is not None:
        detail = f"{len(data) - scan.good_end} bytes after the last record"
        found.append(Problem(agent, name, "torn-tail", detail))
    try:
        records = decode_records([frame.payload for frame in scan.frames])
    except ValidationError as error:
        detail = str(error).splitlines()[0]
        return Scanned(None, problems=[*found, Problem(agent, name, "corrupt-record", detail)])
    return Scanned(records, scan.good_end, found)


def _history_problem(actual: bytes, messages: list[Message]) -> str | None:
    """What ``history.json`` (*actual*, not the current rendering) gets wrong against the
    journal's *messages*, read by meaning: None when every entry says the journal's message
    (fields its format did not write at their defaults)."""
    try:
        entries = json.loads(actual)
    except ValueError:
        return f"{HISTORY_FILE} is not valid JSON"
    if not isinstance(entries, list):
        return f"{HISTORY_FILE} is not a JSON array"
    for index, (entry, message) in enumerate(zip(entries, messages, strict=False)):
        try:
            said = Message.model_validate(entry)
        except ValidationError:
            return f"{HISTORY_FILE} does not match the journal: entry {index} is not a message"
        if said != message:
            where = f"entry {index} ({message.message_id}, {message.role})"
            return f"{HISTORY_FILE} does not match the journal: {where} differs"
    if len(entries) != len(messages):
        counts = f"{len(entries)} entries, the journal has {len(messages)} messages"
        return f"{HISTORY_FILE} does not match the journal: {counts}"
    return None


Finding = tuple[ProblemKind | None, str]
"""What a view check found: a problem or note kind and its detail (None: nothing)."""


def _meta_findings(state: FolderState | None, views: Views, good_end: int, size: int) -> Finding:
    """``meta.json`` (*state*, None: unreadable) read by meaning against the journal's fold
    *views* of *good_end* bytes and a ``history.json`` of *size* bytes."""
    if state is None:
        return "missing-file", f"{META_FILE} is missing or unreadable"
    checkpoint = state.checkpoint
    if (
        state.meta != views.meta
        or checkpoint.journal_bytes != good_end
        or checkpoint.journal_records != views.records
        or checkpoint.history_bytes != size
        or checkpoint.history_format not in _FORMATS
    ):
        return "meta-mismatch", f"{META_FILE} does not match the journal"
    if state.format < VIEW_FORMAT:
        return "earlier-format", f"{META_FILE} {_EARLIER}: format {state.format}, now {VIEW_FORMAT}"
    return None, ""


def _history_findings(
    actual: bytes | None, rendered: bytes, messages: list[Message], state: FolderState | None
) -> Finding:
    """``history.json`` (*actual*, None: missing) against its current rendering, and read by
    meaning when they differ (the format *state* says it was written in)."""
    if actual is None:
        return "missing-file", f"{HISTORY_FILE} is missing"
    if actual == rendered:
        return None, ""
    detail = _history_problem(actual, messages)
    written = 1 if state is None else state.checkpoint.history_format
    if detail is None and written >= VIEW_FORMAT:
        detail = f"{HISTORY_FILE} says the journal's messages, not as format {written} writes"
    if detail is not None:
        return "history-mismatch", detail
    return "earlier-format", f"{HISTORY_FILE} {_EARLIER}: format {written}, now {VIEW_FORMAT}"


def is_turn_events_temp(name: str) -> bool:
    """A temp file :func:`atomic_write` made for the turn events cache (``turn-events.log``)."""
    return is_temp_name(name) and name.startswith(f".{TURN_EVENTS_FILE}.")


def check_folder(
    key: ConversationKey, directory: Path, views: Views, good_end: int
) -> list[Problem]:
    """What the folder's views get wrong against *views*, the fold of its journal's first
    *good_end* bytes (the caller holds its lock): temp files (not the live turn's events
    cache's: that file is never fsynced nor part of the conversation, and its next turn
    sweeps a temp file a crash left; :mod:`agentkit.store.file_events`), ``meta.json`` and its
    checkpoint, ``history.json``, turn logs, turn folders no record names. Views are read by
    what they say (the module docstring): one an earlier release wrote is an
    ``earlier-format`` note, not a problem. Reads only."""

    def problem(kind: ProblemKind, detail: str) -> Problem:
        return Problem(key.agent_id, key.conversation_id, kind, detail)

    found: list[Problem] = []
    for folder in (directory, *(p for p in directory.iterdir() if p.is_dir())):
        found.extend(
            problem("temp-file", str(entry.relative_to(directory)))
            for entry in folder.iterdir()
            if is_temp_name(entry.name) and not is_turn_events_temp(entry.name)
        )
    history = render_history(views.messages)
    try:
        actual: bytes | None = (directory / HISTORY_FILE).read_bytes()
    except FileNotFoundError:
        actual = None
    state = read_state(directory)
    size = len(history) if actual is None else len(actual)
    for kind, detail in (
        _meta_findings(state, views, good_end, size),
        _history_findings(actual, history, views.messages, state),
    ):
        if kind is not None:
            found.append(problem(kind, detail))
    for message_id in views.turns:
        # one turn-log format (1) so far: compared with its rendering
        log = directory / message_id / TURN_LOG_FILE
        if not log.is_file() or log.read_bytes() != views.turn_log(message_id).encode():
            found.append(problem("turn-log-mismatch", f"{message_id}/{TURN_LOG_FILE}"))
    found.extend(
        problem("orphan-turn", entry.name)
        for entry in directory.iterdir()
        if entry.is_dir() and entry.name not in views.turns
    )
    return found
