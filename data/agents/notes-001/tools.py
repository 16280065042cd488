"""The notes agent's tools: plain typed Python functions made tools with ``@tool``.

The notes live in ``workspace/notes.json`` (one JSON list, rewritten atomically). ``toolset``
gives them to the agent together with the notes' state, so the evaluation harness can seed a
scenario's notes and check what is left after a run.
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated

from agentkit.tools import FunctionToolset, ToolContext, ToolFailedError, tool
from pydantic import BaseModel, ConfigDict, Field, JsonValue

NOTES_FILE = "notes.json"


class Priority(StrEnum):
    low = "low"
    normal = "normal"
    high = "high"


class Note(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: int
    title: str
    body: str = ""
    tags: list[str] = Field(default_factory=list)
    priority: Priority = Priority.normal
    created_at: str = ""


class NoteSeed(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=1)
    body: str = ""
    tags: list[str] = Field(default_factory=list)
    priority: Priority = Priority.normal


class NotesState(BaseModel):
    """A scenario's starting notes (ids are given in order: 1, 2, …)."""

    model_config = ConfigDict(extra="forbid")

    notes: list[NoteSeed] = Field(default_factory=list)


def _path(ctx: ToolContext) -> Path:
    return ctx.workspace / NOTES_FILE


def _load(ctx: ToolContext) -> list[Note]:
    path = _path(ctx)
    if not path.is_file():
        return []
    return [Note.model_validate(item) for item in json.loads(path.read_text(encoding="utf-8"))]


def _save(ctx: ToolContext, notes: list[Note]) -> None:
    path = _path(ctx)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps([note.model_dump(mode="json") for note in notes], ensure_ascii=False)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".notes-", suffix=".tmp")
    with os.fdopen(handle, "w", encoding="utf-8") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)


@tool(side_effect=True, examples=["note down: buy milk", "记一下：周五交报告"])
def add_note(
    ctx: ToolContext,
    title: Annotated[str, Field(min_length=1, max_length=200, description="a short title")],
    body: str = "",
    tags: list[str] | None = None,
    priority: Priority = Priority.normal,
) -> Note:
    """Save a new note; returns it with its id."""
    notes = _load(ctx)
    note = Note(
        id=max((n.id for n in notes), default=0) + 1,
        title=title.strip(),
        body=body,
        tags=tags or [],
        priority=priority,
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    _save(ctx, [*notes, note])
    return note


@tool(live_state=True, examples=["what notes do I have?", "我有哪些笔记"])
def list_notes(ctx: ToolContext, tag: str | None = None) -> dict[str, list[Note]]:
    """List the saved notes (optionally only those with a tag)."""
    notes = _load(ctx)
    if tag is not None:
        notes = [note for note in notes if tag in note.tags]
    return {"notes": notes}


@tool(examples=["find my note about the dentist"])
def search_notes(
    ctx: ToolContext, query: Annotated[str, "words to look for in titles and bodies"]
) -> dict[str, list[Note]]:
    """Find notes whose title or body contains the query (case-insensitive)."""
    folded = query.casefold()
    found = [n for n in _load(ctx) if folded in n.title.casefold() or folded in n.body.casefold()]
    return {"notes": found}


@tool(side_effect=True, examples=["delete note 2", "删掉第 2 条笔记"])
def delete_note(ctx: ToolContext, note_id: Annotated[int, Field(ge=1)]) -> dict[str, object]:
    """Delete a note by its id (list_notes shows the ids)."""
    notes = _load(ctx)
    kept = [note for note in notes if note.id != note_id]
    if len(kept) == len(notes):
        raise ToolFailedError(f"no note with id {note_id} (list_notes shows the ids)")
    _save(ctx, kept)
    return {"deleted": note_id}


def toolset(ctx: ToolContext) -> FunctionToolset:
    """The notes tools, with the notes as the toolset's state."""

    def snapshot() -> JsonValue:
        notes = _load(ctx)
        return {
            "count": len(notes),
            "titles": [note.title for note in notes],
            "notes": [note.model_dump(mode="json", exclude={"created_at"}) for note in notes],
        }

    def seed(state: JsonValue) -> None:
        given = NotesState.model_validate(state)
        _save(ctx, [Note(id=n, **seed.model_dump()) for n, seed in enumerate(given.notes, 1)])

    return FunctionToolset(
        "notes",
        [add_note, list_notes, search_notes, delete_note],
        context=ctx,
        snapshot=snapshot,
        seed=seed,
        state_model=NotesState,
    )
