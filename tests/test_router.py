"""The tool-choice router (``planner.tool_choice = "router"``): ranking, the constrained
choice, "no tool", asking instead of guessing a write, the trace — with scripted models, and a
handful of requests on both sample agents with the embedded model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agentkit.config import PlannerConfig
from agentkit.events import AgentOutputEvent, AskUserEvent, PlanEvent, ToolCallEvent
from agentkit.models.scripted_signals import ScoringScriptedModel
from agentkit.planning.state import UserMessage
from agentkit.planning.tool_ranking import rank_tools, terms
from agentkit.testing import scripted_signals
from agentkit.tools import Tool
from pydantic import BaseModel, ConfigDict

from .test_planner import KEY, Env, TurnContext, env, of, run, seed_desk, step

__all__ = ["env"]  # the fixture, re-exported for pytest

REPO = Path(__file__).resolve().parents[1]
ROUTER = PlannerConfig(tool_choice="router")
ROUTED_LOOP = PlannerConfig(strategy="tool_loop", tool_choice="router")


def route_records(calls: list[Any]) -> list[Any]:
    return [record for record in calls if record.purpose == "route"]


def first_tool_calls(events: list[Any]) -> list[str]:
    return [e.name for e in of(events, ToolCallEvent) if not e.id.startswith("live-")]


# -- ranking ----------------------------------------------------------------------------------


def test_terms_split_chinese_into_bigrams_and_stem_english() -> None:
    assert {"trader", "list"} <= set(terms("Listing my TRADERS"))
    found = terms("删除我的交易员")
    assert {"删除", "交易", "易员", "删"} <= set(found)
    assert "除交" not in found  # no bigram across 的/我: they split the run
    assert "my" not in terms("my traders")


@pytest.mark.parametrize(
    ("request_text", "expected"),
    [
        ("show me my traders", "list_traders"),
        ("add my Bybit exchange account", "create_exchange_config"),
        ("列出所有交易员", "list_traders"),
        ("删除交易员 trader-2", "delete_trader"),
        ("查看我的偏好设置", "get_preferences"),
    ],
)
def test_clear_requests_rank_their_tool_first(env: Env, request_text: str, expected: str) -> None:
    assert rank_tools(env.tools, request_text)[0].name == expected


def test_a_greeting_matches_no_tool(env: Env) -> None:
    for greeting in ("hello!", "你好", "thanks, that's all", "谢谢"):
        assert all(item.score == 0 for item in rank_tools(env.tools, greeting)), greeting


def test_a_question_alone_makes_no_read_tool_match(env: Env) -> None:
    # "name" is an argument of the create tools: no reason for a read tool to answer this,
    # and a question never gets a write, so the answer is "no tool"
    for question in ("what's your name?", "你叫什么名字", "who are you?"):
        ranked = rank_tools(env.tools, question)
        reads = [item for item in ranked if not env.tools.get(item.name).side_effect]
        assert all(item.score == 0 for item in reads), question
        turn = env.turn(question, {"respond": ["-"]}, config=ROUTED_LOOP)
        events = run(turn)
        assert not first_tool_calls(events) and not of(events, AskUserEvent), question


class _NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _weather_tool() -> Tool[Any]:
    return Tool(
        name="get_weather",
        description="Today's weather forecast for the user's city.",
        args_model=_NoArgs,
        handler=lambda _: {"forecast": "sunny"},
        side_effect=False,
        live_state=False,
        examples=("will it rain today?", "今天天气怎么样"),
    )


def test_a_tool_added_to_the_registry_is_ranked_at_once(env: Env) -> None:
    assert rank_tools(env.tools, "will it rain tomorrow?")[0].score == 0
    env.tools.register(_weather_tool())
    assert rank_tools(env.tools, "will it rain tomorrow?")[0].name == "get_weather"
    assert rank_tools(env.tools, "明天天气如何")[0].name == "get_weather"


# -- the routed turn (scripted model) ---------------------------------------------------------


def test_a_clear_read_runs_its_tool_without_a_model_call(env: Env) -> None:
    seed_desk(env.workspace)
    script = {
        "replan": [{"action": "finish", "reason": "shown"}],
        "respond": ["You have one exchange account: binance/main."],
    }
    turn = env.turn("which exchange accounts do I have?", script, config=ROUTER)
    events = run(turn)
    assert first_tool_calls(events) == ["get_exchange_configs"]
    assert next(r.purpose for r in turn.records) == "route"  # no plan call at all
    assert "plan" not in [r.purpose for r in turn.records]
    (choice,) = route_records(turn.records)
    assert choice.messages == []  # the ranking had a clear leader: nothing to vote on
    route = choice.route
    assert route["decision"] == "tool" and route["decided"] == "get_exchange_configs"
    names = [c["name"] for c in route["candidates"]]
    assert names[0] == "get_exchange_configs" and len(names) <= 3
    assert all(c["score"] > 0 for c in route["candidates"])
    # a question reads: the side-effecting create_exchange_config is not even a candidate
    assert not any(c["side_effect"] for c in route["candidates"])
    assert events[-1].text == "You have one exchange account: binance/main."


def test_the_route_decision_is_written_to_the_turns_trace(env: Env) -> None:
    script = {"replan": [{"action": "finish"}], "respond": ["No traders yet."]}
    turn = env.turn("list my traders", script, config=ROUTER)
    events = run(turn)
    traced = turn.store.call_records(turn.key, events[-1].message_id)  # calls.jsonl on a file store
    lines = [json.loads(line) for line in traced]
    assert lines[0]["purpose"] == "route"
    assert lines[0]["route"]["decided"] == "list_traders"
    assert {"name", "score", "side_effect", "matched"} <= set(lines[0]["route"]["candidates"][0])
    assert all("route" not in line for line in lines[1:])  # other calls are as before


def test_a_greeting_is_answered_without_a_tool_or_a_choice_call(env: Env) -> None:
    turn = env.turn("你好", {"respond": ["你好!有什么可以帮你?"]}, config=ROUTED_LOOP)
    events = run(turn)
    assert not first_tool_calls(events) and not of(events, AskUserEvent)
    assert [r.purpose for r in turn.records] == ["route", "respond"]
    record = turn.records[0]
    assert record.messages == [] and record.route["decision"] == "none"
    assert "".join(e.text for e in of(events, AgentOutputEvent)) == "你好!有什么可以帮你?"


def test_a_question_never_gets_a_side_effecting_tool(env: Env) -> None:
    # create_trader's own words match best ("model", "config", "exist"): a question reads
    for text in ("Which model configs exist?", "现在有哪些模型配置"):
        turn = env.turn(text, {"act": [{"action": "answer", "text": "-"}]}, config=ROUTED_LOOP)
        events = run(turn)
        assert first_tool_calls(events) == ["get_model_configs"], text
        assert not of(events, AskUserEvent)


def test_a_search_request_never_gets_a_side_effecting_tool(env: Env) -> None:
    env.tools.register(
        Tool(
            name="file_report",
            description="File a report.",
            args_model=_NoArgs,
            handler=lambda _: {"filed": True},
            side_effect=True,
            live_state=False,
            examples=("file the weekly report", "提交报告"),
        )
    )
    for text in ("search for the weekly report", "搜索包含报告的内容"):
        assert rank_tools(env.tools, text)[0].name == "file_report"  # the words match it
        turn = env.turn(text, {"respond": ["-"]}, config=ROUTED_LOOP)
        events = run(turn)
        assert not first_tool_calls(events) and not of(events, AskUserEvent), text
        assert route_records(turn.records)[0].route["decision"] == "none"


def test_near_ties_go_to_the_models_choice_which_may_be_no_tool(env: Env) -> None:
    # "traders" alone: four tools share the word; the (generating) model settles it
    script = {"route": [{"tool": "none"}], "respond": ["I manage traders and accounts."]}
    turn = env.turn("traders", script, config=ROUTED_LOOP)
    events = run(turn)
    assert not first_tool_calls(events)
    (choice,) = route_records(turn.records)
    assert choice.route["choice"] == "none" and choice.route["decision"] == "none"
    names = [c["name"] for c in choice.route["candidates"]]
    assert choice.schema_["properties"]["tool"]["enum"] == [*names, "none"]
    prompt = choice.messages[-1]["content"]
    assert "list_traders" in prompt and "- none:" in prompt
    assert len(prompt) < 1200  # a short prompt: no system prompt, no full tool list
    assert events[-1].text == "I manage traders and accounts."


def test_a_write_tied_with_a_read_asks_the_user_instead(env: Env) -> None:
    turn = env.turn("traders", {"route": [{"tool": "create_trader"}]}, config=ROUTED_LOOP)
    events = run(turn)
    (asked,) = of(events, AskUserEvent)
    assert asked.kind == "question" and not asked.tool_name
    assert "create_trader" in asked.question and "list_traders" in asked.question
    assert route_records(turn.records)[0].route["decision"] == "ask"
    state = env.state()
    assert state is not None and state.status == "waiting_user"


def _scorer(votes: dict[str, float], replies: dict[str, list[Any]]) -> ScoringScriptedModel:
    """The kit's scripted model with likelihood scoring, from a table by prompt start."""

    def score(prompt: str, _text: str) -> list[float]:
        return [next(v for k, v in votes.items() if k in prompt), -1.0]

    return scripted_signals(replies, score=score)


