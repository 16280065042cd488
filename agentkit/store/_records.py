"""Journal records and the fold that turns them into a conversation's views.

Every record is a versioned JSON object with a literal ``kind``. Folding the records in order
gives ``meta.json``, ``history.json`` and the per-turn ``messages.log`` files; recovery and
``verify()`` both use this fold, so the views have exactly one definition.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter

from agentkit.store._checkpoint import TurnCheckpoint
from agentkit.store.records import ConversationRecord
from agentkit.types import (
    ConversationMeta,
    ConversationStats,
    ConversationStatus,
    ForkOrigin,
    IdStr,
    Message,
    Role,
    Timestamp,
    format_timestamp,
)

__all__ = [
    "AnnotationRecord",
    "CheckpointRecord",
    "CreatedRecord",
    "ForkedRecord",
    "LABEL_PATTERN",
    "JournalRecord",
    "Label",
    "MessageRecord",
    "RecordEntry",
    "StatusRecord",
    "TurnEntry",
    "Views",
    "decode_record",
    "decode_records",
    "encode_record",
    "fold",
    "render_block",
    "render_turn",
    "role_label",
    "turn_of",
]

LABEL_PATTERN = r"^[A-Z][A-Z_]{0,15}$"
Label = Annotated[str, StringConstraints(pattern=LABEL_PATTERN)]
"""An upper-case block label in ``messages.log`` (``USER``, ``AGENT``, ``SESSION``, …)."""

_ROLE_LABELS: dict[Role, str] = {
    "user": "USER",
    "assistant": "AGENT",
    "system": "SYSTEM",
    "tool": "TOOL",
}


def role_label(role: Role) -> str:
    return _ROLE_LABELS[role]


def render_block(label: str, at: datetime, text: str) -> str:
    """One ``messages.log`` block: ``[ISO-time] [LABEL]``, the text, a blank line."""
    return f"[{format_timestamp(at)}] [{label}]\n{text}\n\n"


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    v: Literal[1] = 1
    seq: int = Field(ge=1)


class CreatedRecord(_Record):
    kind: Literal["created"] = "created"
    conversation_id: IdStr
    agent_id: IdStr
    title: str
    at: Timestamp


class MessageRecord(_Record):
    kind: Literal["message"] = "message"
    message: Message


class StatusRecord(_Record):
    kind: Literal["status"] = "status"
    status: ConversationStatus
    at: Timestamp


class AnnotationRecord(_Record):
    """A block in a turn's ``messages.log`` that is not a chat message (e.g. which scenario)."""

    kind: Literal["annotation"] = "annotation"
    message_id: IdStr
    label: Label
    text: str
    at: Timestamp


class CheckpointRecord(_Record):
    """The end of a finished turn: what restores the conversation as it stood then
    (:mod:`agentkit.store._checkpoint`). Not part of any view."""

    kind: Literal["checkpoint"] = "checkpoint"
    checkpoint: TurnCheckpoint


class ForkedRecord(_Record):
    """The second record of a fork: where it was taken (``forkedFrom`` in meta.json)."""

    kind: Literal["forked"] = "forked"
    origin: ForkOrigin


class RecordEntry(_Record):
    """A typed conversation record (:mod:`agentkit.store.records`: a compression, a reset),
    in order with the messages. Not part of any view."""

    kind: Literal["record"] = "record"
    record: ConversationRecord


JournalRecord = Annotated[
    CreatedRecord
    | MessageRecord
    | StatusRecord
    | AnnotationRecord
    | CheckpointRecord
    | ForkedRecord
    | RecordEntry,
    Field(discriminator="kind"),
]
_RECORD_ADAPTER: TypeAdapter[JournalRecord] = TypeAdapter(JournalRecord)
_RECORDS_ADAPTER: TypeAdapter[list[JournalRecord]] = TypeAdapter(list[JournalRecord])


def encode_record(record: JournalRecord) -> bytes:
    # the record's own serializer: the same bytes as the union adapter's, without its
    # search for the member (a third of the cost)
    return record.__pydantic_serializer__.to_json(record, by_alias=True)


def decode_record(payload: bytes) -> JournalRecord:
    """Parse one payload; raises ``pydantic.ValidationError`` when it is not a record."""
    return _RECORD_ADAPTER.validate_json(payload)


def decode_records(payloads: list[bytes]) -> list[JournalRecord]:
    """Parse many payloads in one validation pass (much faster than one call each).

    Raises ``pydantic.ValidationError``; the first error's ``loc[0]`` is the payload's index.
    """
    return _RECORDS_ADAPTER.validate_json(b"[" + b",".join(payloads) + b"]")


