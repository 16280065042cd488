"""OpenAIModel against a real loopback HTTP server speaking the OpenAI streaming protocol."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from agentkit.errors import ModelError, StructuredOutputError
from agentkit.models.base import (
    ChatMessage,
    Completion,
    JsonSchema,
    ModelEvent,
    TextDelta,
    ToolCallRequest,
)
from agentkit.models.openai import DEFAULT_BASE_URL, OpenAIModel, _retry_delay
from agentkit.types import Usage

from .fakes.openai_server import Reply, ScriptedOpenAIServer, chunk, usage_chunk

MESSAGES = [
    ChatMessage(role="system", content="Be brief."),
    ChatMessage(role="user", content="Say hello."),
]
PERSON: JsonSchema = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as running:
        yield running


def make_model(base_url: str, **options: Any) -> OpenAIModel:
    options.setdefault("api_key", "sk-test")
    options.setdefault("backoff", 0.0)
    return OpenAIModel("test-model", base_url=base_url, **options)


def stream_all(model: OpenAIModel, schema: JsonSchema | None = None) -> list[ModelEvent]:
    async def run() -> list[ModelEvent]:
        try:
            return [event async for event in model.stream(MESSAGES, purpose="chat", schema=schema)]
        finally:
            await model.aclose()

    return asyncio.run(run())


def complete(model: OpenAIModel, schema: JsonSchema | None = None) -> Completion:
    async def run() -> Completion:
        try:
            return await model.complete(MESSAGES, purpose="plan", schema=schema)
        finally:
            await model.aclose()

    return asyncio.run(run())


def test_streamed_text_arrives_as_deltas_and_joins_with_usage(
    server: ScriptedOpenAIServer,
) -> None:
    server.enqueue(Reply.text("Hel", "lo, ", "world", usage=(12, 3)))
    events = stream_all(make_model(server.base_url))

    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hel", "lo, ", "world"]
    final = events[-1]
    assert isinstance(final, Completion)
    assert [e for e in events if isinstance(e, Completion)] == [final]
    assert final.text == "Hello, world"
    assert final.usage == Usage(input_tokens=12, output_tokens=3)
    assert final.stop_reason == "stop"
    assert final.tool_calls == ()
    assert final.structured is None
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.body == {
        "model": "test-model",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Say hello."},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def test_json_schema_is_sent_and_complete_returns_the_validated_value(
    server: ScriptedOpenAIServer,
) -> None:
    server.enqueue(Reply.text('{"name": "Ada", ', '"age": 36}'))
    result = complete(make_model(server.base_url), schema=PERSON)

    assert result.structured == {"name": "Ada", "age": 36}
    assert server.requests[0].body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "plan", "schema": PERSON, "strict": True},
    }


def test_a_reply_that_does_not_match_the_schema_raises(server: ScriptedOpenAIServer) -> None:
    server.enqueue(Reply.text('{"name": "Ada"}'))
    with pytest.raises(StructuredOutputError, match="age") as caught:
        complete(make_model(server.base_url), schema=PERSON)
    assert caught.value.raw == '{"name": "Ada"}'


def tool_delta(index: int, fragment: str, *, call_id: str = "", name: str = "") -> str:
    """One chunk carrying a tool-call delta; the first for an index names the call."""
    part: dict[str, Any] = {"index": index, "function": {"arguments": fragment}}
    if call_id:
        part |= {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": fragment},
        }
    return chunk({"tool_calls": [part]})


def test_tool_call_deltas_are_accumulated_by_index(server: ScriptedOpenAIServer) -> None:
    server.enqueue(
        Reply(
            chunks=[
                tool_delta(0, "", call_id="call_a", name="get_weather"),
                tool_delta(0, '{"ci'),
                tool_delta(1, "", call_id="call_b", name="now"),
                tool_delta(0, 'ty": "Par'),
                tool_delta(0, 'is"}'),
                chunk(finish="tool_calls"),
                usage_chunk(20, 7),
            ]
        )
    )
    events = stream_all(make_model(server.base_url))

    calls = [e for e in events if isinstance(e, ToolCallRequest)]
    assert calls == [
        ToolCallRequest(id="call_a", name="get_weather", arguments={"city": "Paris"}),
        ToolCallRequest(id="call_b", name="now", arguments={}),
    ]
    final = events[-1]
    assert isinstance(final, Completion)
    assert final.tool_calls == tuple(calls)
    assert final.stop_reason == "tool_calls"
    assert final.text == ""
    assert final.usage == Usage(input_tokens=20, output_tokens=7)


def test_tool_call_arguments_that_are_not_json_raise(server: ScriptedOpenAIServer) -> None:
    opening = tool_delta(0, '{"q": ', call_id="call_a", name="search")
    server.enqueue(Reply(chunks=[opening, chunk(finish="tool_calls")]))
    with pytest.raises(ModelError, match=r"tool call 0 \(search\) arguments are not valid JSON"):
        stream_all(make_model(server.base_url))


def test_429_then_success_is_retried(server: ScriptedOpenAIServer) -> None:
    server.enqueue(Reply.error(429, "slow down", {"Retry-After": "0"}), Reply.text("ok"))
    result = complete(make_model(server.base_url, backoff=5.0))  # Retry-After wins over backoff

    assert result.text == "ok"
    assert len(server.requests) == 2
    assert server.requests[0].body == server.requests[1].body


def test_a_persisting_500_surfaces_after_the_retries(server: ScriptedOpenAIServer) -> None:
    server.enqueue(*[Reply.error(500, "the GPU caught fire")] * 3)
    with pytest.raises(ModelError, match="the GPU caught fire") as caught:
        complete(make_model(server.base_url, max_retries=2))

    assert caught.value.status_code == 500
    assert caught.value.retryable
    assert len(server.requests) == 3


def test_other_4xx_is_not_retried(server: ScriptedOpenAIServer) -> None:
    server.enqueue(Reply.error(400, "unknown model 'test-model'"))
    with pytest.raises(ModelError, match="HTTP 400: unknown model 'test-model'") as caught:
        complete(make_model(server.base_url))

    assert caught.value.status_code == 400
    assert not caught.value.retryable
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ("this is not json", r"malformed stream chunk \(Invalid JSON"),
        ('{"id": "chatcmpl-1", "object": "chat.completion.chunk"}', "no 'choices'"),
        ('{"choices": [{"delta": {"content": 42}}]}', r"choices\.0\.delta\.content"),
        ('{"error": {"message": "model overloaded"}}', "mid-stream: model overloaded"),
    ],
)
def test_a_malformed_chunk_is_a_clear_model_error(
    server: ScriptedOpenAIServer, payload: str, expected: str
) -> None:
    server.enqueue(Reply(chunks=[chunk({"content": "partial"}), payload]))
    with pytest.raises(ModelError, match=expected):
        stream_all(make_model(server.base_url))


def test_a_stream_cut_short_is_a_retryable_model_error(server: ScriptedOpenAIServer) -> None:
    server.enqueue(Reply(chunks=[chunk({"content": "half a"})], done=False))
    with pytest.raises(ModelError, match="ended before the reply finished") as caught:
        stream_all(make_model(server.base_url))
    assert caught.value.retryable


def test_a_closed_port_is_a_model_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ModelError, match="cannot POST") as caught:
        complete(make_model(f"http://127.0.0.1:{port}/v1"))
    assert caught.value.status_code is None
    assert caught.value.retryable


def test_a_read_timeout_is_a_retryable_model_error(server: ScriptedOpenAIServer) -> None:
    server.enqueue(Reply(chunks=[chunk(finish="stop")], delay=0.3))
    with pytest.raises(ModelError, match="timed out") as caught:
        complete(make_model(server.base_url, timeout=0.1))
    assert caught.value.retryable


@pytest.mark.parametrize(("api_key", "expected"), [("sk-test", "Bearer sk-test"), (None, None)])
def test_authorization_is_sent_only_with_a_key(
    server: ScriptedOpenAIServer, api_key: str | None, expected: str | None
) -> None:
    server.enqueue(Reply.text("ok"))
    complete(make_model(server.base_url, api_key=api_key))
    assert server.requests[0].headers.get("authorization") == expected


@pytest.mark.parametrize(
    ("env", "base_url"),
    [
        ({}, DEFAULT_BASE_URL),
        ({"OPENAI_BASE_URL": "http://oai:1/v1"}, "http://oai:1/v1"),
        (
            {"OPENAI_BASE_URL": "http://oai:1/v1", "AGENTKIT_OPENAI_BASE_URL": "http://ak:2/v1/"},
            "http://ak:2/v1",
        ),
    ],
)
def test_from_env_precedence(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], base_url: str
) -> None:
    for name in ("AGENTKIT_OPENAI_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    model = OpenAIModel.from_env("llama3.2")
    assert model.spec == "openai:llama3.2"
    assert model.url == f"{base_url}/chat/completions"
    asyncio.run(model.aclose())


def test_from_env_reads_the_key(
    server: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTKIT_OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    server.enqueue(Reply.text("ok"))
    complete(OpenAIModel.from_env("m"))
    assert server.requests[0].headers["authorization"] == "Bearer sk-env"


def test_retry_delay_honours_retry_after_with_a_cap() -> None:
    assert _retry_delay({"retry-after": "2"}, 0, 0.5) == 2.0
    assert _retry_delay({"retry-after": "3600"}, 0, 0.5) == 30.0
    assert _retry_delay({}, 2, 0.5) == 2.0
    assert _retry_delay({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 1, 0.5) == 1.0
