"""Model interfaces: stateless ``ChatModel`` and stateful ``SessionModel``.

A ``ChatModel`` gets the whole context on every call (llama, openai, scripted). A
``SessionModel`` is a live session that keeps its own context, usually a persistent subprocess
(acp, claude-cli): it is sent only the new message. Both stream :data:`ModelEvent` values and
end with exactly one :class:`Completion`.

Every call names its ``purpose`` (chat, plan, replan, reason, respond, summarize, classify), so
scripted replies, traces and evaluations can tell calls apart. Structured output is validated
in one place, :func:`validate_structured`, whatever a backend claims to enforce.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentkit.errors import ModelError, StructuredOutputError
from agentkit.types import Usage

__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "DEFAULT_OUTPUT_RESERVE",
    "PURPOSES",
    "ChatMessage",
    "ChatModel",
    "Completion",
    "JsonSchema",
    "ModelEvent",
    "PermissionRequest",
    "Purpose",
    "SessionBackend",
    "SessionModel",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallRequest",
    "ToolSpec",
    "estimate_prompt_tokens",
    "validate_structured",
]

Purpose = Literal[
    "chat", "plan", "replan", "reason", "respond", "summarize", "classify", "act", "route", "judge"
]
PURPOSES: tuple[Purpose, ...] = (
    "chat",
    "plan",
    "replan",
    "reason",
    "respond",
    "summarize",
    "classify",
    "act",
    "route",
    "judge",
)
JsonSchema = dict[str, Any]


class _Value(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ChatMessage(_Value):
    role: Literal["system", "user", "assistant", "tool"]
    content: str


class TextDelta(_Value):
    type: Literal["text"] = "text"
    text: str


class ThinkingDelta(_Value):
    type: Literal["thinking"] = "thinking"
    text: str


class ToolCallRequest(_Value):
    """The model asked for a tool call (OpenAI tool-call deltas, ACP tool_call updates…)."""

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ToolSpec(_Value):
    """A tool offered to a model with native function calling (OpenAI ``tools``)."""

    name: str = Field(min_length=1, max_length=64)
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})


class PermissionRequest(_Value):
    """A session backend asked for permission and got ``decision`` (the backend's policy)."""

    type: Literal["permission"] = "permission"
    tool_call_id: str
    title: str
    options: tuple[str, ...] = ()
    decision: str


class Completion(_Value):
    """The end of one call: the whole text, token usage, and the parsed structure if asked."""

    type: Literal["completion"] = "completion"
    text: str
    usage: Usage = Usage()
    stop_reason: str = "stop"
    structured: Any = None
    tool_calls: tuple[ToolCallRequest, ...] = ()


ModelEvent = TextDelta | ThinkingDelta | ToolCallRequest | PermissionRequest | Completion


def validate_structured(backend: str, text: str, schema: JsonSchema) -> Any:  # noqa: ANN401
    """Parse *text* as JSON and validate it against *schema*; the one place this happens."""
    import jsonschema

    try:
        value = json.loads(text)
    except RecursionError:
        raise StructuredOutputError(backend, "JSON nested too deeply", text[:2000]) from None
    except json.JSONDecodeError as error:
        raise StructuredOutputError(
            backend, f"not JSON ({error.msg} at {error.pos})", text
        ) from None
    validator = jsonschema.Draft202012Validator(schema)
    problems = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    if problems:
        first = problems[0]
        where = "/".join(str(part) for part in first.absolute_path) or "(root)"
        raise StructuredOutputError(backend, f"{where}: {first.message}", text)
    return value


#: the context window assumed for a backend that is not told its own (tokens): the planner
#: fits its prompts to it (:mod:`agentkit.planning.tool_budget`)
DEFAULT_CONTEXT_WINDOW = 32_768
#: the reply tokens reserved in the window when nothing says how long a reply may be
DEFAULT_OUTPUT_RESERVE = 1024


def estimate_prompt_tokens(text: str) -> int:
    """A tokenizer-free token count that errs high: one token per three characters
    (English runs near four, JSON and CJK text nearer two or three)."""
    return -(-len(text) // 3)


class ChatModel(ABC):
    """A stateless model: the caller sends the whole context on every call."""

    #: the spec string this model was created from, e.g. ``llama`` or ``openai:gpt-4o-mini``
    spec: str = ""
    #: the tokens one call may hold, prompt and reply together (llama: its ``n_ctx``; openai:
    #: ``$AGENTKIT_OPENAI_CONTEXT_WINDOW``; test doubles: ``settings["context_window"]``);
    #: :data:`DEFAULT_CONTEXT_WINDOW` when nothing says
    context_window: int = DEFAULT_CONTEXT_WINDOW
    #: the tokens a structured reply may take, kept free when a prompt is fitted to the window
    output_reserve: int = DEFAULT_OUTPUT_RESERVE
    #: True for a backend that reaches a real model (llama, openai): ``agentkit.testing`` can
    #: turn those off; test doubles leave it False
    real_requests: bool = False

    @abstractmethod
    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        purpose: Purpose,
        schema: JsonSchema | None = None,
    ) -> AsyncIterator[ModelEvent]:
        """Stream the reply; the last event is a :class:`Completion` (``structured`` unset)."""

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        purpose: Purpose,
        schema: JsonSchema | None = None,
    ) -> Completion:
        """The whole reply; with *schema*, ``structured`` holds the validated value."""
        final: Completion | None = None
        async for event in self.stream(messages, purpose=purpose, schema=schema):
            if isinstance(event, Completion):
                final = event
        if final is None:
            raise ModelError(self.spec or type(self).__name__, "the stream ended without a result")
        if schema is not None:
            structured = validate_structured(self.spec, final.text, schema)
            final = final.model_copy(update={"structured": structured})
        return final

    #: True when :meth:`complete_with_tools` is the backend's own function calling
    native_tools: bool = False

    async def complete_with_tools(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec],
        purpose: Purpose = "act",
    ) -> Completion:
        """One call offering *tools*: the reply is text or ``tool_calls`` (not yet run).

        Only backends with :attr:`native_tools` implement it; the planner's ``tool_loop``
        falls back to a JSON action schema for the others.
        """
        raise ModelError(
            self.spec or type(self).__name__, "this backend has no native function calling"
        )

    def count_prompt_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text as this model would count them (the base: an estimate,
        :func:`estimate_prompt_tokens`; llama counts with its own tokenizer)."""
        return [estimate_prompt_tokens(text) for text in texts]

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release what the model holds (HTTP clients, loaded weights)."""


