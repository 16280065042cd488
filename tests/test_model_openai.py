"""OpenAIModel against a real loopback HTTP server speaking the OpenAI streaming protocol."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from agentkit.errors import ModelError, StructuredOutputError
from agentkit.models._negotiation import (
    SHAPE_MEMORY,
    Endpoint,
    ShapeMemory,
    classify_failure,
)
from agentkit.models.base import (
    ChatMessage,
    Completion,
    JsonSchema,
    ModelEvent,
    TextDelta,
    ToolCallRequest,
)
from agentkit.models.openai import DEFAULT_BASE_URL, OpenAIModel
from agentkit.models.transport import MAX_BACKOFF, retry_delay
from agentkit.types import Usage

from .fakes.openai_server import Reply, ScriptedOpenAIServer, chunk, usage_chunk

#: a real backend (a model process, server or agent CLI) under test
pytestmark = pytest.mark.real_model

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


@pytest.fixture(autouse=True)
def fresh_shape_memory() -> Iterator[None]:
    """Each test starts with no endpoint known, and leaves none behind for other files."""
    SHAPE_MEMORY.clear()
    yield
    SHAPE_MEMORY.clear()


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
    with socket.socket() as probe:  # bound, never listening: refused, and no other
        probe.bind(("127.0.0.1", 0))  # process can take the port while the test runs
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


def test_retry_delay_honours_retry_after_with_a_cap_else_backs_off_with_jitter() -> None:
    assert retry_delay({"retry-after": "2"}, 0, 0.5, cap=30.0) == 2.0
    assert retry_delay({"retry-after-ms": "250"}, 0, 0.5, cap=30.0) == 0.25
    assert retry_delay({"retry-after": "3600"}, 0, 0.5, cap=30.0) == 30.0
    # backoff * 2**attempt, shortened by up to 25 % (jitter), capped at MAX_BACKOFF
    delays = {retry_delay({}, 2, 0.5, cap=30.0) for _ in range(50)}
    assert all(1.5 <= delay <= 2.0 for delay in delays) and len(delays) > 1
    http_date = {"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}
    assert 0.75 <= retry_delay(http_date, 1, 0.5, cap=30.0) <= 1.0
    assert retry_delay(None, 20, 0.5, cap=30.0) <= MAX_BACKOFF


# -- structured output: negotiating the request shape per endpoint ----------------------------

# What llama-cpp-python 0.3.36's server answers a json_schema response_format with (observed): the
# request validation error, caught by the server's route handler and sent as an HTTP 500.
LLAMA_CPP_REFUSAL = Reply(
    status=500,
    body={
        "error": {
            "message": "1 validation error:\n  {'type': 'literal_error', "
            "'loc': ('body', 'response_format', 'type'), "
            "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
            "'ctx': {'expected': \"'text' or 'json_object'\"}}\n\n"
            '  File "llama_cpp/server/app.py", line 376, in create_chat_completion\n'
            "    POST /v1/chat/completions",
            "type": "internal_server_error",
            "param": None,
            "code": None,
        }
    },
)
OPENAI_STYLE_REFUSAL = Reply.error(
    400, "Invalid parameter: 'response_format' of type 'json_schema' is not supported."
)
ADA = Reply.text('{"name": "Ada", "age": 36}')


def shapes_sent(server: ScriptedOpenAIServer) -> list[str]:
    """The response_format type of each request, "plain" for none."""
    return [
        request.body.get("response_format", {}).get("type", "plain") for request in server.requests
    ]


def test_an_accepted_json_schema_is_remembered_for_the_endpoint(
    server: ScriptedOpenAIServer,
) -> None:
    server.enqueue(ADA, ADA)
    assert complete(make_model(server.base_url), schema=PERSON).structured["name"] == "Ada"
    model = make_model(server.base_url)
    assert model.structured_shape == "json_schema"  # a new object knows it: process-wide
    complete(model, schema=PERSON)
    assert shapes_sent(server) == ["json_schema", "json_schema"]


@pytest.mark.parametrize(
    "refusal", [OPENAI_STYLE_REFUSAL, LLAMA_CPP_REFUSAL], ids=["http400", "http500-validation"]
)
def test_a_refused_json_schema_falls_back_to_json_object_with_the_schema(
    server: ScriptedOpenAIServer, refusal: Reply
) -> None:
    server.enqueue(refusal, ADA)
    result = complete(make_model(server.base_url, max_retries=3), schema=PERSON)

    assert result.structured == {"name": "Ada", "age": 36}
    assert shapes_sent(server) == ["json_schema", "json_object"]  # the refusal was not retried
    assert server.requests[1].body["response_format"] == {"type": "json_object", "schema": PERSON}
    body_without_format = {
        k: v for k, v in server.requests[1].body.items() if k != "response_format"
    }
    assert body_without_format == {
        k: v for k, v in server.requests[0].body.items() if k != "response_format"
    }
    assert SHAPE_MEMORY.recall(Endpoint.of(server.base_url, "test-model")) == "json_object"

    # a new model object for the same endpoint starts with json_object: one request, not two
    server.enqueue(ADA)
    assert complete(make_model(server.base_url), schema=PERSON).structured["age"] == 36
    assert shapes_sent(server) == ["json_schema", "json_object", "json_object"]


def test_when_both_formats_are_refused_a_plain_request_is_validated(
    server: ScriptedOpenAIServer,
) -> None:
    server.enqueue(
        LLAMA_CPP_REFUSAL, Reply.error(422, "response_format: unknown key 'schema'"), ADA
    )
    result = complete(make_model(server.base_url), schema=PERSON)

    assert result.structured == {"name": "Ada", "age": 36}
    assert shapes_sent(server) == ["json_schema", "json_object", "plain"]
    assert "response_format" not in server.requests[2].body
    assert make_model(server.base_url).structured_shape == "plain"

    server.enqueue(Reply.text("Ada is 36."))  # plain from the start now, and still validated
    with pytest.raises(StructuredOutputError, match="not JSON") as caught:
        complete(make_model(server.base_url), schema=PERSON)
    assert isinstance(caught.value, ModelError)
    assert caught.value.raw == "Ada is 36."
    assert shapes_sent(server)[3:] == ["plain"]


def test_a_request_refused_in_every_shape_is_one_clear_error(server: ScriptedOpenAIServer) -> None:
    server.enqueue(
        LLAMA_CPP_REFUSAL,
        Reply.error(400, "json_object is not supported"),
        Reply.error(400, "messages: too many system messages"),
    )
    with pytest.raises(ModelError) as caught:
        complete(make_model(server.base_url), schema=PERSON)

    message = str(caught.value)
    assert message.startswith("openai:test-model: HTTP 400: messages: too many system messages")
    assert "json_schema: HTTP 500: " in message and "Input should be 'text'" in message
    assert "json_object: HTTP 400: json_object is not supported" in message
    assert caught.value.status_code == 400
    assert not caught.value.retryable
    assert len(server.requests) == 3
    assert make_model(server.base_url).structured_shape is None  # nothing worked: nothing kept


def test_a_remembered_shape_that_is_refused_later_steps_down(
    server: ScriptedOpenAIServer,
) -> None:
    SHAPE_MEMORY.remember(Endpoint.of(server.base_url, "test-model"), "json_object")
    server.enqueue(Reply.error(400, "response_format is no longer supported"), ADA)
    complete(make_model(server.base_url), schema=PERSON)
    assert shapes_sent(server) == ["json_object", "plain"]  # never back up to json_schema
    assert make_model(server.base_url).structured_shape == "plain"


def test_endpoints_are_told_apart_by_base_url_and_model(server: ScriptedOpenAIServer) -> None:
    SHAPE_MEMORY.remember(Endpoint.of(server.base_url + "/", "test-model"), "plain")
    other = OpenAIModel("other-model", base_url=server.base_url, api_key=None)
    assert make_model(server.base_url).structured_shape == "plain"  # trailing slash: same URL
    assert other.structured_shape is None
    server.enqueue(ADA)
    complete(other, schema=PERSON)
    assert shapes_sent(server) == ["json_schema"]


def test_a_private_shape_memory_is_not_shared(server: ScriptedOpenAIServer) -> None:
    own = ShapeMemory()
    server.enqueue(LLAMA_CPP_REFUSAL, ADA)
    complete(make_model(server.base_url, shapes=own), schema=PERSON)
    assert own.recall(Endpoint.of(server.base_url, "test-model")) == "json_object"
    assert make_model(server.base_url).structured_shape is None


def test_a_500_saying_the_request_was_invalid_is_not_retried(
    server: ScriptedOpenAIServer,
) -> None:
    server.enqueue(LLAMA_CPP_REFUSAL)
    with pytest.raises(ModelError, match=r"(?s)HTTP 500: .*Input should be") as caught:
        complete(make_model(server.base_url, max_retries=3))  # no schema: nothing to step down

    assert caught.value.status_code == 500
    assert not caught.value.retryable
    assert len(server.requests) == 1


def test_a_transient_503_is_still_retried_before_negotiating(
    server: ScriptedOpenAIServer,
) -> None:
    server.enqueue(Reply.error(503, "loading model"), Reply.error(503, "loading model"), ADA)
    result = complete(make_model(server.base_url, max_retries=3), schema=PERSON)

    assert result.structured == {"name": "Ada", "age": 36}
    assert shapes_sent(server) == ["json_schema"] * 3  # retried as is, not taken as a refusal
    assert make_model(server.base_url).structured_shape == "json_schema"


def test_a_503_that_outlasts_the_retries_keeps_nothing(server: ScriptedOpenAIServer) -> None:
    server.enqueue(*[Reply.error(503, "invalid request: overloaded")] * 2)
    with pytest.raises(ModelError, match="HTTP 503 after 2 attempts") as caught:
        complete(make_model(server.base_url, max_retries=1), schema=PERSON)
    assert caught.value.retryable
    assert shapes_sent(server) == ["json_schema"] * 2
    assert make_model(server.base_url).structured_shape is None


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (401, "Incorrect API key provided"),
        (404, "The model `test-model` does not exist"),
        (400, "This model's maximum context length is 4096 tokens."),
    ],
)
def test_failures_no_request_shape_fixes_are_raised_at_once(
    server: ScriptedOpenAIServer, status: int, message: str
) -> None:
    server.enqueue(Reply.error(status, message))
    with pytest.raises(ModelError, match=f"HTTP {status}: ") as caught:
        complete(make_model(server.base_url), schema=PERSON)
    assert not caught.value.retryable
    assert shapes_sent(server) == ["json_schema"]
    assert make_model(server.base_url).structured_shape is None


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (
            400,
            '{"error": {"message": "Unrecognized request argument: response_format"}}',
            "refused",
        ),
        (422, '{"detail": [{"msg": "Field required"}]}', "refused"),
        (500, "1 validation error for CreateChatCompletionRequest", "refused"),
        (500, '{"error": {"type": "invalid_request_error", "message": "no"}}', "refused"),
        (501, "Not Implemented", "refused"),
        (500, '{"error": {"message": "CUDA out of memory"}}', "transient"),
        (500, "", "transient"),
        (502, "Bad Gateway: invalid request from upstream", "transient"),
        (503, "Input should be 'text'", "transient"),
        (504, "", "transient"),
        (429, "Rate limit reached", "transient"),
        (401, "invalid api key", "failed"),
        (403, "", "failed"),
        (404, "", "failed"),
        (408, "", "failed"),
        (400, '{"error": {"code": "context_length_exceeded"}}', "failed"),
    ],
)
def test_classify_failure(status: int, body: str, expected: str) -> None:
    assert classify_failure(status, body) == expected
