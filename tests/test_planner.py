"""The planner runtime (engine ``planner``, strategy ``plan_replan``) with scripted models."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from agentkit import Agent
from agentkit.config import PlannerConfig
from agentkit.events import (
    AgentEvent,
    AskUserEvent,
    ErrorEvent,
    PlanEvent,
    PlanningEvent,
    ResultEvent,
    SessionEvent,
    ToolCallEvent,
)
from agentkit.memory import ExecutionState, MemoryRepository, PlanStep, TaskState, Waiting
from agentkit.models.scripted import ScriptedModel
from agentkit.planning import TurnContext, capability_signature, drive, intents, render_prompt
from agentkit.planning.state import UserMessage
from agentkit.store import ConversationKey, InMemoryConfigStore, InMemoryConversationStore
from agentkit.store.sqlite_kv import SqliteConfigStore
from agentkit.tools import ToolRegistry
from agentkit_desk import DeskDatabase, desk_tools, open_desk
from agentkit_desk import run_desk_tool as run_tool

KEY = ConversationKey("desk-001", "conv-test")


@dataclass
class Env:
    store: InMemoryConversationStore
    kv: InMemoryConfigStore
    db: DeskDatabase
    tools: ToolRegistry
    workspace: Path

    @property
    def memory(self) -> MemoryRepository:
        return MemoryRepository(self.kv)

    def state(self) -> ExecutionState | None:
        loaded = self.memory.load_execution_state(KEY.agent_id, KEY.conversation_id)
        return loaded.value if loaded else None

    def turn(self, text: str, script: dict[str, list[Any]], **options: Any) -> TurnContext:
        return TurnContext(
            key=KEY,
            input=UserMessage(text),
            store=self.store,
            memory=self.memory,
            model=ScriptedModel(script),
            tools=self.tools,
            **options,
        )


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    workspace = tmp_path / "workspace"
    with open_desk(workspace) as db:
        store = InMemoryConversationStore()
        store.create(KEY, "test")
        yield Env(store, InMemoryConfigStore(), db, desk_tools(db), workspace)


def run(turn: TurnContext) -> list[AgentEvent]:
    async def collect() -> list[AgentEvent]:
        return [event async for event in drive(turn)]

    events = asyncio.run(collect())
    assert isinstance(events[0], SessionEvent)
    assert isinstance(events[-1], ResultEvent)
    return events


def of(events: list[AgentEvent], kind: type[Any]) -> list[Any]:
    return [event for event in events if isinstance(event, kind)]


def step(id: str, type: str, **fields: Any) -> dict[str, Any]:
    return {"id": id, "type": type, "title": fields.pop("title", id), **fields}


def seed_desk(workspace: Path) -> None:
    run_tool(workspace, "create_model_config", '{"provider": "openai", "model": "gpt-4o"}')
    run_tool(
        workspace,
        "create_exchange_config",
        '{"exchange": "binance", "account_name": "main", "api_key": "AKEY123456",'
        ' "secret_key": "SKEY987654"}',
    )


CONTINUE = {"action": "continue"}


# -- intents ----------------------------------------------------------------------------------


CONFIRMING = [
    "是",
    "好",
    "好的",
    "好了",
    "对",
    "确认",
    "继续",
    "yes",
    "Y",
    "ok",
    "sure",
    "go ahead",
]


@pytest.mark.parametrize("text", [*CONFIRMING, "Yes!", " 好的。 "])
def test_short_confirmations_are_recognised(text: str) -> None:
    assert intents.is_confirmation(text) and not intents.is_refusal(text)


@pytest.mark.parametrize("text", ["不", "不要", "取消", "no", "cancel", "stop", "No."])
def test_refusals_are_recognised(text: str) -> None:
    assert intents.is_refusal(text) and not intents.is_confirmation(text)


# -- the create-a-trader flow, across "processes" ------------------------------------------------


def test_create_trader_flow_resumes_in_a_new_process_and_needs_consent(data_dir: Path) -> None:
    workspace = data_dir / "agents" / "desk-001" / "workspace"
    seed_desk(workspace)
    first = {
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
    }
    with Agent.open("desk-001", data_dir=data_dir, model=ScriptedModel(first)) as agent:
        turn1 = agent.send("create a trader on my binance account")
    assert turn1.result.status == "completed"
    assert turn1.text == "What should the trader be called?"
    assert of(turn1.events, AskUserEvent)[0].kind == "question"
    conversation = turn1.conversation_id

    # A new Agent object: a new process as far as the planner can tell (same data dir).
    second = {
        "replan": [
            {
                "action": "replace_remaining",
                "steps": [
                    step(
                        "s3",
                        "tool",
                        tool_name="create_trader",
                        tool_args={"name": "Alpha", "exchange_id": "ex-1", "model_id": "model-1"},
                    ),
                    step("s4", "respond", instruction="Confirm the trader was created."),
                ],
            }
        ]
    }
    model2 = ScriptedModel(second)
    with Agent.open("desk-001", data_dir=data_dir, model=model2) as agent:
        turn2 = agent.send("Alpha", conversation)
    assert [r.purpose for r in model2.requests] == ["replan"]  # no new plan: it resumed
    consent = of(turn2.events, AskUserEvent)
    assert consent and consent[0].kind == "confirmation" and consent[0].tool_name == "create_trader"
    assert "create_trader" in turn2.text
    with open_desk(workspace) as db:
        assert db.traders() == []  # not without consent

    third = {"replan": [CONTINUE], "respond": ["Trader Alpha is ready."]}
    with Agent.open("desk-001", data_dir=data_dir, model=ScriptedModel(third)) as agent:
        turn3 = agent.send("yes", conversation)
        assert turn3.text == "Trader Alpha is ready."
        with SqliteConfigStore(data_dir / "agentkit.db") as kv:
            state = MemoryRepository(kv).load_execution_state("desk-001", conversation)
        assert state is not None and state.value.status == "completed"
        calls_file = data_dir / "agents/desk-001/conversations" / conversation
        traces = [
            json.loads(line)
            for path in calls_file.glob("*/calls.jsonl")
            for line in path.read_text().splitlines()
        ]
    with open_desk(workspace) as db:
        traders = db.traders()
    assert [trader.name for trader in traders] == ["Alpha"]
    planned_calls = [
        event.name
        for turn in (turn1, turn2, turn3)
        for event in of(turn.events, ToolCallEvent)
        if not event.id.startswith("live-")
    ]
    assert planned_calls == ["get_exchange_configs", "create_trader"]  # each exactly once
    assert {trace["purpose"] for trace in traces} == {"plan", "replan", "respond"}
    assert all({"messages", "schema", "raw", "latency_ms"} <= set(trace) for trace in traces)
    assert "SKEY987654" not in json.dumps(traces) and "AKEY123456" not in json.dumps(traces)


def test_haole_while_waiting_is_an_answer_not_a_reset(env: Env) -> None:
    script = {
        "plan": [{"goal": "g", "steps": [step("s1", "ask_user", instruction="Which exchange?")]}]
    }
    run(env.turn("set up my exchange config", script))
    assert env.state() is not None and env.state().status == "waiting_user"  # type: ignore[union-attr]
    answer = env.turn(
        "好了", {"replan": [{"action": "finish", "reason": "done"}], "respond": ["OK"]}
    )
    events = run(answer)
    model = answer.model
    assert isinstance(model, ScriptedModel)
    assert "plan" not in [r.purpose for r in model.requests]
    state = env.state()
    assert state is not None and state.status == "completed"
    replies = [o for o in state.observations if o.kind == "user_reply"]
    assert replies and "Which exchange?" in replies[0].content and "好了" in replies[0].content
    assert state.step("s1").status == "done"
    assert of(events, ErrorEvent) == []


def test_delete_trader_is_not_run_without_consent_and_no_cancels(env: Env) -> None:
    seed_desk(env.workspace)
    run_tool(
        env.workspace,
        "create_trader",
        '{"name": "T", "exchange_id": "ex-1", "model_id": "model-1"}',
    )
    plan = {
        "goal": "delete",
        "steps": [
            step("d1", "tool", tool_name="delete_trader", tool_args={"trader_id": "trader-1"},
                 requires_confirmation=False),
            step("d2", "respond", instruction="say it is gone"),
        ],
    }  # fmt: skip
    events = run(env.turn("delete trader-1", {"plan": [plan]}))
    ask = of(events, AskUserEvent)
    assert ask[0].kind == "confirmation" and ask[0].tool_args == {"trader_id": "trader-1"}
    assert len(env.db.traders()) == 1
    state = env.state()
    assert state is not None and state.status == "waiting_confirmation"
    assert state.waiting is not None and "delete_trader" in state.waiting.confirmation_target

    events = run(env.turn("no", {}))
    assert len(env.db.traders()) == 1
    state = env.state()
    assert state is not None and state.status == "completed"
    assert "cancelled" in state.final_answer and "cancelled" in events[-1].text  # type: ignore[attr-defined]
    assert state.step("d1").status == "skipped"


def test_confirmed_side_effect_runs_exactly_once(env: Env) -> None:
    seed_desk(env.workspace)
    plan = {"goal": "g", "steps": [step("c1", "tool", tool_name="set_preference",
                                        tool_args={"key": "lang", "value": "zh"})]}  # fmt: skip
    run(env.turn("remember I like Chinese: set lang to zh", {"plan": [plan]}))
    assert env.db.preferences() == {}
    events = run(env.turn("确认", {"replan": [CONTINUE]}))
    assert env.db.preferences() == {"lang": "zh"}
    assert [e.name for e in of(events, ToolCallEvent)] == ["set_preference"]
    run(env.turn("yes", {"plan": [{"goal": "g", "steps": [step("r", "respond")]}],
                         "respond": ["fine"]}))  # fmt: skip
    assert env.db.preferences() == {"lang": "zh"}  # a later "yes" does not run it again


def test_a_different_request_cancels_the_pending_confirmation(env: Env) -> None:
    plan = {"goal": "g", "steps": [step("c1", "tool", tool_name="set_preference",
                                        tool_args={"key": "a", "value": 1})]}  # fmt: skip
    run(env.turn("save a=1", {"plan": [plan]}))
    other = {"goal": "other", "steps": [step("r", "respond", instruction="hello")]}
    events = run(env.turn("what time is it", {"plan": [other], "respond": ["noon"]}))
    assert env.db.preferences() == {}
    assert events[-1].text == "noon"  # type: ignore[attr-defined]
    state = env.state()
    assert state is not None and state.goal == "other" and state.status == "completed"


def test_live_state_plan_uses_the_fresh_snapshot_not_stale_task_state(env: Env) -> None:
    env.memory.save_task_state(
        KEY.agent_id,
        KEY.conversation_id,
        TaskState(important_facts=("The user has no exchange configured",)),
        expected_version=0,
    )
    seed_desk(env.workspace)  # the user adds one outside the chat (agentkit tool …)
    turn = env.turn(
        "create a trader on my exchange",
        {"plan": [{"goal": "g", "steps": [step("r", "respond")]}], "respond": ["ok"]},
        config=PlannerConfig(live_state_keywords=("exchange",)),  # the desk agents' config
    )
    events = run(turn)
    planning = of(events, PlanningEvent)[0]
    assert "get_exchange_configs" in planning.live_state and not planning.task_state_included
    model = turn.model
    assert isinstance(model, ScriptedModel)
    prompt = next(r for r in model.requests if r.purpose == "plan").messages[-1].content
    assert '"id": "ex-1"' in prompt and "binance" in prompt
    assert "no exchange configured" not in prompt
    assert "SKEY987654" not in prompt
    state = env.state()
    assert state is not None
    assert any(o.kind == "live_state" and "ex-1" in o.content for o in state.observations)


def test_task_state_is_in_the_prompt_for_other_requests(env: Env) -> None:
    env.memory.save_task_state(
        KEY.agent_id,
        KEY.conversation_id,
        TaskState(important_facts=("Likes tea",)),
        expected_version=0,
    )
    turn = env.turn("hello there", {"plan": [{"goal": "g", "steps": [step("r", "respond")]}],
                                    "respond": ["hi"]})  # fmt: skip
    run(turn)
    assert isinstance(turn.model, ScriptedModel)
    assert "Likes tea" in turn.model.requests[0].messages[-1].content


def test_clear_empties_task_state_and_execution_state(env: Env) -> None:
    env.memory.save_task_state(
        KEY.agent_id, KEY.conversation_id, TaskState(current_goal="x"), expected_version=0
    )
    run(
        env.turn(
            "ask me", {"plan": [{"goal": "g", "steps": [step("a", "ask_user", instruction="?")]}]}
        )
    )
    assert env.state() is not None
    events = run(env.turn("/clear", {}))
    assert events[-1].status == "completed"  # type: ignore[attr-defined]
    assert env.state() is None
    assert env.memory.load_task_state(KEY.agent_id, KEY.conversation_id).value.is_empty
    status = run(env.turn("/status", {}))
    assert "Execution state: none" in status[-1].text  # type: ignore[attr-defined]


def test_a_capability_change_discards_a_stale_execution_state(env: Env) -> None:
    stale = ExecutionState(
        conversation_id=KEY.conversation_id,
        status="waiting_user",
        steps=(PlanStep(id="old", type="ask_user", instruction="old question?", status="running"),),
        current_step_id="old",
        waiting=Waiting(question="old question?"),
        capability_signature="0000:plan_replan/0",
    )
    env.memory.save_execution_state(KEY.agent_id, KEY.conversation_id, stale, expected_version=0)
    turn = env.turn("hi", {"plan": [{"goal": "new", "steps": [step("r", "respond")]}],
                           "respond": ["hello"]})  # fmt: skip
    run(turn)
    state = env.state()
    assert state is not None and state.goal == "new"
    assert state.capability_signature == capability_signature(env.tools)
    assert [s.id for s in state.steps] == ["r"]


def test_retry_over_a_finished_flow_starts_fresh(env: Env) -> None:
    run(env.turn("hi", {"plan": [{"goal": "first", "steps": [step("r", "respond")]}],
                        "respond": ["a"]}))  # fmt: skip
    turn = env.turn("try again", {"plan": [{"goal": "second", "steps": [step("r", "respond")]}],
                                  "respond": ["b"]})  # fmt: skip
    run(turn)
    assert isinstance(turn.model, ScriptedModel)
    assert "goal: first" not in turn.model.requests[0].messages[-1].content
    state = env.state()
    assert state is not None and state.goal == "second"


def test_model_calls_are_recorded_on_the_turn(env: Env) -> None:
    turn = env.turn(
        "think",
        {
            "plan": [
                {
                    "goal": "g",
                    "steps": [step("t", "reason", instruction="why?"), step("r", "respond")],
                }
            ],
            "reason": ["because"],
            "replan": ["not json at all"],
            "respond": ["done"],
        },
    )
    events = run(turn)
    assert [c.purpose for c in turn.records] == ["plan", "reason", "replan", "respond"]
    assert turn.records[2].error and turn.records[0].parsed is not None
    assert events[-1].text == "done"  # type: ignore[attr-defined]
    state = env.state()
    assert state is not None
    assert any(o.kind == "reasoning" and o.content == "because" for o in state.observations)


def test_replan_can_replace_remaining_steps(env: Env) -> None:
    turn = env.turn(
        "list traders",
        {
            "plan": [{"goal": "g", "steps": [step("l", "tool", tool_name="list_traders"),
                                             step("r", "respond")]}],
            "replan": [{"action": "finish", "reason": "nothing more"}],
            "respond": ["none"],
        },
    )  # fmt: skip
    run(turn)
    state = env.state()
    assert state is not None and state.status == "completed"
    assert [(s.id, s.status) for s in state.steps] == [
        ("l", "done"), ("r", "skipped"), ("finish_3", "done")
    ]  # fmt: skip


def test_agent_prompt_override(env: Env, tmp_path: Path) -> None:
    agent_dir = tmp_path / "agent"
    (agent_dir / "prompts").mkdir(parents=True)
    (agent_dir / "prompts" / "plan.md").write_text("CUSTOM PLAN PROMPT for: $request")
    assert render_prompt("plan", agent_dir, request="x") == "CUSTOM PLAN PROMPT for: x"
    turn = env.turn("hi", {"plan": [{"goal": "g", "steps": [step("r", "respond")]}],
                           "respond": ["ok"]}, agent_dir=agent_dir)  # fmt: skip
    run(turn)
    assert isinstance(turn.model, ScriptedModel)
    assert turn.model.requests[0].messages[-1].content == "CUSTOM PLAN PROMPT for: hi"


def test_iteration_bound(env: Env) -> None:
    steps = [step(f"l{i}", "tool", tool_name="list_traders") for i in range(4)]
    turn = env.turn("list", {"plan": [{"goal": "g", "steps": steps}], "replan": [CONTINUE]},
                    config=PlannerConfig(max_iterations=2))  # fmt: skip
    events = run(turn)
    assert of(events, ErrorEvent)[0].code == "iteration_limit"
    state = env.state()
    assert state is not None and state.status == "failed"


def test_plan_event_masks_secrets(env: Env) -> None:
    plan = {"goal": "g", "steps": [step("x", "tool", tool_name="create_exchange_config",
            tool_args={"exchange": "okx", "account_name": "a", "api_key": "AK-VERY-SECRET-1",
                       "secret_key": "SK-VERY-SECRET-2"})]}  # fmt: skip
    said = "add my okx account a, key AK-VERY-SECRET-1 secret SK-VERY-SECRET-2"
    events = run(env.turn(said, {"plan": [plan]}))
    dumped = json.dumps([e.to_json_dict() for e in events])
    assert "AK-VERY-SECRET-1" not in dumped and "SK-VERY-SECRET-2" not in dumped
    assert of(events, PlanEvent) and of(events, AskUserEvent)[0].kind == "confirmation"
