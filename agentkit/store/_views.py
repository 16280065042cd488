"""The views in a conversation folder: ``meta.json`` and ``history.json``, and their check.

The journal is the source of truth (:mod:`agentkit.store._journal`); ``meta.json`` (with the
checkpoint saying how far the views match the journal) and ``history.json`` are rendered from
it here, byte for byte, so that writing, recovering and verifying a folder agree on what the
views must hold. :func:`verify_conversation` compares a folder with its journal without
changing anything (what ``FileConversationStore.verify`` reports).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from agentkit.layout import HISTORY_FILE, JOURNAL_FILE, META_FILE, TURN_LOG_FILE
from agentkit.store._fsio import is_temp_name
from agentkit.store._journal import scan_frames
from agentkit.store._records import decode_records, fold
from agentkit.store.base import ConversationKey, Problem, ProblemKind
from agentkit.types import ConversationMeta, Message

__all__ = [
    "EMPTY_HISTORY",
    "HISTORY_CLOSE",
    "Checkpoint",
    "FolderState",
    "history_entry",
    "meta_bytes",
    "parse_meta",
    "read_state",
    "render_history",
    "verify_conversation",
]

EMPTY_HISTORY = b"[]\n"
HISTORY_CLOSE = b"\n]\n"


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


def meta_bytes(state: FolderState) -> bytes:
    data: dict[str, Any] = {"v": 1, **state.meta.to_json_dict()}
    data["views"] = state.checkpoint.model_dump(by_alias=True)
    return json.dumps(data, ensure_ascii=False, indent=2).encode() + b"\n"


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
