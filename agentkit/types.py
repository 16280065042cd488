"""Conversation values: messages, conversation metadata, and their JSON forms.

These are the records the seed's files hold (``history.json`` entries, ``meta.json``), written
with the seed's camelCase keys. Python code uses snake_case attributes; ``to_json_dict()`` gives
the on-disk shape. Persisted wrappers carry a schema version ``v``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    SerializerFunctionWrapHandler,
    StringConstraints,
    model_serializer,
)
from pydantic.alias_generators import to_camel

from agentkit.ids import ID_PATTERN, new_message_id

__all__ = [
    "Conversation",
    "ConversationMeta",
    "ConversationStats",
    "ConversationStatus",
    "ForkOrigin",
    "IdStr",
    "Message",
    "Role",
    "Timestamp",
    "ToolCallRecord",
    "Usage",
    "format_timestamp",
    "utc_now",
]


def utc_now() -> datetime:
    """Now, in UTC, truncated to milliseconds (the precision the files keep)."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


#: moments formatted lately: a stored message's time is written three times (its journal
#: record, history.json, the turn log) and a conversation's creation time at every commit
_FORMATTED: dict[datetime, str] = {}


def format_timestamp(moment: datetime) -> str:
    """``2026-03-23T10:12:11.993Z``: the seed's ISO form, UTC, milliseconds."""
    text = _FORMATTED.get(moment)
    if text is not None:
        return text
    utc = moment if moment.tzinfo is UTC else moment.astimezone(UTC)
    text = (  # by hand: half the time of strftime, and a year below 1000 keeps four digits
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:"
        f"{utc.minute:02d}:{utc.second:02d}.{utc.microsecond // 1000:03d}Z"
    )
    if len(_FORMATTED) >= 1024:
        _FORMATTED.clear()
    _FORMATTED[moment] = text
    return text


def _require_aware(moment: datetime) -> datetime:
    zone = moment.tzinfo
    if zone is None:
        raise ValueError("timestamps must carry a time zone")
    if zone is not UTC:  # parsed "…Z" carries pydantic's own UTC zone: relabel, do not convert
        offset = moment.utcoffset()
        if offset is None:
            raise ValueError("timestamps must carry a time zone")
        moment = moment.replace(tzinfo=UTC) if not offset else moment.astimezone(UTC)
    if moment.microsecond % 1000:
        moment = moment.replace(microsecond=moment.microsecond // 1000 * 1000)
    return moment


Timestamp = Annotated[
    datetime,
    AfterValidator(_require_aware),
    PlainSerializer(format_timestamp, return_type=str, when_used="json"),
]
"""A UTC datetime with millisecond precision, serialised as ``…T…Z``."""

IdStr = Annotated[str, StringConstraints(pattern=f"^{ID_PATTERN}$", max_length=64)]
Role = Literal["user", "assistant", "system", "tool"]
ConversationStatus = Literal["running", "completed", "failed", "idle"]


class _Value(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
    )

    def to_json_dict(self) -> dict[str, Any]:
        """The on-disk/JSON shape: camelCase keys, defaults left out where they carry nothing."""
        return self.model_dump(mode="json", by_alias=True, exclude_defaults=True)


class Usage(_Value):
    """Tokens used by one model call, or summed over a turn or a conversation; ``calls``
    counts the model calls summed (0 on a backend's own per-call figure: the call tracer
    counts each call it makes). ``cached_tokens``: of the input tokens, those the provider
    read from its prompt cache (priced lower); written only when some were, so records made
    without it read and write as before."""

    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0
    cached_tokens: int = 0

    @model_serializer(mode="wrap")
    def _without_zero_cache(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if not self.cached_tokens:
            data.pop("cached_tokens", None)
            data.pop("cachedTokens", None)
        return data

    def json_dict(self) -> dict[str, int]:
        """What ``model_dump(mode="json", by_alias=True)`` gives (inside events and messages),
        written out: a turn's result and each stored reply carry one."""
        data = {
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "calls": self.calls,
        }
        if self.cached_tokens:
            data["cachedTokens"] = self.cached_tokens
        return data

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            calls=self.calls + other.calls,
            cached_tokens=self.cached_tokens + other.cached_tokens,
        )


class ToolCallRecord(_Value):
    """One tool call made while producing an assistant message (counted in stats)."""

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    ok: bool = True


class Message(_Value):
    """One entry of ``history.json``.

    A user message and the assistant reply to it share ``message_id``: the id names the turn,
    and the turn's folder ``{messageId}/messages.log`` holds both.
    """

    role: Role
    content: str
    message_id: IdStr
    timestamp: Timestamp
    tool_calls: tuple[ToolCallRecord, ...] = ()
    usage: Usage | None = None

    @classmethod
    def user(cls, content: str, *, message_id: str | None = None) -> Self:
        """A user message opening a new turn (a fresh ``msg-…`` id unless one is given)."""
        return cls(
            role="user",
            content=content,
            message_id=message_id or new_message_id(),
            timestamp=utc_now(),
        )

    @classmethod
    def assistant(
        cls,
        content: str,
        *,
        message_id: str,
        tool_calls: tuple[ToolCallRecord, ...] = (),
        usage: Usage | None = None,
    ) -> Self:
        """The assistant's reply in the turn ``message_id``."""
        return cls(
            role="assistant",
            content=content,
            message_id=message_id,
            timestamp=utc_now(),
            tool_calls=tool_calls,
            usage=usage,
        )

    def to_json_dict(self) -> dict[str, Any]:
        data = self.model_dump(mode="json", by_alias=True, exclude={"tool_calls", "usage"})
        if self.tool_calls:
            data["toolCalls"] = [call.to_json_dict() for call in self.tool_calls]
        if self.usage is not None:
            data["usage"] = self.usage.json_dict()
        return data


class ConversationStats(_Value):
    message_count: int = 0
    tool_call_count: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


class ForkOrigin(_Value):
    """``forkedFrom`` in ``meta.json``: the conversation and turn a fork was taken at
    (``message_id`` None: before the first turn)."""

    conversation_id: IdStr
    message_id: IdStr | None = None

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


class ConversationMeta(_Value):
    """``meta.json``: what a conversation list shows."""

    conversation_id: IdStr
    agent_id: IdStr
    title: str
    created_at: Timestamp
    updated_at: Timestamp
    status: ConversationStatus = "idle"
    stats: ConversationStats = ConversationStats()
    forked_from: ForkOrigin | None = None

    def to_json_dict(self) -> dict[str, Any]:
        data = self.model_dump(mode="json", by_alias=True, exclude={"stats", "forked_from"})
        data["stats"] = self.stats.to_json_dict()
        if self.forked_from is not None:
            data["forkedFrom"] = self.forked_from.to_json_dict()
        return data


class Conversation(_Value):
    """A conversation's metadata together with its messages, oldest first."""

    meta: ConversationMeta
    messages: tuple[Message, ...]

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "meta": self.meta.to_json_dict(),
            "messages": [message.to_json_dict() for message in self.messages],
        }
