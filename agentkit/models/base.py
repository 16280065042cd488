"""Model interfaces: stateless ``ChatModel`` and stateful ``SessionModel``.

A ``ChatModel`` gets the whole context on every call (llama, openai, scripted). A
``SessionModel`` is a live session that keeps its own context, usually a persistent subprocess
(acp, claude-cli): it is sent only the new message. Both stream :data:`ModelEvent` values and
end with exactly one :class:`Completion`.

A ``ChatModel`` has one entry point, :meth:`ChatModel.request`, taking one
:class:`ModelRequest`: streaming, a JSON schema for the reply and native tools are options of
that value, so a wrapper (budget, cassette, a test's guard: :class:`WrapperModel`) overrides
one method and sees every kind of call. ``stream``, ``complete`` and ``complete_with_tools``
are final helpers that build the request. Likelihood scoring and embeddings are typed
capabilities of the base (:attr:`ChatModel.scores`, :attr:`ChatModel.embeds`), not protocols
found by duck typing.

Every call names its ``purpose`` (chat, plan, replan, reason, respond, summarize, classify), so
scripted replies, traces and evaluations can tell calls apart. Structured output is validated
in one place, :func:`validate_structured`, whatever a backend claims to enforce.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, final

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
    "ModelRequest",
    "PermissionRequest",
    "Purpose",
    "SessionBackend",
    "SessionModel",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallRequest",
    "ToolSpec",
    "WrapperModel",
    "estimate_prompt_tokens",
    "final_completion",
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


_NO_SETTINGS: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True)
class ModelRequest:
    """One model call: why it is made, what is sent, and what the reply must be.

    The one value :meth:`ChatModel.request` takes; the test doubles record each one they get
    (``requests``), and a :class:`~agentkit.models.function.FunctionModel` passes it to its
    function, so a test reads what a model was sent the same way whichever double it used.
    """

    #: why the caller asks: ``chat``, ``plan``, ``replan``, ``respond``, ``route``, ``summarize``…
    purpose: Purpose
    #: the messages sent, in order (each has ``role`` and ``content``)
    messages: tuple[ChatMessage, ...]
    #: the JSON schema the reply must follow, or None for free text
    json_schema: JsonSchema | None = None
    #: the tools offered for native function calling (name, description, argument schema);
    #: only a backend with :attr:`ChatModel.native_tools` takes them
    tools: tuple[ToolSpec, ...] = ()
    #: the model's settings (a :class:`FunctionModel`'s ``settings``), read-only; filled in
    #: by the double that records the request
    settings: Mapping[str, Any] = field(default_factory=lambda: _NO_SETTINGS)
    #: the call's number on its model, from 0 (filled in by the double that records it)
    index: int = 0
    #: True: the caller reads the reply's deltas as they come (a backend streams them);
    #: False: only the final :class:`Completion` matters (a backend may send it alone)
    stream: bool = False

    @property
    def schema(self) -> JsonSchema | None:
        """The schema asked for (:attr:`json_schema`), or ``{"tools": […]}`` for a tool call."""
        if self.tools:
            return {"tools": [tool.model_dump() for tool in self.tools]}
        return self.json_schema

    @property
    def prompt(self) -> str:
        """The last user message's text ("" when there is none)."""
        for message in reversed(self.messages):
            if message.role == "user":
                return message.content
        return ""

    @property
    def system(self) -> str:
        """The system message's text ("" when there is none)."""
        return next((m.content for m in self.messages if m.role == "system"), "")

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The names of the tools offered natively, or listed in a plan schema's ``tool_name``."""
        if self.tools:
            return tuple(tool.name for tool in self.tools)
        return tuple(sorted(_enum_values(self.json_schema, "tool_name")))


def _enum_values(schema: object, key: str) -> set[str]:
    """Every string in an ``enum`` of a property named *key*, anywhere in *schema*."""
    found: set[str] = set()
    if isinstance(schema, dict):
        for name, value in schema.items():
            if name == key and isinstance(value, dict):
                found.update(v for v in _enums(value) if isinstance(v, str))
            else:
                found |= _enum_values(value, key)
    elif isinstance(schema, list):
        for item in schema:
            found |= _enum_values(item, key)
    return found


def _enums(schema: dict[str, Any]) -> list[object]:
    values: list[object] = list(schema.get("enum", []))
    if "const" in schema:
        values.append(schema["const"])
    for option in schema.get("anyOf", []) + schema.get("oneOf", []):
        if isinstance(option, dict):
            values.extend(_enums(option))
    return values


