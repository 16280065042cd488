"""``record:FILE:SPEC`` and ``replay:FILE``: a planner conversation recorded once, replayed
offline with identical events; a changed request fails naming the difference."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from agentkit import Agent
from agentkit.errors import ModelError, ModelSpecError, StructuredOutputError
from agentkit.events import AgentEvent
from agentkit.models import ChatMessage, create_model, parse_model_spec
from agentkit.models.base import ToolSpec
from agentkit.models.cassette import RecordingModel, ReplayModel
from agentkit.models.scripted import ScriptedModel

from .conftest import run_cli


def step(id: str, type: str, **fields: Any) -> dict[str, Any]:
    return {"id": id, "type": type, "title": fields.pop("title", id), **fields}


CONTINUE = {"action": "continue"}
#: a desk conversation: a question, an answer needing consent, consent (3 turns)
DESK_TURNS: list[tuple[str, dict[str, list[Any]]]] = [
    (
        "create a trader on my binance account",
        {
            "plan": [
                {
                    "goal": "create a trader",
                    "steps": [
                        step("s1", "tool", tool_name="get_exchange_configs", tool_args={}),
                        step("s2", "ask_user", instruction="What should the trader be called?"),
                    ],
                }
            ],
            "replan": [CONTINUE],
        },
    ),
    (
        "Alpha",
        {
            "replan": [
                {
                    "action": "replace_remaining",
                    "steps": [
                        step(
                            "s3",
                            "tool",
                            tool_name="create_trader",
                            tool_args={
                                "name": "Alpha",
                                "exchange_id": "ex-1",
                                "model_id": "model-1",
                            },
                        ),
                        step("s4", "respond", instruction="Confirm the trader was created."),
                    ],
                }
            ]
        },
    ),
    ("yes", {"replan": [CONTINUE], "respond": ["Trader Alpha is ready."]}),
]

_IDS = re.compile(r"\b(conv|msg|sess|plan|appr)-[A-Za-z0-9]+")


def normalised(events: list[AgentEvent]) -> list[dict[str, Any]]:
    """Events as JSON with generated ids numbered by first appearance, timings zeroed and
    trace ids (random per run) blanked."""
    text = json.dumps([event.to_json_dict() for event in events], ensure_ascii=False)
    names: dict[str, str] = {}
    text = _IDS.sub(lambda m: names.setdefault(m.group(0), f"{m.group(1)}-{len(names)}"), text)
    shown: list[dict[str, Any]] = json.loads(text)
    for event in shown:
        for field in ("latencyMs", "elapsedMs", "durationMs"):
            if field in event:
                event[field] = 0
        if event.get("traceId"):
            event["traceId"] = "trace"
    return shown


@pytest.fixture(autouse=True)
def fixed_desk_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The desk stamps rows with the time; a replay needs the tools to answer the same."""
    monkeypatch.setattr("agentkit_desk.database._now", lambda: "2026-01-01T00:00:00.000Z")


def seed(data_dir: Path) -> None:
    """The desk's starting state (seeded once: a replay needs the same tool results)."""

    async def go(agent: Agent) -> None:
        await agent.tools.arun("create_model_config", {"provider": "openai", "model": "gpt-4o"})
        await agent.tools.arun(
            "create_exchange_config",
            {
                "exchange": "binance",
                "account_name": "main",
                "api_key": "AKEY-0123456789abcd",
                "secret_key": "SKEY-9876543210wxyz",
            },
        )

    with Agent.open("desk-001", data_dir=data_dir, model="scripted:none.json") as agent:
        agent.loop.run(go(agent))


def run_desk(data_dir: Path, model_for_turn: Any) -> list[list[AgentEvent]]:
    """The three desk turns, each on a new Agent (a new process, as far as it can tell)."""
    turns: list[list[AgentEvent]] = []
    conversation: str | None = None
    for index, (text, _script) in enumerate(DESK_TURNS):
        with Agent.open("desk-001", data_dir=data_dir, model=model_for_turn(index)) as agent:
            result = agent.send(text, conversation)
            conversation = result.conversation_id
            turns.append(result.events)
    return turns


