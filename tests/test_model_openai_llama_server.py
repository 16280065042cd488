"""OpenAIModel against a real OpenAI-compatible server nobody here wrote: llama-cpp-python's own
(``python -m llama_cpp.server``), running the shipped SmolLM2 GGUF on a loopback port.

That server takes structured output only as ``{"type": "json_object", "schema": …}`` and answers
``json_schema`` with an HTTP 500, so these tests show the negotiation end to end: a structured
call and a desk planner turn reach the model instead of failing on the transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from agentkit import Agent
from agentkit.events import ErrorEvent, PlanEvent
from agentkit.models._negotiation import SHAPE_MEMORY, Endpoint, classify_failure
from agentkit.models.base import ChatMessage, Completion, JsonSchema, TextDelta
from agentkit.models.llama import default_gguf_path
from agentkit.models.openai import OpenAIModel

#: a real backend (a model process, server or agent CLI) under test
pytestmark = pytest.mark.real_model

MODEL_ALIAS = "smollm2"
SMALL: JsonSchema = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "sunny": {"type": "boolean"}},
    "required": ["city", "sunny"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class LlamaServer:
    base_url: str
    log: Path

    def model(self) -> OpenAIModel:
        return OpenAIModel(MODEL_ALIAS, base_url=self.base_url, api_key=None, timeout=120.0)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate the server's process group, kill it if it lingers, and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _wait_ready(process: subprocess.Popen[bytes], base_url: str, log: Path) -> None:
    """Poll ``/v1/models`` until it answers 200; fail with the server's log if it exits. The
    test's timeout bounds the wait (loading the model on a busy two-core machine is slow)."""
    while True:
        if process.poll() is not None:
            pytest.fail(f"llama_cpp.server exited with {process.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"{base_url}/models", timeout=30.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.25)


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    port = _free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    argv = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(default_gguf_path()), "--model_alias", MODEL_ALIAS,
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096",
    ]  # fmt: skip
    with log.open("wb") as sink:
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: teardown kills all of it
        )  # fmt: skip
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_ready(process, base_url, log)
        yield LlamaServer(base_url, log)
    finally:
        _stop(process)
        SHAPE_MEMORY.clear()


@pytest.fixture(autouse=True)
def fresh_shape_memory() -> Iterator[None]:
    SHAPE_MEMORY.clear()
    yield
    SHAPE_MEMORY.clear()


def test_the_server_refuses_json_schema_as_an_invalid_request(llama_server: LlamaServer) -> None:
    """The server's own answer, pinned: an HTTP 500 whose body is a validation error."""
    body = {
        "model": MODEL_ALIAS,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 1,
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": SMALL}},
    }
    response = httpx.post(f"{llama_server.base_url}/chat/completions", json=body, timeout=60.0)
    assert response.status_code == 500, response.text
    assert "Input should be 'text' or 'json_object'" in response.text
    assert classify_failure(response.status_code, response.text) == "refused"


def test_a_chat_reply_streams(llama_server: LlamaServer) -> None:
    async def run() -> list[object]:
        model = llama_server.model()
        messages = [
            ChatMessage(role="system", content="You are a helpful assistant. Be brief."),
            ChatMessage(role="user", content="Say hello to Ada."),
        ]
        try:
            return [event async for event in model.stream(messages, purpose="chat")]
        finally:
            await model.aclose()

    events = asyncio.run(run())
    deltas = [event.text for event in events if isinstance(event, TextDelta)]
    final = events[-1]
    assert isinstance(final, Completion)
    assert len(deltas) > 1  # streamed, not one block
    assert final.text == "".join(deltas)
    assert final.text.strip()


def test_a_structured_call_is_negotiated_and_validated(llama_server: LlamaServer) -> None:
    async def run() -> tuple[Completion, Completion, str | None]:
        first, second = llama_server.model(), llama_server.model()
        messages = [
            ChatMessage(role="system", content="Answer with JSON only."),
            ChatMessage(role="user", content="The weather in Paris: sunny. Give city and sunny."),
        ]
        try:
            one = await first.complete(messages, purpose="classify", schema=SMALL)
            two = await second.complete(messages, purpose="classify", schema=SMALL)
            return one, two, second.structured_shape
        finally:
            await first.aclose()
            await second.aclose()

    one, two, shape = asyncio.run(run())
    for result in (one, two):
        assert isinstance(result.structured, dict)
        assert set(result.structured) == {"city", "sunny"}
        assert isinstance(result.structured["sunny"], bool)
    assert shape == "json_object"  # json_schema was refused; the server's grammar did the rest


def test_a_desk_planner_turn_never_fails_on_the_transport(
    llama_server: LlamaServer, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """desk-001 over the server: a validated plan, or a clear planner error about what the
    small model wrote -- never an HTTP failure, and no call refused in any shape."""
    config_path = data_dir / "agents" / "desk-001" / "config.json"
    config = json.loads(config_path.read_text())
    # like desk-local-001: a small local model on two shared cores needs longer stages, and
    # a stage timeout is not what this test is about
    config["planner"]["stage_timeout_scale"] = 6
    config_path.write_text(json.dumps(config))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("AGENTKIT_MODEL", raising=False)
    monkeypatch.setenv("AGENTKIT_OPENAI_BASE_URL", llama_server.base_url)

    with Agent.open("desk-001", data_dir=data_dir, model=f"openai:{MODEL_ALIAS}") as agent:
        turn = agent.send("list my traders")

    plans = [event for event in turn.events if isinstance(event, PlanEvent)]
    errors = [event for event in turn.events if isinstance(event, ErrorEvent)]
    assert plans or errors, turn.events
    if not plans:  # a planner error, about the plan the model wrote
        assert [error.code for error in errors] == ["invalid_plan"], errors
    for error in errors:
        assert "HTTP " not in error.message and "cannot POST" not in error.message, error
    folder = data_dir / "agents" / "desk-001" / "conversations" / turn.conversation_id
    records = [
        json.loads(line)
        for path in folder.glob("*/calls.jsonl")
        for line in path.read_text().splitlines()
    ]
    plan_calls = [record for record in records if record["purpose"] == "plan"]
    assert plan_calls, records
    for record in records:
        problem = record.get("error") or ""
        assert "HTTP " not in problem and "cannot POST" not in problem, record
    assert any(record["raw"].strip() for record in plan_calls)  # the model answered
    assert SHAPE_MEMORY.recall(Endpoint.of(llama_server.base_url, MODEL_ALIAS)) == "json_object"