TurnEntry = tuple[str, datetime, str]
"""One block of a turn log: (label, time, text)."""


def turn_of(record: JournalRecord) -> str | None:
    """The turn a record belongs to (messages and notes: their message id), else None."""
    if isinstance(record, MessageRecord):
        return record.message.message_id
    if isinstance(record, AnnotationRecord):
        return record.message_id
    return None


def render_turn(records: Iterable[JournalRecord]) -> str:
    """The text of a turn's ``messages.log``: a block per message and note of *records*."""
    blocks: list[str] = []
    for record in records:
        if isinstance(record, MessageRecord):
            message = record.message
            blocks.append(
                render_block(role_label(message.role), message.timestamp, message.content)
            )
        elif isinstance(record, AnnotationRecord):
            blocks.append(render_block(record.label, record.at, record.text))
    return "".join(blocks)


@dataclass
class Views:
    """The fold of a journal: everything the view files show.

    Counters, not copies: applying a record is O(1), and the metadata value is built on
    demand, so folding a long journal stays cheap.
    """

    conversation_id: str
    agent_id: str
    title: str
    created_at: datetime
    updated_at: datetime
    status: ConversationStatus = "idle"
    message_count: int = 0
    tool_call_count: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    records: int = 0
    forked_from: ForkOrigin | None = None
    messages: list[Message] = field(default_factory=list)
    turns: dict[str, list[TurnEntry]] = field(default_factory=dict)

    @classmethod
    def resume(cls, meta: ConversationMeta, records: int) -> Views:
        """Views that continue from *meta* (without the earlier messages)."""
        return cls(
            conversation_id=meta.conversation_id,
            agent_id=meta.agent_id,
            title=meta.title,
            created_at=meta.created_at,
            updated_at=meta.updated_at,
            status=meta.status,
            message_count=meta.stats.message_count,
            tool_call_count=meta.stats.tool_call_count,
            input_tokens=meta.stats.input_tokens,
            output_tokens=meta.stats.output_tokens,
            records=records,
            forked_from=meta.forked_from,
        )

    @property
    def meta(self) -> ConversationMeta:
        # built, not validated: every field comes from validated records and our counters
        return ConversationMeta.model_construct(
            conversation_id=self.conversation_id,
            agent_id=self.agent_id,
            title=self.title,
            created_at=self.created_at,
            updated_at=self.updated_at,
            status=self.status,
            stats=ConversationStats.model_construct(
                message_count=self.message_count,
                tool_call_count=self.tool_call_count,
                input_tokens=self.input_tokens,
                output_tokens=self.output_tokens,
            ),
            forked_from=self.forked_from,
        )

    def turn_log(self, message_id: str) -> str:
        """The text of ``{message_id}/messages.log``."""
        return "".join(render_block(*entry) for entry in self.turns[message_id])

    def apply(self, record: JournalRecord) -> None:
        self.records += 1
        match record:
            case MessageRecord(message=message):
                self.messages.append(message)
                self.message_count += 1
                self.tool_call_count += len(message.tool_calls)
                if message.usage is not None:
                    self.input_tokens += message.usage.input_tokens
                    self.output_tokens += message.usage.output_tokens
                self.updated_at = message.timestamp
                self.turns.setdefault(message.message_id, []).append(
                    (role_label(message.role), message.timestamp, message.content)
                )
            case StatusRecord(status=status, at=at):
                self.status = status
                self.updated_at = at
            case AnnotationRecord(message_id=message_id, label=label, text=text, at=at):
                self.turns.setdefault(message_id, []).append((label, at, text))
            case ForkedRecord(origin=origin):
                self.forked_from = origin
            case CreatedRecord():
                raise ValueError(f"record {record.seq}: a second 'created' record")


def fold(records: Iterable[JournalRecord]) -> Views:
    """Replay *records* (the first must be ``created``) into :class:`Views`."""
    iterator = iter(records)
    first = next(iterator, None)
    if not isinstance(first, CreatedRecord):
        raise ValueError("a journal must start with a 'created' record")
    views = Views(
        conversation_id=first.conversation_id,
        agent_id=first.agent_id,
        title=first.title,
        created_at=first.at,
        updated_at=first.at,
        records=1,
    )
    for record in iterator:
        if record.seq != views.records + 1:
            raise ValueError(f"record {record.seq} follows record {views.records}")
        views.apply(record)
    return views