def test_record_then_replay_a_planner_conversation_gives_identical_events(
    data_dir: Path, tmp_path: Path
) -> None:
    cassette = tmp_path / "desk.jsonl"
    seed(data_dir)
    clean = tmp_path / "clean"
    shutil.copytree(data_dir, clean)

    recorded = run_desk(
        data_dir, lambda i: RecordingModel(ScriptedModel(DESK_TURNS[i][1]), cassette)
    )
    lines = [json.loads(line) for line in cassette.read_text().splitlines()]
    assert [line["request"]["purpose"] for line in lines] == [
        "plan",
        "replan",
        "replan",
        "replan",
        "respond",
    ]
    assert all(line["v"] == 1 and line["model"] == "scripted:inline" for line in lines)
    text = cassette.read_text()
    assert "SKEY-9876543210wxyz" not in text and "AKEY-0123456789abcd" not in text

    replay = ReplayModel.from_file(cassette)
    replayed = run_desk(clean, lambda _i: replay)
    assert replay.remaining == 0
    assert [normalised(turn) for turn in replayed] == [normalised(turn) for turn in recorded]


def test_a_changed_prompt_under_replay_fails_naming_the_difference(
    data_dir: Path, tmp_path: Path
) -> None:
    cassette = tmp_path / "desk.jsonl"
    seed(data_dir)
    clean = tmp_path / "clean"
    shutil.copytree(data_dir, clean)
    run_desk(data_dir, lambda i: RecordingModel(ScriptedModel(DESK_TURNS[i][1]), cassette))

    prompts = clean / "agents" / "desk-001" / "prompts"
    prompts.mkdir(exist_ok=True)
    package = Path(__import__("agentkit.planning", fromlist=["x"]).__file__).parent / "prompts"
    original = (package / "plan.md").read_text(encoding="utf-8")
    (prompts / "plan.md").write_text("Think twice.\n" + original, encoding="utf-8")

    with Agent.open("desk-001", data_dir=clean, model=f"replay:{cassette}") as agent:
        result = agent.send(DESK_TURNS[0][0])
    errors = [e for e in result.events if e.type == "error"]
    assert errors, [e.type for e in result.events]
    message = errors[0].to_json_dict()["message"]
    assert "no recorded call matches this plan request" in message
    assert "messages[" in message and "Think twice." in message


