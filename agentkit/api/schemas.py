"""Request and response bodies of the HTTP API (camelCase JSON, as the seed's files).

Requests are the trust boundary: every field is typed and bounded, unknown fields are refused
(``extra="forbid"``), and ids are full-matched against the id rule (an anchored pattern for
the OpenAPI document, then :func:`agentkit.ids.check_id` itself) before anything is touched.

The OpenAPI document says exactly what the server accepts: a field the server checks beyond
its type carries that check as a schema constraint (a message that ``str.strip()`` would
empty is :data:`NonBlankStr`'s pattern, not a refusal further in), so a generated valid body
is never refused.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints
from pydantic.alias_generators import to_camel

from agentkit.agent import MAX_MESSAGE_LENGTH, MAX_TITLE_LENGTH
from agentkit.ids import ID_PATTERN, check_id
from agentkit.memory import ApprovalDecision, PendingApproval
from agentkit.types import ConversationMeta, Message

__all__ = [
    "ID_REGEX",
    "NON_BLANK_REGEX",
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
    "NonBlankStr",
    "is_blank",
    "ApprovalBody",
    "ApprovalList",
    "DecisionBody",
    "DecisionRequest",
]

ID_REGEX = f"^{ID_PATTERN}$"

#: The characters ``str.strip()`` removes: every ``c`` with ``c.isspace()``. Spelled out as
#: ``\uXXXX`` escapes, which Python's ``re`` and ECMA-262 (the JSON Schema dialect) read alike;
#: their ``\s`` differ: ECMA's leaves out U+001C-U+001F and U+0085 and adds U+FEFF (pydantic's
#: Rust regex also leaves out U+001C-U+001F). Tests recompute the set from the running Python.
_STRIPPED = (
    r"\u0009-\u000d\u001c-\u0020\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
)
#: Matches exactly the strings whose ``.strip()`` is not empty: stripped characters, one that
#: is not, then anything. Anchored and spanning the whole string on purpose, so it means the
#: same searched (JSON Schema), full-matched, or rewritten by a tool that folds
#: ``minLength``/``maxLength`` into the pattern: schemathesis turns an unanchored ``[^…]`` with
#: length bounds into ``^[^…]{1,N}$`` (every character non-blank), which refused
#: ``"\u001ex"`` although the server accepts it (issue 40). ``[\s\S]`` is any character in
#: both dialects.
NON_BLANK_REGEX = f"^[{_STRIPPED}]*[^{_STRIPPED}][\\s\\S]*$"


def is_blank(value: str) -> bool:
    """The server's rule, the one :data:`NON_BLANK_REGEX` publishes: nothing but what
    ``str.strip()`` removes."""
    return not value.strip()


def _non_blank(value: str) -> str:
    if is_blank(value):
        raise ValueError("needs a character that is not whitespace")
    return value


NonBlankStr = Annotated[
    str,
    StringConstraints(min_length=1),
    AfterValidator(_non_blank),
    Field(json_schema_extra={"pattern": NON_BLANK_REGEX}),
]
"""A string with at least one character that is not whitespace as ``str.strip()`` counts it:
checked with ``str.strip()`` itself (a clear message, not a regex), documented as the pattern."""


_ID = StringConstraints(pattern=ID_REGEX, max_length=64)


def _conversation_id(value: str) -> str:
    return check_id(value, "conversation")


def _message_id(value: str) -> str:
    return check_id(value, "message")


ConversationIdField = Annotated[str, _ID, AfterValidator(_conversation_id)]
MessageIdField = Annotated[str, _ID, AfterValidator(_message_id)]


class _Body(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class ChatRequest(_Body):
    """One user message; without ``conversationId`` a new conversation is started."""

    message: NonBlankStr = Field(
        max_length=MAX_MESSAGE_LENGTH,
        description="the user's message; it must contain something besides whitespace",
    )
    conversation_id: ConversationIdField | None = None


class CreateConversationRequest(_Body):
    title: str = Field(default="New conversation", max_length=MAX_TITLE_LENGTH)


class ForkRequest(_Body):
    """``POST …/fork``: the turn to fork at (a message id; none: the last finished turn)."""

    at: MessageIdField | None = None
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


class ApprovalBody(_Body):
    """A pending approval (:class:`agentkit.memory.PendingApproval`), in camelCase."""

    approval_id: str
    tool_name: str
    tool_args: dict[str, Any]
    step_id: str
    question: str
    created_at: str
    args_schema: dict[str, Any]

    @classmethod
    def of(cls, approval: PendingApproval) -> ApprovalBody:
        return cls(**approval.model_dump(mode="json", exclude={"kind"}))


class DecisionBody(_Body):
    """A decision made (:class:`agentkit.memory.ApprovalDecision`), in camelCase."""

    approval_id: str
    tool_name: str
    decision: str
    source: str
    args: dict[str, Any] | None = None
    note: str = ""
    at: str

    @classmethod
    def of(cls, decision: ApprovalDecision) -> DecisionBody:
        return cls(**decision.model_dump(mode="json", exclude={"kind"}))


class ApprovalList(_Body):
    """``GET …/approvals``: what waits for a decision, and how earlier ones were decided."""

    agent_id: str
    conversation_id: str
    approvals: list[ApprovalBody]
    decisions: list[DecisionBody]


class DecisionRequest(_Body):
    """``POST …/approvals/{approvalId}``: approve (the call as planned, or with ``args``
    instead, checked against the tool's schema) or reject."""

    decision: Literal["approve", "reject"]
    args: dict[str, Any] | None = Field(
        default=None, description="the arguments to run instead of the planned ones (approve)"
    )
    note: str = Field(default="", max_length=2000)
