"""Request and response bodies of the HTTP API (camelCase JSON, as the seed's files).

Requests are the trust boundary: every field is typed and bounded, unknown fields are refused
(``extra="forbid"``), and ids are full-matched against the id rule (an anchored pattern for
the OpenAPI document, then :func:`agentkit.ids.check_id` itself) before anything is touched.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints
from pydantic.alias_generators import to_camel

from agentkit.agent import MAX_MESSAGE_LENGTH, MAX_TITLE_LENGTH
from agentkit.ids import ID_PATTERN, check_id
from agentkit.types import ConversationMeta, Message

__all__ = [
    "ID_REGEX",
    "AgentInfo",
    "AgentList",
    "AgentSummary",
    "CancelResult",
    "ChatRequest",
    "ConversationDetail",
    "ConversationList",
    "CreateConversationRequest",
    "Deleted",
    "ForkRequest",
    "Health",
]

ID_REGEX = f"^{ID_PATTERN}$"


def _conversation_id(value: str) -> str:
    return check_id(value, "conversation")


ConversationIdField = Annotated[
    str,
    StringConstraints(pattern=ID_REGEX, max_length=64),
    AfterValidator(_conversation_id),
]


class _Body(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class ChatRequest(_Body):
    """One user message; without ``conversationId`` a new conversation is started."""

    message: str = Field(
        min_length=1,
        max_length=MAX_MESSAGE_LENGTH,
        pattern=r"\S",
        description="the user's message; it must contain something besides whitespace",
    )
    conversation_id: ConversationIdField | None = None


class CreateConversationRequest(_Body):
    title: str = Field(default="New conversation", max_length=MAX_TITLE_LENGTH)


class ForkRequest(_Body):
    """``POST …/fork``: the turn to fork at (a message id; none: the last finished turn)."""

    at: str | None = Field(default=None, pattern=ID_REGEX, max_length=64)
    title: str | None = Field(default=None, max_length=MAX_TITLE_LENGTH)


class AgentSummary(_Body):
    agent_id: str
    name: str
    description: str = ""
    engine: str
    model: str
    error: str = Field(default="", description="why the agent cannot be used, if it cannot")


class AgentList(_Body):
    agents: list[AgentSummary]


class AgentInfo(AgentSummary):
    prompt_files: list[str]
    conversation_count: int
    config: dict[str, Any]


class ConversationList(_Body):
    conversations: list[ConversationMeta]


class ConversationDetail(_Body):
    meta: ConversationMeta
    messages: list[Message]


class Deleted(_Body):
    agent_id: str
    conversation_id: str
    deleted: Literal[True] = True


class CancelResult(_Body):
    agent_id: str
    conversation_id: str
    cancelled: bool = Field(description="true when a running turn was asked to stop")
    message: str


class Health(_Body):
    status: Literal["ok"] = "ok"
    version: str
    agents: int
    running_turns: int
