"""The trace of a planner turn: every model call, as written to ``{messageId}/calls.jsonl``.

The prompt lab and the evaluation read it back (:func:`agentkit.planning.replay.load_call_records`);
where the file lives is :mod:`agentkit.layout`'s business.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from agentkit.layout import ConversationPaths
from agentkit.models.base import JsonSchema, Purpose

__all__ = ["CallRecord", "CallsFile", "append_call_record"]

#: id(schema) -> (the schema, kept alive so the id stays its own; its JSON)
_SCHEMA_JSON: dict[int, tuple[JsonSchema, str]] = {}


def _schema_json(schema: JsonSchema) -> str:
    """The JSON of *schema*, written once per schema object (schemas are built once per
    agent and never changed in place; a record made by validation holds a copy, which is
    simply written again)."""
    cached = _SCHEMA_JSON.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    text = pydantic_core.to_json(schema).decode()
    if len(_SCHEMA_JSON) >= 64:
        _SCHEMA_JSON.clear()
    _SCHEMA_JSON[id(schema)] = (schema, text)
    return text


class CallRecord(BaseModel):
    """One model call of a turn, as written to ``{messageId}/calls.jsonl``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    purpose: Purpose
    messages: list[dict[str, str]]
    schema_: JsonSchema | None = Field(default=None, serialization_alias="schema")
    raw: str = ""
    parsed: JsonValue = None
    error: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0
    #: a tool-choice decision (purpose ``route``): the ranked candidates with their scores, the
    #: model's choice and what was decided (:class:`agentkit.planning.tool_choice.RouteTrace`)
    route: JsonValue = None

    def to_json_line(self) -> str:
        # pydantic-core's own JSON writer (a prompt is kilobytes: a dict and json.dumps of it
        # cost several times more); ``route`` only on routing decisions; the schema (the same
        # few kilobytes in every plan call) written once per schema object, then reused
        exclude = {"route"} if self.route is None else set()
        if self.schema_ is None:
            return self.model_dump_json(by_alias=True, exclude=exclude)
        rest = self.model_dump_json(by_alias=True, exclude=exclude | {"schema_"})
        return f'{rest[:-1]},"schema":{_schema_json(self.schema_)}}}'

    @classmethod
    def from_json_line(cls, line: str) -> CallRecord:
        """The record of one ``calls.jsonl`` line (raises ``ValueError`` when it is not one)."""
        data = json.loads(line)
        if isinstance(data, dict) and "schema" in data:
            data["schema_"] = data.pop("schema")
        return cls.model_validate(data)


def append_call_record(conversation_dir: Path, message_id: str, record: CallRecord) -> None:
    """Append *record* to the ``calls.jsonl`` of turn *message_id* in *conversation_dir*
    (one ``O_APPEND`` write of the whole line; the turn's folder is made if it is missing)."""
    calls = CallsFile(conversation_dir, message_id)
    try:
        calls.append(record)
    finally:
        calls.close()


class CallsFile:
    """A turn's ``calls.jsonl``, opened on the first record and kept open until :meth:`close`
    (one ``O_APPEND`` write per record: a reader sees whole lines)."""

    def __init__(self, conversation_dir: Path, message_id: str) -> None:
        self.path = ConversationPaths(conversation_dir).calls(message_id)
        self._fd: int | None = None

    def append(self, record: CallRecord) -> None:
        line = (record.to_json_line() + "\n").encode()
        if self._fd is None:
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
            try:
                self._fd = os.open(self.path, flags, 0o644)
            except FileNotFoundError:  # the turn's folder is made by its first journal commit
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(self.path, flags, 0o644)
        view = memoryview(line)
        while view:
            view = view[os.write(self._fd, view) :]

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
