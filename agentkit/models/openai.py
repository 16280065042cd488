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
-- is never retried: the same request would be refused again. Transient faults are retried, as
the official clients do, up to ``max_retries`` times with exponential backoff and jitter
(:func:`~agentkit.models.transport.retry_delay`; a server's ``Retry-After`` wins, capped): a
429 or another 5xx, and a connection that could not be made or broke before the answer began
(refused, reset, closed without a response, a connect timeout). Only while no byte of a reply
body has been streamed: after that the caller has seen deltas, and a retry would repeat them.
Each retry, and each request that fails for good, is counted
(:func:`~agentkit.models.transport.counting_transport`: a sweep's row).
Everything else -- a refusal of the last shape, exhausted retries, read timeouts, broken
streams -- is raised as :class:`ModelError` with ``status_code`` and ``retryable`` set.

Transport: the requests go straight to an :class:`httpx.AsyncBaseTransport` (no
``AsyncClient``: its cookie jar, auth and redirect machinery cost CPU on every call and do
nothing here), by default a :class:`~agentkit.models.transport.PooledTransport` of
keep-alive connections in shards, so that many calls at once stay cheap. A stream is read past
its ``data: [DONE]`` to the end of the body (briefly: a server that keeps it open is not waited
for), because only a response read to its end gives its connection back to the pool.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Sequence
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
from agentkit.models.transport import (
    PooledTransport,
    env_proxy,
    note_failure,
    note_retry,
    retry_delay,
)
from agentkit.types import Usage

__all__ = ["DEFAULT_BASE_URL", "OpenAIModel"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_MAX_RETRY_DELAY = 30.0  # seconds; a server's Retry-After is honoured up to this
_DRAIN_SECONDS = 1.0  # the longest wait for the rest of a body after [DONE] (a busy loop is slow)
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
        headers = {"Accept": "text/event-stream", "Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._headers = headers
        self._url = httpx.URL(self.url)
        self._timeout = httpx.Timeout(timeout).as_dict()
        self._transport = (
            PooledTransport(proxy=env_proxy(self.url)) if transport is None else transport
        )

    @classmethod
    def from_env(
        cls, model: str, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> OpenAIModel:
        """Base URL from ``$AGENTKIT_OPENAI_BASE_URL``, else ``$OPENAI_BASE_URL``, else OpenAI's;
        the key from ``$OPENAI_API_KEY`` (local servers need none: no Authorization is sent);
        the context window from ``$AGENTKIT_OPENAI_CONTEXT_WINDOW`` (tokens); how many times
        a transient fault is retried from ``$AGENTKIT_OPENAI_MAX_RETRIES`` (default 3)."""
        window = _whole_number(model, "AGENTKIT_OPENAI_CONTEXT_WINDOW")
        retries = _whole_number(model, "AGENTKIT_OPENAI_MAX_RETRIES")
        base_url = (
            os.environ.get("AGENTKIT_OPENAI_BASE_URL")
            or os.environ.get("OPENAI_BASE_URL")
            or DEFAULT_BASE_URL
        )
        return cls(
            model,
            base_url=base_url,
            api_key=os.environ.get("OPENAI_API_KEY") or None,
            context_window=window,
            max_retries=3 if retries is None else retries,
            transport=transport,
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
        raise _failed(last.error(self.spec, earlier))

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
            raise _failed(self._transport_error(error, "while streaming the reply")) from error
        except ModelError as error:  # a broken or malformed stream
            raise _failed(error) from None
        finally:
            await response.aclose()

    async def aclose(self) -> None:
        await self._transport.aclose()

    async def _open(self, body: dict[str, Any]) -> httpx.Response:
        """Send the request and return the response, ready to stream; raise any failure."""
        outcome = await self._send(body)
        if isinstance(outcome, _Refusal):
            raise _failed(outcome.error(self.spec))
        return outcome

    async def _send(self, body: dict[str, Any]) -> httpx.Response | _Refusal:
        """Send the request; retry transient faults (nothing streamed yet). A refusal of the
        request is returned (another shape may pass, the same one would not); other failures
        raise :class:`ModelError`."""
        check_model_requests(self.spec)  # before any connection is made
        content = json.dumps(body, ensure_ascii=False).encode()
        attempt = 0
        while True:
            request = httpx.Request(
                "POST",
                self._url,
                headers=self._headers,
                content=content,
                extensions={"timeout": self._timeout},
            )
            try:
                response = await self._transport.handle_async_request(request)
            except httpx.TransportError as error:
                if _reconnectable(error) and attempt < self.max_retries:
                    await self._pause(None, attempt)
                    attempt += 1
                    continue
                tries = f" (after {attempt + 1} attempts)" if attempt else ""
                broken = self._transport_error(error, f"cannot POST {self.url}{tries}")
                raise _failed(broken) from error
            response.request = request
            if response.is_success:
                return response
            try:
                await response.aread()
            except httpx.TransportError as error:
                raise _failed(self._transport_error(error, f"cannot POST {self.url}")) from error
            finally:
                await response.aclose()
            status = response.status_code
            failure = classify_failure(status, response.text)
            retryable = failure == "transient"
            if retryable and attempt < self.max_retries:
                await self._pause(response.headers, attempt)
                attempt += 1
                continue
            tries = f" after {attempt + 1} attempts" if attempt else ""
            message = _server_message(response)
            if failure == "refused":
                return _Refusal(status, message)
            raise _failed(
                ModelError(
                    self.spec,
                    f"HTTP {status}{tries}: {message}",
                    status_code=status,
                    retryable=retryable,
                )
            )

    async def _pause(self, headers: httpx.Headers | None, attempt: int) -> None:
        """Wait before retry *attempt* + 1, and count it."""
        note_retry()
        await asyncio.sleep(retry_delay(headers, attempt, self.backoff, cap=_MAX_RETRY_DELAY))

    async def _events(self, response: httpx.Response) -> AsyncIterator[ModelEvent]:
        text: list[str] = []
        calls: dict[int, _PendingCall] = {}
        usage = Usage()
        stop_reason: str | None = None
        done = False
        lines = _lines(response)
        async for line in lines:
            # blank separators, ": keep-alive" comments and event:/id: fields carry nothing here
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                done = True
                await _drain(lines)  # to the body's end: the connection goes back to the pool
                break
            chunk = self._parse_chunk(data)
            if chunk.usage is not None:
                details = chunk.usage.prompt_tokens_details
                usage = Usage(
                    input_tokens=chunk.usage.prompt_tokens or 0,
                    output_tokens=chunk.usage.completion_tokens or 0,
                    cached_tokens=(details.cached_tokens or 0) if details is not None else 0,
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

    def _parse_chunk(self, data: bytes) -> _Chunk:
        quoted = repr(data[:_SNIPPET].decode("utf-8", "replace"))
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
        detail = str(error) or type(error).__name__
        return ModelError(self.spec, f"{doing}: {detail}", retryable=transient)


_RECONNECTABLE = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.ReadError,
    httpx.WriteError,
    httpx.RemoteProtocolError,
)


def _whole_number(model: str, name: str) -> int | None:
    """``$name`` as a whole number (None: unset); anything else is a :class:`ModelSpecError`."""
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    if not text.isdigit():
        raise ModelSpecError(f"openai:{model}", f"{name} is not a number: {text!r}")
    return int(text)


def _failed(error: ModelError) -> ModelError:
    """*error*, counted as a request that failed for good (see the module docstring)."""
    note_failure(str(error))
    return error


def _reconnectable(error: httpx.TransportError) -> bool:
    """A fault before any answer that a new connection may not meet: refused, reset, closed
    without a response, a connect timeout (never a read timeout: the server got the request
    and is slow, and sending it again only adds to its load)."""
    return isinstance(error, _RECONNECTABLE)


async def _lines(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body's lines, as bytes without their ending (split on the bytes: a UTF-8 character
    is never cut in two by a newline byte, and no text decoding is spent on SSE framing)."""
    rest = b""
    async for piece in response.aiter_bytes():
        *lines, rest = (rest + piece).split(b"\n")
        for line in lines:
            yield line.removesuffix(b"\r")
    if rest:
        yield rest.removesuffix(b"\r")


async def _drain(lines: AsyncIterator[bytes]) -> None:
    """Read what is left of a stream after its ``[DONE]`` (its last blank line, the chunked
    encoding's end: usually here already), for at most :data:`_DRAIN_SECONDS`."""
    try:
        async with asyncio.timeout(_DRAIN_SECONDS):
            async for _ in lines:
                pass
    except (TimeoutError, httpx.TransportError):
        pass  # still streaming, or broken: the connection is closed, not kept


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


class _WireCachedTokens(_Wire):
    cached_tokens: int | None = None


class _WireUsage(_Wire):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    #: of the prompt tokens, those read from the provider's prompt cache
    prompt_tokens_details: _WireCachedTokens | None = None


class _WireError(_Wire):
    message: str = "(no message)"


class _Chunk(_Wire):
    choices: list[_Choice] | None = None
    usage: _WireUsage | None = None
    error: _WireError | str | None = None
