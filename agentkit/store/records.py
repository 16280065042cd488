"""Typed records a conversation keeps beside its messages: where its chat window starts.

Why: a compression summarises the window's older part into TaskState, a ``/clear`` forgets
it; from then on the window starts later in the history. That fact used to be a sentence in
the history (a ``[compressed: …]`` system message, a ``/clear`` found by its text) parsed back
by every reader. Now it is a value the store keeps with the conversation, in order with its
messages (the file store: a ``record`` entry of the journal; PostgreSQL: a row), so a reader
asks the store, never a text.

Each record names ``start``: the index in the whole history of the first message the window
keeps from then on. Records only move the start forward (a later record's ``start`` wins);
:func:`window_start` says where the window starts after a list of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from agentkit.types import IdStr, Timestamp

__all__ = [
    "CompressionRecord",
    "ConversationRecord",
    "ResetRecord",
    "decode_conversation_record",
    "window_start",
]


class _Base(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    version: Literal[1] = 1
    #: the turn after which it happened
    message_id: IdStr
    at: Timestamp
    #: the history index of the first message the window keeps from now on
    start: int = Field(ge=0)


class CompressionRecord(_Base):
    """The window's older part was summarised into TaskState; the last ``kept`` stay."""

    kind: Literal["compression"] = "compression"
    #: messages of the window summarised (they live on in TaskState)
    summarised: int = Field(ge=0)
    #: messages of the window kept as they are
    kept: int = Field(ge=0)
    #: the compression strategy (``compression.strategy``)
    strategy: str = "model"
    facts_kept: int = Field(default=0, ge=0)
    #: model-written facts dropped because the window never said them
    facts_ungrounded: int = Field(default=0, ge=0)
    summary_ms: float | None = None


class ResetRecord(_Base):
    """``/clear``: TaskState and ExecutionState were forgotten; the window starts after it."""

    kind: Literal["reset"] = "reset"


ConversationRecord = Annotated[CompressionRecord | ResetRecord, Field(discriminator="kind")]
_ADAPTER: TypeAdapter[ConversationRecord] = TypeAdapter(ConversationRecord)


def decode_conversation_record(data: str | bytes) -> ConversationRecord:
    """A record from its JSON (raises ``pydantic.ValidationError`` when it is not one)."""
    return _ADAPTER.validate_json(data)


def window_start(records: Iterable[ConversationRecord], *, compressed: bool = True) -> int:
    """The history index where the chat window starts after *records* (0: none). With
    *compressed* False compressions are ignored (only resets cut: what the compression lab
    sweeps)."""
    start = 0
    for record in records:
        if compressed or isinstance(record, ResetRecord):
            start = max(start, record.start)
    return start
