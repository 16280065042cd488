"""A turn's call records: every model call, as written to ``{messageId}/calls.jsonl``.

"Call records" are these lines; a "trace" is a turn's span tree (:mod:`agentkit.telemetry`).
A turn writes its records through the store (:meth:`ConversationStore.open_call_records`: the
file store's ``{messageId}/calls.jsonl``); the prompt lab, replays and the evaluation read them back
with :func:`agentkit.planning.replay.load_call_records`, the one reader.
"""

from __future__ import annotations

import json

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from agentkit.models.base import JsonSchema, Purpose

__all__ = ["CallRecord"]

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
    #: model's choice and what was decided (:class:`agentkit.planning.routes.RouteTrace`)
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