def scored_turn(env: Env, text: str, model: ScoringScriptedModel) -> TurnContext:
    return TurnContext(
        key=KEY,
        input=UserMessage(text),
        store=env.store,
        memory=env.memory,
        model=model,
        tools=env.tools,
        config=ROUTED_LOOP,
    )


def test_a_likelihood_vote_settles_a_near_tie(env: Env) -> None:
    votes = {"exchange accounts": -2.0, "AI model configs": -30.0}
    model = _scorer(votes, {"act": [{"action": "answer", "text": "-"}]})
    turn = scored_turn(env, "which configs?", model)
    events = run(turn)
    assert first_tool_calls(events) == ["get_exchange_configs"]
    (choice,) = route_records(turn.records)
    voted = {c["name"]: c["vote"] for c in choice.route["candidates"] if c["vote"] is not None}
    assert voted == {"get_model_configs": -31.0, "get_exchange_configs": -3.0}
    assert choice.route["choice"] == "get_exchange_configs"
    assert len(choice.messages) == 2 and choice.messages[0]["content"].startswith("Task: ")
    assert all(text == " which configs?" for _prompt, text in model.pairs)
    # the other way round, the other tool: the vote, not the registry's order, decided
    model = _scorer({**votes, "AI model configs": -1.0}, {"act": [{"action": "answer"}]})
    assert first_tool_calls(run(scored_turn(env, "which configs?", model))) == ["get_model_configs"]


