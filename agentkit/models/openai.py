"""A :class:`ChatModel` for any OpenAI-compatible chat-completions endpoint, over plain httpx.

OpenAI, Ollama, vLLM, llama.cpp's ``llama-server`` and LM Studio all accept
``POST {base_url}/chat/completions`` with ``"stream": true`` and answer with Server-Sent Events::

    data: {"choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}
    data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}
    data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2}}
    data: [DONE]

The wire is a trust boundary: every chunk is parsed by the private pydantic records below, so a
malformed chunk becomes a :class:`ModelError` saying what was wrong, never a ``KeyError``.
Tool-call arguments arrive as string fragments keyed by ``index``; they are joined and parsed
once the stream has ended.

A JSON schema is negotiated per endpoint (base URL + model), because servers disagree on how to
ask for it: ``response_format`` ``json_schema`` first; if the server refuses that request, the
same call is sent with ``{"type": "json_object", "schema": …}`` (llama-cpp-python's server);
if that is refused too, with no ``response_format`` at all. The first shape a server accepts is
remembered process-wide (``_negotiation.SHAPE_MEMORY``), so later calls -- from any
``OpenAIModel`` for that endpoint -- start there. Whatever was sent, the reply is validated only
by :meth:`ChatModel.complete`.

A refusal -- a 4xx, a 501, or a 5xx whose body says the request was invalid (llama-cpp-python
answers an unknown ``response_format`` type with HTTP 500 and pydantic's "Input should be …")
-- is never retried: the same request would be refused again. A 429 or another 5xx is retried
with exponential backoff (honouring ``Retry-After`` seconds, capped) only while no byte of a
reply body has been streamed: after that the caller has seen deltas, and a retry would repeat
them. Everything else -- a refusal of the last shape, exhausted retries, timeouts, refused
connections, broken streams -- is raised as :class:`ModelError` with ``status_code`` and
``retryable`` set.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentkit.errors import ModelError, ModelSpecError
from agentkit.models._negotiation import (
    SHAPE_MEMORY,
    Endpoint,
    Shape,
    ShapeMemory,
    classify_failure,
    response_format,
)
from agentkit.models._requests import check_model_requests
from agentkit.models.base import (
    ChatMessage,
    ChatModel,
    Completion,
    JsonSchema,
    ModelEvent,
    ModelRequest,
    Purpose,
    TextDelta,
    ToolCallRequest,
)
from agentkit.types import Usage

__all__ = ["DEFAULT_BASE_URL", "OpenAIModel"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_MAX_RETRY_DELAY = 30.0  # seconds; a server asking for a longer pause gets an error instead
_SNIPPET = 200  # characters of a bad chunk or error body quoted in messages


class OpenAIModel(ChatModel):
    """Streams chat completions from ``{base_url}/chat/completions``; see the module docstring."""

    real_requests = True
    native_tools = True

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str | None,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        transport: httpx.AsyncBaseTransport | None = None,
        shapes: ShapeMemory | None = None,
        context_window: int | None = None,
    ) -> None:
        self.model = model
        self.spec = f"openai:{model}"
        if context_window is not None:  # else the documented default (DEFAULT_CONTEXT_WINDOW)
            if context_window < 256:
                raise ModelSpecError(self.spec, "a context window has at least 256 tokens")
            self.context_window = context_window
        self.endpoint = Endpoint.of(base_url, model)
        self.url = f"{self.endpoint.base_url}/chat/completions"
        #: which structured-output shape each endpoint took; shared process-wide by default
        self.shapes = SHAPE_MEMORY if shapes is None else shapes
        self.max_retries = max_retries
        self.backoff = backoff
        headers = {"Accept": "text/event-stream"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.AsyncClient(
            headers=headers, timeout=httpx.Timeout(timeout), transport=transport
        )

    @classmethod
    def from_env(cls, model: str) -> OpenAIModel:
        """Base URL from ``$AGENTKIT_OPENAI_BASE_URL``, else ``$OPENAI_BASE_URL``, else OpenAI's;
        the key from ``$OPENAI_API_KEY`` (local servers need none: no Authorization is sent);
        the context window from ``$AGENTKIT_OPENAI_CONTEXT_WINDOW`` (tokens)."""
        window = os.environ.get("AGENTKIT_OPENAI_CONTEXT_WINDOW", "").strip()
        if window and not window.isdigit():
            raise ModelSpecError(
                f"openai:{model}", f"AGENTKIT_OPENAI_CONTEXT_WINDOW is not a number: {window!r}"
            )
        base_url = (
            os.environ.get("AGENTKIT_OPENAI_BASE_URL")
            or os.environ.get("OPENAI_BASE_URL")
            or DEFAULT_BASE_URL
        )
        return cls(
            model,
            base_url=base_url,
            api_key=os.environ.get("OPENAI_API_KEY") or None,
            context_window=int(window) if window else None,
        )

    async def request(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """A streamed chat completion; with ``tools``, the ``tools`` of the Chat Completions
        API (the model chooses: ``tool_choice: auto``); with a schema, the first structured
        output shape the endpoint accepts."""
        body = self._body(request.messages)
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                }
                for tool in request.tools
            ]
            body["tool_choice"] = "auto"
        if request.json_schema is None:
            response = await self._open(body)
        else:
            response = await self._open_structured(body, request.purpose, request.json_schema)
        async for event in self._read(response):
            yield event

    @property
    def structured_shape(self) -> Shape | None:
        """How this endpoint takes a JSON schema, once a call has found out (else None)."""
        return self.shapes.recall(self.endpoint)

    async def _open_structured(
        self, body: dict[str, Any], purpose: Purpose, schema: JsonSchema
    ) -> httpx.Response:
        """Open the call in the first shape the endpoint accepts, starting from the remembered
        one; remember the shape that was accepted. A refusal of the last shape is raised,
        naming the shapes refused before it."""
        refusals: list[tuple[Shape, _Refusal]] = []
        for shape in self.shapes.candidates(self.endpoint):
            shaped = dict(body)
            value = response_format(shape, purpose, schema)
            if value is not None:
                shaped["response_format"] = value
            outcome = await self._send(shaped)
            if isinstance(outcome, _Refusal):
                refusals.append((shape, outcome))
                continue
            self.shapes.remember(self.endpoint, shape)
            return outcome
        (*earlier, (_, last)) = refusals
        raise last.error(self.spec, earlier)

    def _body(self, messages: Sequence[ChatMessage]) -> dict[str, Any]:
        return {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "stream": True,
            "stream_options": {"include_usage": True},
        }

    async def _read(self, response: httpx.Response) -> AsyncIterator[ModelEvent]:
        try:
            async for event in self._events(response):
                yield event
        except httpx.TransportError as error:
            raise self._transport_error(error, "while streaming the reply") from error
        finally:
            await response.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _open(self, body: dict[str, Any]) -> httpx.Response:
        """Send the request and return the response, ready to stream; raise any failure."""
        outcome = await self._send(body)
        if isinstance(outcome, _Refusal):
            raise outcome.error(self.spec)
        return outcome

    async def _send(self, body: dict[str, Any]) -> httpx.Response | _Refusal:
        check_model_requests(self.spec)  # before any connection is made
        """Send the request; retry transient faults (nothing streamed yet). A refusal of the
        request is returned (another shape may pass, the same one would not); other failures
        raise :class:`ModelError`."""
        attempt = 0
        while True:
            request = self._client.build_request("POST", self.url, json=body)
            try:
                response = await self._client.send(request, stream=True)
                if response.is_success:
                    return response
                try:
                    await response.aread()
                finally:
                    await response.aclose()
            except httpx.TransportError as error:
                raise self._transport_error(error, f"cannot POST {self.url}") from error
            status = response.status_code
            failure = classify_failure(status, response.text)
            retryable = failure == "transient"
            if retryable and attempt < self.max_retries:
                await asyncio.sleep(_retry_delay(response.headers, attempt, self.backoff))
                attempt += 1
                continue
            tries = f" after {attempt + 1} attempts" if attempt else ""
            message = _server_message(response)
            if failure == "refused":
                return _Refusal(status, message)
            raise ModelError(
                self.spec,
                f"HTTP {status}{tries}: {message}",
                status_code=status,
                retryable=retryable,
            )

    async def _events(self, response: httpx.Response) -> AsyncIterator[ModelEvent]:
        text: list[str] = []
        calls: dict[int, _PendingCall] = {}
        usage = Usage()
        stop_reason: str | None = None
        done = False
        async for line in response.aiter_lines():
            # blank separators, ": keep-alive" comments and event:/id: fields carry nothing here
            if not line.startswith("data:"):
                continue
            data = line.removeprefix("data:").strip()
            if data == "[DONE]":
                done = True
                break
            chunk = self._parse_chunk(data)
            if chunk.usage is not None:
                usage = Usage(
                    input_tokens=chunk.usage.prompt_tokens or 0,
                    output_tokens=chunk.usage.completion_tokens or 0,
                )
            for choice in chunk.choices or ():
                if choice.index != 0:  # we never ask for n > 1
                    continue
                if choice.delta.content:
                    text.append(choice.delta.content)
                    yield TextDelta(text=choice.delta.content)
                for part in choice.delta.tool_calls or ():
                    calls.setdefault(part.index, _PendingCall()).add(part)
                stop_reason = choice.finish_reason or stop_reason
        if not done and stop_reason is None:
            raise ModelError(
                self.spec,
                "the stream ended before the reply finished (no finish_reason, no [DONE])",
                retryable=True,
            )
        tool_calls = tuple(calls[index].finish(self.spec, index) for index in sorted(calls))
        for call in tool_calls:
            yield call
        yield Completion(
            text="".join(text),
            usage=usage,
            stop_reason=stop_reason or "stop",
            tool_calls=tool_calls,
        )

    def _parse_chunk(self, data: str) -> _Chunk:
        quoted = repr(data[:_SNIPPET])
        try:
            chunk = _Chunk.model_validate_json(data)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            problem = f"{where}: {first['msg']}" if where else first["msg"]
            raise ModelError(self.spec, f"malformed stream chunk ({problem}): {quoted}") from None
        if chunk.error is not None:
            message = chunk.error if isinstance(chunk.error, str) else chunk.error.message
            raise ModelError(self.spec, f"the server reported an error mid-stream: {message}")
        if chunk.choices is None and chunk.usage is None:
            raise ModelError(
                self.spec, f"malformed stream chunk (no 'choices' and no 'usage'): {quoted}"
            )
        return chunk

    def _transport_error(self, error: httpx.TransportError, doing: str) -> ModelError:
        if isinstance(error, httpx.TimeoutException):
            kind = type(error).__name__
            return ModelError(self.spec, f"timed out ({kind}) {doing}", retryable=True)
        transient = isinstance(error, httpx.NetworkError | httpx.RemoteProtocolError)
        return ModelError(self.spec, f"{doing}: {error}", retryable=transient)


@dataclass(frozen=True)
class _Refusal:
    """The server refused the request itself: a 4xx, or a 5xx that says the request was
    invalid. Never retried; the structured-output negotiation tries the next shape."""

    status: int
    message: str

    def error(self, backend: str, earlier: Sequence[tuple[Shape, _Refusal]] = ()) -> ModelError:
        text = f"HTTP {self.status}: {self.message}"
        if earlier:
            shapes = "; ".join(
                f"{shape}: HTTP {refusal.status}: {refusal.message[:_SNIPPET]}"
                for shape, refusal in earlier
            )
            text += f" (refused before, in other shapes: {shapes})"
        return ModelError(backend, text, status_code=self.status, retryable=False)


@dataclass
class _PendingCall:
    """One tool call being assembled from its deltas (same ``index``)."""

    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def add(self, part: _ToolCallDelta) -> None:
        self.id = part.id or self.id
        if part.function is not None:
            self.name = part.function.name or self.name
            self.arguments.append(part.function.arguments or "")

    def finish(self, backend: str, index: int) -> ToolCallRequest:
        raw = "".join(self.arguments).strip() or "{}"
        label = f"tool call {index} ({self.name or 'unnamed'})"
        if not self.name:
            raise ModelError(backend, f"{label} never received a function name")
        try:
            arguments = json.loads(raw)
        except json.JSONDecodeError as error:
            raise ModelError(
                backend,
                f"{label} arguments are not valid JSON ({error.msg} at {error.pos}): "
                f"{raw[:_SNIPPET]!r}",
            ) from None
        if not isinstance(arguments, dict):
            kind = type(arguments).__name__
            raise ModelError(backend, f"{label} arguments are a JSON {kind}, not an object")
        return ToolCallRequest(id=self.id or f"call_{index}", name=self.name, arguments=arguments)


def _retry_delay(headers: Mapping[str, str], attempt: int, backoff: float) -> float:
    """``Retry-After`` seconds when the server sent them, else ``backoff * 2**attempt``; capped."""
    try:
        delay = float(headers["retry-after"])
    except (KeyError, ValueError):  # absent, or an HTTP date: fall back to our own schedule
        delay = backoff * 2**attempt
    return min(max(delay, 0.0), _MAX_RETRY_DELAY)


def _server_message(response: httpx.Response) -> str:
    """The server's own words: ``{"error": {"message": …}}``, ``{"error": "…"}``, or the body."""
    text = response.text.strip()
    try:
        payload = json.loads(text)
    except ValueError:
        payload = None
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
    return text[:_SNIPPET] or response.reason_phrase


class _Wire(BaseModel):
    """A piece of a streamed chunk; unknown fields (id, model, logprobs…) are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class _FunctionDelta(_Wire):
    name: str | None = None
    arguments: str | None = None


class _ToolCallDelta(_Wire):
    index: int
    id: str | None = None
    function: _FunctionDelta | None = None


class _Delta(_Wire):
    content: str | None = None
    tool_calls: list[_ToolCallDelta] | None = None


class _Choice(_Wire):
    index: int = 0
    delta: _Delta = Field(default_factory=_Delta)
    finish_reason: str | None = None


class _WireUsage(_Wire):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class _WireError(_Wire):
    message: str = "(no message)"


class _Chunk(_Wire):
    choices: list[_Choice] | None = None
    usage: _WireUsage | None = None
    error: _WireError | str | None = None