async def final_completion(backend: str, events: AsyncIterator[ModelEvent]) -> Completion:
    """The :class:`Completion` that ends *events* (read to the end; the text not validated)."""
    final: Completion | None = None
    async for event in events:
        if isinstance(event, Completion):
            final = event
    if final is None:
        raise ModelError(backend, "the stream ended without a result")
    return final


class ChatModel(ABC):
    """A stateless model: the caller sends the whole context on every call.

    A backend implements :meth:`request`, the one entry point (see the module docstring);
    everything else has a default."""

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
    #: True when a request may offer ``tools`` (the backend's own function calling); the
    #: planner's ``tool_loop`` asks the others for a JSON action instead
    native_tools: bool = False
    #: True when :meth:`score` scores continuations by likelihood (the embedded model)
    scores: bool = False
    #: True when :meth:`embed` turns texts into vectors (the embedded model)
    embeds: bool = False
    #: True when :meth:`count_prompt_tokens` is the model's own tokenizer, not an estimate
    own_tokenizer: bool = False

    @abstractmethod
    def request(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """The one entry point: the reply to *request* as events, the last a
        :class:`Completion` (its ``structured`` unset: :meth:`complete` validates). With
        ``tools``, the completion holds the text or the ``tool_calls`` (not yet run); a backend
        without :attr:`native_tools` raises :class:`ModelError` (:meth:`refuse_tools`)."""

    def refuse_tools(self, request: ModelRequest) -> None:
        """Raise the :class:`ModelError` of a backend without function calling when
        *request* offers tools."""
        if request.tools and not self.native_tools:
            raise ModelError(
                self.spec or type(self).__name__, "this backend has no native function calling"
            )

    @final
    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        purpose: Purpose,
        schema: JsonSchema | None = None,
    ) -> AsyncIterator[ModelEvent]:
        """:meth:`request` with ``stream=True``: the deltas as they come, then the completion."""
        return self.request(ModelRequest(purpose, tuple(messages), schema, stream=True))

    @final
    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        purpose: Purpose,
        schema: JsonSchema | None = None,
    ) -> Completion:
        """The whole reply; with *schema*, ``structured`` holds the validated value."""
        request = ModelRequest(purpose, tuple(messages), schema)
        completion = await final_completion(self.spec or type(self).__name__, self.request(request))
        if schema is not None:
            structured = validate_structured(self.spec, completion.text, schema)
            completion = completion.model_copy(update={"structured": structured})
        return completion

    @final
    async def complete_with_tools(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec],
        purpose: Purpose = "act",
    ) -> Completion:
        """One call offering *tools*: the reply is text or ``tool_calls`` (not yet run)."""
        request = ModelRequest(purpose, tuple(messages), tools=tuple(tools))
        return await final_completion(self.spec or type(self).__name__, self.request(request))

    async def score(self, pairs: Sequence[tuple[str, str]]) -> list[list[float]]:
        """For each ``(prompt, continuation)``, the log-probability of each continuation token
        after the prompt (only a backend with :attr:`scores`)."""
        raise ModelError(self.spec or type(self).__name__, "this backend scores no likelihoods")

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """A unit vector per text (only a backend with :attr:`embeds`)."""
        raise ModelError(self.spec or type(self).__name__, "this backend has no embeddings")

    def count_prompt_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text as this model would count them (the base: an estimate,
        :func:`estimate_prompt_tokens`; llama counts with its own tokenizer)."""
        return [estimate_prompt_tokens(text) for text in texts]

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release what the model holds (HTTP clients, loaded weights)."""


class WrapperModel(ChatModel):
    """A model in front of *inner*: the generic base of budget, recording and test guards.

    It takes *inner*'s spec, window and capabilities, and forwards everything to it; a
    wrapper overrides :meth:`request`, the one entry point, and so sees every call (streamed,
    structured, with tools). Scoring, embeddings and token counts go to *inner* unchanged."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner
        self.spec = inner.spec
        self.context_window = inner.context_window
        self.output_reserve = inner.output_reserve
        self.real_requests = inner.real_requests
        self.native_tools = inner.native_tools
        self.scores = inner.scores
        self.embeds = inner.embeds
        self.own_tokenizer = inner.own_tokenizer

    def request(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        return self.inner.request(request)

    async def score(self, pairs: Sequence[tuple[str, str]]) -> list[list[float]]:
        return await self.inner.score(pairs)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return await self.inner.embed(texts)

    def count_prompt_tokens(self, texts: Sequence[str]) -> list[int]:
        return self.inner.count_prompt_tokens(texts)

    async def aclose(self) -> None:
        await self.inner.aclose()


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