def test_a_clear_write_is_filled_under_its_schema_then_asks_consent(env: Env) -> None:
    script = {"route": [{"trader_id": "trader-2"}]}
    turn = env.turn("delete trader-2 please", script, config=ROUTED_LOOP)
    events = run(turn)
    (asked,) = of(events, AskUserEvent)
    assert asked.kind == "confirmation" and asked.tool_name == "delete_trader"
    assert asked.tool_args == {"trader_id": "trader-2"}
    choice, arguments = route_records(turn.records)
    assert choice.messages == [] and choice.route["decided"] == "delete_trader"
    assert arguments.route["stage"] == "arguments"
    assert arguments.schema_["required"] == ["trader_id"]  # that tool's schema, nothing else


def test_arguments_that_do_not_validate_become_a_question(env: Env) -> None:
    script = {"route": [{"trader": 2}]}
    turn = env.turn("delete trader-2 please", script, config=ROUTED_LOOP)
    events = run(turn)
    (asked,) = of(events, AskUserEvent)
    assert asked.kind == "question" and "trader id" in asked.question


def test_a_failed_vote_leaves_the_rankings_order(env: Env) -> None:
    # no route replies: the vote fails; the ranking's first (a read) stands, the error is traced
    script = {"act": [{"action": "answer", "text": "-"}]}
    turn = env.turn("traders", script, config=ROUTED_LOOP)
    events = run(turn)
    assert first_tool_calls(events) == ["list_traders"]
    (choice,) = route_records(turn.records)
    assert choice.error and choice.route["decided"] == "list_traders"