def test_replay_matches_by_request_and_takes_repeats_in_order(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    hello = [ChatMessage(role="user", content="hello")]
    other = [ChatMessage(role="user", content="other")]

    async def record() -> list[str]:
        model = RecordingModel(ScriptedModel(["one", "two", "three"]), cassette)
        return [
            (await model.complete(hello, purpose="chat")).text,
            (await model.complete(hello, purpose="chat")).text,
            (await model.complete(other, purpose="chat")).text,
        ]

    assert asyncio.run(record()) == ["one", "two", "three"]

    async def replay() -> list[str]:
        model = ReplayModel.from_file(cassette)
        return [
            (await model.complete(other, purpose="chat")).text,  # out of order: matched by request
            (await model.complete(hello, purpose="chat")).text,
            (await model.complete(hello, purpose="chat")).text,
        ]

    assert asyncio.run(replay()) == ["three", "one", "two"]

    async def exhausted() -> None:
        model = ReplayModel.from_file(cassette)
        for _ in range(3):
            await model.complete(hello, purpose="chat")

    with pytest.raises(ModelError, match="used up"):
        asyncio.run(exhausted())

    async def unmatched() -> None:
        await ReplayModel.from_file(cassette).complete(
            [ChatMessage(role="user", content="hellO")], purpose="chat"
        )

    with pytest.raises(ModelError, match=r"messages\[0\]\.content: differs at character 4"):
        asyncio.run(unmatched())


def test_streamed_pieces_tool_calls_errors_and_secrets_round_trip(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    asked = [ChatMessage(role="user", content="go")]
    tool_reply = {
        "tool_calls": [{"name": "connect", "arguments": {"api_key": "sk-live-0123456789abcd"}}]
    }
    schema = {"type": "object", "required": ["x"]}

    async def record() -> None:
        model = RecordingModel(
            ScriptedModel({"chat": ["a few streamed words"], "act": [tool_reply], "plan": ["{}"]}),
            cassette,
        )
        [e async for e in model.stream(asked, purpose="chat")]
        await model.complete_with_tools(asked, tools=[ToolSpec(name="connect")], purpose="act")
        with pytest.raises(StructuredOutputError):
            await model.complete(asked, purpose="plan", schema=schema)

    asyncio.run(record())
    assert "sk-live-0123456789abcd" not in cassette.read_text()

    async def replay() -> None:
        model = ReplayModel.from_file(cassette)
        events = [e async for e in model.stream(asked, purpose="chat")]
        assert [getattr(e, "text", None) for e in events[:-1]] == [
            "a ",
            "few ",
            "streamed ",
            "words",
        ]
        done = await model.complete_with_tools(
            asked, tools=[ToolSpec(name="connect")], purpose="act"
        )
        assert done.tool_calls[0].name == "connect"
        assert done.tool_calls[0].arguments == {"api_key": "****abcd"}
        with pytest.raises(StructuredOutputError, match="required"):
            await model.complete(asked, purpose="plan", schema=schema)

    asyncio.run(replay())


def test_record_and_replay_specs(tmp_path: Path) -> None:
    replies = tmp_path / "r.json"
    replies.write_text('{"chat": ["hi"]}')
    assert str(parse_model_spec(f"record:{tmp_path}/c.jsonl:scripted:{replies}")).startswith(
        "record:"
    )
    model = create_model(f"record:c.jsonl:scripted:{replies}", base_dir=tmp_path)
    assert isinstance(model, RecordingModel) and model.path == tmp_path / "c.jsonl"
    for bad in ("record:", "record:c.jsonl", "record:c.jsonl:nonsense", "replay:"):
        with pytest.raises(ModelSpecError):
            parse_model_spec(bad)
    with pytest.raises(ModelSpecError, match="cannot read"):
        create_model(f"replay:{tmp_path}/missing.jsonl")
    (tmp_path / "bad.jsonl").write_text("{not json}\n")
    with pytest.raises(ModelSpecError, match="line 1"):
        create_model(f"replay:{tmp_path}/bad.jsonl")


SCENARIO = """\
v: 1
title: Chat, recorded then replayed
language: en
agent: innovator-001
turns:
  - user: hello there
    script: {chat: [Hello, I am Innovator.]}
    expect: {answer_contains: [Innovator]}
  - user: what next?
    script: {chat: [Let us plan.]}
    expect: {answer_contains: [plan]}
"""


def test_eval_with_a_replay_model_runs_offline(data_dir: Path, tmp_path: Path) -> None:
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "chat_replay_en.yaml").write_text(SCENARIO)
    replies = tmp_path / "replies.json"
    replies.write_text('{"chat": ["Hello, I am Innovator.", "Let us plan."]}')
    cassette = tmp_path / "eval.jsonl"
    common = [str(scenarios), "--no-progress"]

    recorded = run_cli(
        "--data-dir",
        str(data_dir),
        "eval",
        *common,
        "--model",
        f"record:{cassette}:scripted:{replies}",
        "--out",
        str(tmp_path / "a.csv"),
    )
    assert recorded.exit_code == 0, recorded.stderr
    assert len(cassette.read_text().splitlines()) == 2

    replayed = run_cli(
        "--data-dir",
        str(data_dir),
        "eval",
        *common,
        "--model",
        f"replay:{cassette}",
        "--out",
        str(tmp_path / "b.csv"),
    )
    assert replayed.exit_code == 0, replayed.stderr
    import pandas as pd

    first, second = pd.read_csv(tmp_path / "a.csv"), pd.read_csv(tmp_path / "b.csv")
    assert list(second["passed"]) == [True] == list(first["passed"])
    assert list(second["answer"]) == list(first["answer"])

    cassette.write_text(cassette.read_text().replace("what next?", "what then?"))
    broken = run_cli(
        "--data-dir",
        str(data_dir),
        "eval",
        *common,
        "--model",
        f"replay:{cassette}",
        "--out",
        str(tmp_path / "c.csv"),
    )
    table = pd.read_csv(tmp_path / "c.csv")
    assert broken.exit_code != 0 or not table["passed"].all()
    assert "no recorded call matches" in str(table["error"].iloc[0]) + str(table["errors"].iloc[0])