class SessionModel(ABC):
    """A live session that keeps its own context: it is sent only the new message."""

    spec: str = ""
    #: an id the backend can resume from after a restart (claude-cli), if it has one
    session_id: str | None = None
    #: True when the session continued an earlier backend session (``resume_id``)
    resumed: bool = False

    @abstractmethod
    def send(self, text: str, *, purpose: Purpose = "chat") -> AsyncIterator[ModelEvent]:
        """Send one user message; stream the reply, ending with a :class:`Completion`."""

    @abstractmethod
    async def cancel(self) -> None:
        """Stop the turn in progress (the session stays usable when the backend allows)."""

    @abstractmethod
    async def close(self) -> None:
        """End the session and its process: terminate, then kill, then reap."""

    @abstractmethod
    def is_alive(self) -> bool: ...


class SessionBackend(ABC):
    """Opens :class:`SessionModel` sessions (one per conversation) for a session backend."""

    spec: str = ""
    #: True for a backend that runs a real agent process (acp, claude-cli); see ChatModel's
    real_requests: bool = False

    @abstractmethod
    async def open(
        self,
        *,
        system_prompt: str,
        workdir: Path,
        resume_id: str | None = None,
    ) -> SessionModel:
        """Start a session. With *resume_id*, try to continue that backend session; the
        returned session's ``resumed`` says whether it did (else it starts empty)."""
