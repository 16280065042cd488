"""The seams the planner was split along: one engine interface over one runtime, one registry
of running turns, one owner of the on-disk layout, one chat window, and reply schemas generated
from the reply types (built once per registry)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import agentkit.config
import pytest
from agentkit import (
    Agent,
    ConversationBusyError,
    ConversationKey,
    FileConversationStore,
    InMemoryConversationStore,
    InvalidIdError,
    Message,
    ScriptedModel,
    UsageError,
)
from agentkit.agent import ENGINES
from agentkit.events import AgentEvent
from agentkit.layout import DataLayout
from agentkit.memory import ChatHistory, PlanStep, chat_window, kept_from
from agentkit.planning import (
    PlanReply,
    StepReply,
    Strategy,
    act_schema,
    plan_schema,
    register_strategy,
    strategies,
    strategy_names,
)
from agentkit.planning.graph import Stage, Turn
from agentkit.planning.schemas import STEP_FIELDS, batch_schema
from agentkit.planning.steps import Execute
from agentkit.sessions import TurnRegistry
from agentkit.tools import Tool, ToolRegistry
from pydantic import BaseModel, ConfigDict, Field

# -- the layout ---------------------------------------------------------------------------------


def test_the_layout_names_every_path_and_checks_ids(tmp_path: Path) -> None:
    layout = DataLayout(tmp_path)
    conversation = layout.conversation(ConversationKey("agent-1", "conv-1"))
    assert conversation.dir == tmp_path / "agents" / "agent-1" / "conversations" / "conv-1"
    assert conversation.meta.name == "meta.json" and conversation.history.name == "history.json"
    assert conversation.turn_log("msg-1") == conversation.dir / "msg-1" / "messages.log"
    assert conversation.calls("msg-1") == conversation.dir / "msg-1" / "calls.jsonl"
    assert layout.config_db == tmp_path / "agentkit.db"
    agent = layout.agent("agent-1")
    assert agent.prompt("plan") == agent.dir / "prompts" / "plan.md"
    assert agent.lock_file("conv-1") == agent.conversations_dir / ".conv-1.lock"
    assert agent.data_root == layout
    for bad in ("../x", "a/b", ""):
        with pytest.raises(InvalidIdError):
            layout.agent(bad)
        with pytest.raises(InvalidIdError):
            conversation.calls(bad)


def test_a_file_store_keeps_its_conversations_where_the_layout_says(tmp_path: Path) -> None:
    store = FileConversationStore(tmp_path)
    key = ConversationKey("agent-1", "conv-1")
    store.create(key, "t")
    folder = store.folder(key)
    assert folder == DataLayout(store.root).conversation(key).dir
    assert (folder / "journal.log").is_file() and (folder / "meta.json").is_file()
    assert InMemoryConversationStore().folder(key) is None


# -- running turns ------------------------------------------------------------------------------


def test_one_registry_admits_one_turn_per_conversation_and_cancels_it() -> None:
    async def scenario() -> None:
        registry = TurnRegistry()
        with registry.admit("a", "c") as running:
            with pytest.raises(ConversationBusyError), registry.admit("a", "c"):
                pass
            with registry.admit("a", "other"):
                assert len(registry) == 2
            assert registry.running("a", "c") is running
            await running.cancel()  # before the engine said how: passed on when it does
            stopped: list[str] = []
            await running.on_cancel(lambda: stopped.append("stop"))
            assert stopped == ["stop"]
        assert registry.running("a", "c") is None and len(registry) == 0

    asyncio.run(scenario())


def test_a_busy_writer_lock_refuses_the_turn_and_leaves_nothing_registered() -> None:
    class Held:
        def __enter__(self) -> None:
            raise ConversationBusyError("a", "c", 0.0)

        def __exit__(self, *exc: object) -> None:
            return None

    registry = TurnRegistry()
    with pytest.raises(ConversationBusyError), registry.admit("a", "c", Held()):
        pass
    assert registry.running("a", "c") is None


# -- one engine interface over one runtime -------------------------------------------------------


def test_both_engines_implement_one_interface() -> None:
    assert set(ENGINES) == {"chat", "planner"}
    for engine in ENGINES.values():
        assert callable(engine.run_turn)


def test_an_agent_builds_its_runtime_once_and_shares_the_pools_registry(data_dir: Path) -> None:
    plan = {"goal": "g", "steps": [{"id": "r", "type": "respond", "title": "answer"}]}
    model = ScriptedModel({"plan": [plan, plan], "respond": ["one", "two"]})
    with Agent.open("desk-001", data_dir=data_dir, model=model) as agent:
        runtime, tools = agent.runtime, agent.tools
        first = agent.send("hello")
        agent.send("again", first.conversation_id)
        assert agent.runtime is runtime and agent.tools is tools
        assert agent.runtime.turns is agent.pool.turns and len(agent.pool.turns) == 0
        assert agent.model is model
        trace = agent.call_records_dir(first.conversation_id)
        assert trace is not None
        assert (trace / first.session.message_id / "calls.jsonl").is_file()


# -- one chat window ------------------------------------------------------------------------------


def _message(role: str, text: str) -> Message:
    return Message.model_validate(
        {
            "role": role,
            "content": text,
            "message_id": "msg-1",
            "timestamp": datetime(2026, 1, 1, tzinfo=UTC),
        }
    )


def test_the_window_starts_where_the_records_say_without_system_messages() -> None:
    old = [_message("user" if i % 2 == 0 else "assistant", f"m{i}") for i in range(6)]
    stored = [*old, _message("system", "a note"), _message("user", "new")]
    assert [m.content for m in chat_window(stored)] == [*(m.content for m in old), "new"]
    assert [m.content for m in chat_window(stored, 4)] == ["m4", "m5", "new"]
    assert kept_from(stored, 3) == 4 and kept_from(stored, 0) == len(stored)
    assert kept_from(stored, 99) == 0
    assert [m.content for m in ChatHistory.of(stored, max_turns=1, start=4).messages] == [
        "m5",
        "new",
    ]


# -- reply schemas ---------------------------------------------------------------------------------


class _CityArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    city: str = Field(min_length=1, max_length=80, description="a city")


def _registry(*names: str) -> ToolRegistry:
    return ToolRegistry(
        Tool(
            name=name,
            description="the weather",
            args_model=_CityArgs,
            handler=lambda args: {"ok": True},
            side_effect=False,
            live_state=False,
        )
        for name in names
    )


def test_schemas_are_generated_from_the_reply_types_and_built_once_per_registry() -> None:
    tools = _registry("weather")
    schema = plan_schema(tools, 4)
    assert plan_schema(tools, 4) is schema  # cached
    assert list(schema["properties"]) == list(PlanReply.model_fields)
    steps = schema["properties"]["steps"]
    assert steps["minItems"] == 1 and steps["maxItems"] == 4
    assert "minItems" not in batch_schema(tools, 4)["properties"]["steps"]  # may be empty
    variants = steps["items"]["anyOf"]
    tool_variant = variants[0]
    assert list(tool_variant["properties"]) == list(STEP_FIELDS["tool"])
    assert set(STEP_FIELDS["tool"]) <= set(StepReply.model_fields)
    assert tool_variant["properties"]["tool_name"] == {"const": "weather"}
    assert tool_variant["properties"]["tool_args"]["properties"]["city"] == {
        "minLength": 1,
        "type": "string",
    }
    assert {v["properties"]["type"]["const"] for v in variants} == set(STEP_FIELDS)
    text = json.dumps(schema)
    assert "maxLength" not in text and "description" not in text  # grammar-lean
    tools.register(_registry("forecast").get("forecast"))
    grown = plan_schema(tools, 4)
    assert grown is not schema and len(grown["properties"]["steps"]["items"]["anyOf"]) == 5
    act = act_schema(tools)
    assert [v["properties"]["action"]["const"] for v in act["anyOf"]] == ["tool", "tool", "answer"]


# -- a strategy is one module and one registration ----------------------------------------------


@dataclass(frozen=True)
class _OneAnswer(Stage):
    """A stage of its own: a one-step plan, then the shared execute loop."""

    async def run(self, turn: Turn) -> AsyncIterator[AgentEvent | Stage]:
        step = PlanStep(id="answer", type="respond", title="Answer")
        turn.flow.save(turn.state.with_steps((step,), plan_id="once"))
        yield Execute()


class AnswerAtOnce(Strategy):
    """A strategy of its own: no plan call, one answer step."""

    name = "answer_at_once"

    def start(self, turn: Turn) -> Stage:
        return _OneAnswer()


def test_a_new_strategy_is_a_class_and_one_registration(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the registries are per process: this test's strategy is gone after it
    monkeypatch.setattr(strategies, "_REGISTRY", dict(strategies._REGISTRY))
    monkeypatch.setattr(agentkit.config, "_STRATEGY_NAMES", list(agentkit.config._STRATEGY_NAMES))
    register_strategy(AnswerAtOnce())
    assert "answer_at_once" in strategy_names()
    config_path = data_dir / "agents" / "desk-001" / "config.json"
    config = json.loads(config_path.read_text())
    config["planner"] = {**config.get("planner", {}), "strategy": "answer_at_once"}
    config_path.write_text(json.dumps(config))
    model = ScriptedModel({"respond": ["Hello."]})
    with Agent.open("desk-001", data_dir=data_dir, model=model) as agent:
        result = agent.send("hi")
        assert result.result.status == "completed" and result.text == "Hello."
        assert [request.purpose for request in model.requests] == ["respond"]
        state = agent.execution_state(result.conversation_id)
        assert state is not None
        assert state.value.capability_signature.endswith(":answer_at_once")
    with pytest.raises(UsageError, match="snake_case"):
        register_strategy(type("Bad", (AnswerAtOnce,), {"name": "Not A Name"})())