def test_a_failed_vote_among_writes_asks_instead_of_guessing_one(env: Env) -> None:
    # three near-tied side-effecting tools and no route replies: the vote fails, and the
    # router asks which one was meant rather than proposing the ranking's first write
    text = "用 OKX 主账户（ex-1）和 deepseek 模型（model-1）创建一个叫 Gamma 的交易员"
    turn = env.turn(text, {}, config=ROUTED_LOOP)
    events = run(turn)
    (choice,) = route_records(turn.records)
    tied = [c["name"] for c in choice.route["candidates"]]
    assert len(tied) > 1 and all(env.tools.get(name).side_effect for name in tied)
    assert choice.error and choice.route["decision"] == "ask"
    assert not first_tool_calls(events)
    (asked,) = of(events, AskUserEvent)
    assert asked.kind == "question" and all(name in asked.question for name in tied)


def test_a_tool_added_to_the_toolset_is_routable_at_once(env: Env) -> None:
    env.tools.register(_weather_tool())
    script = {"act": [{"action": "answer", "text": "Sunny."}]}
    turn = env.turn("今天天气怎么样?", script, config=ROUTED_LOOP)
    events = run(turn)
    assert first_tool_calls(events) == ["get_weather"]
    assert route_records(turn.records)[0].route["candidates"][0]["name"] == "get_weather"


def test_router_off_is_todays_behaviour(env: Env) -> None:
    script = {
        "plan": [{"goal": "list", "steps": [step("s1", "tool", tool_name="list_traders")]}],
        "replan": [{"action": "finish"}],
        "respond": ["No traders."],
    }
    turn = env.turn("list my traders", script)  # tool_choice defaults to "model"
    events = run(turn)
    assert PlannerConfig().tool_choice == "model"
    assert [r.purpose for r in turn.records] == ["plan", "replan", "respond"]
    assert all(r.route is None for r in turn.records)
    assert "route" not in turn.records[0].to_json_line()
    assert len(of(events, PlanEvent)) == 1


def test_the_local_sample_agent_and_init_turn_the_router_on(tmp_path: Path) -> None:
    from agentkit.config import load_agent_config
    from agentkit.scaffold import init_agent

    desk = load_agent_config(REPO / "data" / "agents" / "desk-local-001" / "config.json")
    assert desk.planner.tool_choice == "router"
    made = init_agent(tmp_path, "mine")
    assert load_agent_config(made / "config.json").planner.tool_choice == "router"


# -- the embedded model -----------------------------------------------------------------------

LLAMA_REQUESTS = [
    ("desk-local-001", "Show me my traders", "list_traders"),
    ("desk-local-001", "列出所有交易员", "list_traders"),
    ("desk-local-001", "hello!", "none"),
    ("desk-local-001", "现在有哪些模型配置", "get_model_configs"),  # a question: never a write
    ("desk-local-001", "Delete trader-1", "delete_trader"),
    ("notes-001", "列出我的笔记", "list_notes"),
    ("notes-001", "find my note about the dentist", "search_notes"),
    ("notes-001", "你好", "none"),
    ("notes-001", "帮我记住买牛奶", "add_note"),
]


@pytest.fixture(scope="module")
def llama_first_actions() -> dict[tuple[str, str], dict[str, Any]]:
    """Each request's first action on the embedded model, router on (one model, shared)."""
    from agentkit.eval.first_tool import FirstToolRow, FirstToolTable, run_first_tool

    tables = []
    for agent in ("desk-local-001", "notes-001"):
        rows = [
            FirstToolRow(text=text, expect=expect, lang="zh" if ord(text[0]) > 127 else "en")
            for name, text, expect in LLAMA_REQUESTS
            if name == agent
        ]
        tables.append(FirstToolTable(kind="first_tool", id=agent, agent=agent, rows=rows))
    rows = run_first_tool(
        tables, data_dir=REPO / "data", model="llama", params={"planner.tool_choice": "router"}
    )
    return {(row["agent"], row["text"]): row for row in rows}


@pytest.mark.parametrize(("agent", "text", "expected"), LLAMA_REQUESTS)
def test_the_embedded_model_routes_the_sample_agents(
    llama_first_actions: dict[tuple[str, str], dict[str, Any]],
    agent: str,
    text: str,
    expected: str,
) -> None:
    row = llama_first_actions[(agent, text)]
    assert row["action"] == expected, row
    assert not row["side_effect_false_positive"], row  # never a write for a read or a greeting
    route = json.loads(row["route"])
    assert route["candidates"] or route["decision"] == "none"
