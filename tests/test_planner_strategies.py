"""The planner's strategies ``next_step`` and ``tool_loop``, the optional ``classify`` call and
the stage timeout scale (scripted models; one real OpenAI-compatible HTTP server)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agentkit import FunctionModel, ModelRequest
from agentkit.config import PlannerConfig
from agentkit.events import (
    AgentOutputEvent,
    AskUserEvent,
    ErrorEvent,
    PlanEvent,
    PlanningEvent,
    ReplanEvent,
    ToolCallEvent,
)
from agentkit.memory import TaskState
from agentkit.models.openai import OpenAIModel
from agentkit.models.scripted import ScriptedModel
from agentkit.planning import TurnContext
from agentkit.planning.state import UserMessage

from .fakes.openai_server import Reply, ScriptedOpenAIServer, chunk, usage_chunk
from .test_planner import KEY, Env, env, of, run, seed_desk, step

__all__ = ["env"]  # the fixture, re-exported for pytest

NEXT_STEP = PlannerConfig(strategy="next_step")
TOOL_LOOP = PlannerConfig(strategy="tool_loop")


def planned_tools(events: list[Any]) -> list[str]:
    return [e.name for e in of(events, ToolCallEvent) if not e.id.startswith("live-")]


def purposes(turn: TurnContext) -> list[str]:
    model = turn.model
    assert isinstance(model, ScriptedModel)
    return [request.purpose for request in model.requests]


def calls(*names_args: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"tool_calls": [{"name": n, "arguments": a} for n, a in names_args]}


# -- next_step ---------------------------------------------------------------------------------


def test_next_step_plans_batch_by_batch_without_replanning(env: Env) -> None:
    seed_desk(env.workspace)
    script = {
        "plan": [
            {"goal": "overview", "steps": [step("b1", "tool", tool_name="list_traders")]},
            {"steps": [step("b2", "tool", tool_name="get_model_configs"), step("b3", "respond")]},
        ],
        "respond": ["You have one model config and no traders."],
    }
    turn = env.turn("give me an overview", script, config=NEXT_STEP)
    events = run(turn)
    assert purposes(turn) == ["plan", "plan", "respond"]  # no replan calls at all
    assert not of(events, ReplanEvent)
    assert planned_tools(events) == ["list_traders", "get_model_configs"]
    assert [len(e.steps) for e in of(events, PlanEvent)] == [1, 2]
    second_batch_prompt = turn.model.requests[1].messages[-1].content  # type: ignore[attr-defined]
    assert "b1 [done]" in second_batch_prompt  # the next batch sees what the last one did
    assert "[tool_result b1]" in second_batch_prompt
    state = env.state()
    assert state is not None and state.status == "completed"
    assert [s.id for s in state.steps] == ["b1", "b2", "b3"]
    assert turn.records[-1].purpose == "respond"
    assert events[-1].text == "You have one model config and no traders."


def test_next_step_empty_batch_finishes_with_what_was_done(env: Env) -> None:
    script = {
        "plan": [
            {"goal": "g", "steps": [step("b1", "tool", tool_name="list_traders")]},
            {"steps": []},
        ]
    }
    events = run(env.turn("list my traders", script, config=NEXT_STEP))
    assert events[-1].status == "completed"
    assert "b1" in events[-1].text  # the fallback answer names the done step
    state = env.state()
    assert state is not None and state.status == "completed"


def test_next_step_question_ends_the_batch_and_the_answer_plans_the_rest(env: Env) -> None:
    first = {
        "plan": [
            {
                "goal": "rename",
                "steps": [
                    step("q1", "ask_user", instruction="Which trader?"),
                    step("stale", "tool", tool_name="list_traders"),
                ],
            }
        ]
    }
    events = run(env.turn("rename a trader", first, config=NEXT_STEP))
    assert of(events, AskUserEvent)[0].question == "Which trader?"
    second = {
        "plan": [{"steps": [step("r1", "respond", instruction="Say which one.")]}],
        "respond": ["Trader Alpha it is."],
    }
    turn = env.turn("Alpha", second, config=NEXT_STEP)
    events = run(turn)
    assert planned_tools(events) == []  # the step planned before the answer was dropped
    prompt = turn.model.requests[0].messages[-1].content  # type: ignore[attr-defined]
    assert 'answered the question "Which trader?": Alpha' in prompt
    state = env.state()
    assert state is not None and state.status == "completed"
    assert state.step("stale").status == "skipped"


def test_next_step_reusing_a_step_id_is_repaired_or_fails_cleanly(env: Env) -> None:
    script = {
        "plan": [
            {"goal": "g", "steps": [step("b1", "tool", tool_name="list_traders")]},
            {"steps": [step("b1", "respond")]},  # id taken
            {"steps": [step("b1", "respond")]},  # repair round repeats the mistake
        ]
    }
    events = run(env.turn("list my traders", script, config=NEXT_STEP))
    error = of(events, ErrorEvent)[0]
    assert error.code == "invalid_plan" and "duplicate step id 'b1'" in error.message
    state = env.state()
    assert state is not None and state.status == "failed"


def test_next_step_side_effect_waits_for_consent_then_continues_the_batch(env: Env) -> None:
    seed_desk(env.workspace)
    create = step(
        "c1",
        "tool",
        tool_name="create_trader",
        tool_args={"name": "Beta", "exchange_id": "ex-1", "model_id": "model-1"},
    )
    first = {"plan": [{"goal": "g", "steps": [create, step("r1", "respond")]}]}
    events = run(env.turn("create trader Beta on ex-1 with model-1", first, config=NEXT_STEP))
    assert of(events, AskUserEvent)[0].kind == "confirmation"
    assert env.db.traders() == []
    turn = env.turn("yes", {"respond": ["Beta is ready."]}, config=NEXT_STEP)
    events = run(turn)
    assert planned_tools(events) == ["create_trader"]
    assert [t.name for t in env.db.traders()] == ["Beta"]
    assert purposes(turn) == ["respond"]  # the rest of the batch, no new plan
    assert events[-1].text == "Beta is ready."


# -- tool_loop ---------------------------------------------------------------------------------


def test_tool_loop_calls_tools_natively_until_the_model_answers(env: Env) -> None:
    seed_desk(env.workspace)
    script = {
        "act": [
            calls(("list_traders", {})),
            calls(("get_model_configs", {})),
            "You have no traders yet and one model config (gpt-4o).",
        ]
    }
    turn = env.turn("what do I have besides exchanges?", script, config=TOOL_LOOP)
    events = run(turn)
    assert planned_tools(events) == ["list_traders", "get_model_configs"]
    assert "".join(e.text for e in of(events, AgentOutputEvent)).startswith("You have no traders")
    model = turn.model
    assert isinstance(model, ScriptedModel)
    offered = model.requests[0].schema
    assert offered is not None
    assert [t["name"] for t in offered["tools"]] == list(env.tools.names())
    assert "[tool_result act_1]" in model.requests[1].messages[-1].content
    state = env.state()
    assert state is not None and state.status == "completed"
    assert [(s.id, s.status) for s in state.steps] == [("act_1", "done"), ("act_2", "done")]
    assert [c.purpose for c in turn.records] == ["act", "act", "act"]
    assert json.loads(turn.records[0].raw) == calls(("list_traders", {}))


def test_tool_loop_side_effect_needs_consent_across_turns(env: Env) -> None:
    seed_desk(env.workspace)
    args = {"name": "Gamma", "exchange_id": "ex-1", "model_id": "model-1"}
    events = run(
        env.turn(
            "create trader Gamma on ex-1 with model-1",
            {"act": [calls(("create_trader", args))]},
            config=TOOL_LOOP,
        )
    )
    consent = of(events, AskUserEvent)[0]
    assert consent.kind == "confirmation" and consent.tool_name == "create_trader"
    assert env.db.traders() == []
    state = env.state()
    assert state is not None and state.status == "waiting_confirmation"
    events = run(env.turn("yes", {"act": ["Gamma is ready."]}, config=TOOL_LOOP))
    assert planned_tools(events) == ["create_trader"]
    assert [t.name for t in env.db.traders()] == ["Gamma"]
    assert events[-1].text == "Gamma is ready."


def test_tool_loop_refusal_runs_nothing(env: Env) -> None:
    seed_desk(env.workspace)
    run(
        env.turn(
            "delete trader tr-1",
            {"act": [calls(("delete_trader", {"trader_id": "tr-1"}))]},
            config=TOOL_LOOP,
        )
    )
    events = run(env.turn("no", {"act": ["unused"]}, config=TOOL_LOOP))
    assert planned_tools(events) == []
    state = env.state()
    assert state is not None and state.status == "completed"
    assert "cancelled" in events[-1].text


def test_tool_loop_repeated_read_is_not_rerun_and_leads_to_the_answer(env: Env) -> None:
    script = {
        "act": [calls(("list_traders", {})), calls(("list_traders", {}))],
        "respond": ["No traders."],
    }
    turn = env.turn("traders?", script, config=TOOL_LOOP)
    events = run(turn)
    assert planned_tools(events) == ["list_traders"]  # asked twice, run once
    assert purposes(turn) == ["act", "act", "respond"]
    respond_prompt = turn.model.requests[2].messages[-1].content  # type: ignore[attr-defined]
    assert '[tool_result act_1] {"traders": []}' in respond_prompt
    assert events[-1].text == "No traders."
    state = env.state()
    assert state is not None and state.status == "completed"
    # the second call is a step the gate held (its repeat rule), skipped and noted
    assert [(s.type, s.status) for s in state.steps] == [
        ("tool", "done"),
        ("tool", "skipped"),
        ("respond", "done"),
    ]


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        (calls(("launch_rocket", {})), "unknown tool 'launch_rocket'"),
        (calls(("delete_trader", {"trader": 1})), "delete_trader"),
        ("", "neither a tool call nor text"),
    ],
    ids=["hallucinated-tool", "wrong-arguments", "empty-reply"],
)
def test_tool_loop_bad_action_gets_one_repair_then_a_clean_error(
    env: Env, bad: Any, problem: str
) -> None:
    turn = env.turn("do it", {"act": [bad, bad]}, config=TOOL_LOOP)
    events = run(turn)
    error = of(events, ErrorEvent)[0]
    assert error.code == "invalid_action" and problem in error.message
    assert planned_tools(events) == []
    model = turn.model
    assert isinstance(model, ScriptedModel)
    assert len(model.requests) == 2  # the action and one repair round
    assert problem in model.requests[1].messages[-1].content  # the model was shown why
    state = env.state()
    assert state is not None and state.status == "failed"


def test_tool_loop_repair_round_can_fix_the_action(env: Env) -> None:
    script = {"act": [calls(("launch_rocket", {})), calls(("list_traders", {})), "None yet."]}
    events = run(env.turn("traders?", script, config=TOOL_LOOP))
    assert planned_tools(events) == ["list_traders"]
    assert events[-1].status == "completed"


def test_tool_loop_is_bounded(env: Env) -> None:
    config = PlannerConfig(strategy="tool_loop", max_iterations=3)
    script = {
        "act": [
            calls(("list_traders", {})),
            calls(("get_model_configs", {})),
            calls(("get_preferences", {})),
            calls(("get_exchange_configs", {})),
        ]
    }
    events = run(env.turn("loop forever", script, config=config))
    assert of(events, ErrorEvent)[0].code == "iteration_limit"
    assert len(planned_tools(events)) == 3
    assert env.state().status == "failed"  # type: ignore[union-attr]


def test_tool_loop_without_native_tools_uses_a_json_action(env: Env) -> None:
    actions = [
        {"action": "tool", "tool_name": "list_traders", "tool_args": {}},
        {"action": "answer", "text": "No traders yet."},
    ]

    def json_only(request: ModelRequest) -> object:
        assert request.purpose == "act" and not request.tools  # asked for JSON, offered nothing
        return actions[request.index]

    # a backend without native function calling (as the embedded llama model)
    model = FunctionModel(json_only, native_tools=False)
    turn = TurnContext(
        key=KEY, input=UserMessage("traders?"), store=env.store, memory=env.memory, model=model,
        tools=env.tools, config=TOOL_LOOP,
    )  # fmt: skip
    events = run(turn)
    assert planned_tools(events) == ["list_traders"]
    assert events[-1].text == "No traders yet."
    schema = model.requests[0].schema
    assert schema is not None
    tool_names = {v["properties"].get("tool_name", {}).get("const") for v in schema["anyOf"]}
    assert set(env.tools.names()) <= tool_names  # one variant per tool: a grammar can't stray


@pytest.mark.real_model
def test_tool_loop_over_a_real_openai_compatible_server(env: Env) -> None:
    seed_desk(env.workspace)

    def tool_call(name: str, arguments: str) -> str:
        part = {
            "index": 0,
            "id": "call_1",
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        return chunk({"tool_calls": [part]})

    with ScriptedOpenAIServer() as server:
        server.enqueue(
            Reply(
                chunks=[
                    tool_call("list_traders", "{}"),
                    chunk(finish="tool_calls"),
                    usage_chunk(50, 5),
                ]
            )
        )
        server.enqueue(Reply.text("You have ", "no traders.", usage=(60, 4)))
        model = OpenAIModel("m", base_url=server.base_url, api_key=None)
        turn = TurnContext(
            key=KEY, input=UserMessage("traders?"), store=env.store, memory=env.memory, model=model,
            tools=env.tools, config=TOOL_LOOP,
        )  # fmt: skip
        events = run(turn)
        asyncio.run(model.aclose())
        bodies = [request.body for request in server.requests]
    assert planned_tools(events) == ["list_traders"]
    assert events[-1].text == "You have no traders."
    assert events[-1].usage.input_tokens == 110
    first = bodies[0]
    assert first["tool_choice"] == "auto"
    offered = {tool["function"]["name"]: tool["function"] for tool in first["tools"]}
    assert set(offered) == set(env.tools.names())
    assert offered["create_trader"]["parameters"]["required"] == ["name", "exchange_id", "model_id"]
    assert "[tool_result act_1]" in bodies[1]["messages"][-1]["content"]


def test_switching_strategy_discards_a_paused_plan(env: Env) -> None:
    run(
        env.turn(
            "rename",
            {"plan": [{"goal": "g", "steps": [step("q", "ask_user", instruction="Which?")]}]},
        )
    )
    assert env.state().status == "waiting_user"  # type: ignore[union-attr]
    turn = env.turn("Alpha", {"act": ["Noted: Alpha."]}, config=TOOL_LOOP)
    events = run(turn)
    assert purposes(turn) == ["act"]  # planned afresh under the new strategy, not resumed
    assert events[-1].text == "Noted: Alpha."


# -- classify ------------------------------------------------------------------------------------


def test_classify_can_mark_a_request_as_live_state(env: Env) -> None:
    env.memory.save_task_state(
        KEY.agent_id,
        KEY.conversation_id,
        TaskState(important_facts=("stale fact",)),
        expected_version=0,
    )
    seed_desk(env.workspace)
    script = {
        "classify": [{"intent": "live_state"}],
        "plan": [{"goal": "g", "steps": [step("r", "respond")]}],
        "respond": ["ok"],
    }
    turn = env.turn("how am I set up?", script, config=PlannerConfig(classify=True))
    events = run(turn)
    planning = of(events, PlanningEvent)[0]
    assert not planning.task_state_included and "get_exchange_configs" in planning.live_state
    plan_prompt = next(r for r in turn.model.requests if r.purpose == "plan").messages[-1].content  # type: ignore[attr-defined]
    assert "stale fact" not in plan_prompt and "binance" in plan_prompt


@pytest.mark.parametrize("reply", [{"intent": "maybe"}, "not json", {"intent": "other"}])
def test_classify_failure_or_other_keeps_the_keyword_decision(env: Env, reply: Any) -> None:
    script = {
        "classify": [reply],
        "plan": [{"goal": "g", "steps": [step("r", "respond")]}],
        "respond": ["ok"],
    }
    turn = env.turn("tell me a joke", script, config=PlannerConfig(classify=True))
    events = run(turn)
    assert of(events, PlanningEvent)[0].task_state_included
    assert events[-1].status == "completed"
    assert purposes(turn)[0] == "classify"


def test_classify_is_not_called_by_default(env: Env) -> None:
    turn = env.turn(
        "tell me a joke",
        {"plan": [{"goal": "g", "steps": [step("r", "respond")]}], "respond": ["ok"]},
    )
    run(turn)
    assert "classify" not in purposes(turn)


# -- stage timeouts -----------------------------------------------------------------------------


async def slow(request: ModelRequest) -> object:
    """Sleeps before each reply (stands for a local model on a busy machine): a little longer
    than a stage's unscaled timeout below, so the unscaled call always times out (its timer is
    due first, however loaded the machine), and far shorter than the scaled one (x100: 50 s,
    a margin no load eats)."""
    await asyncio.sleep(0.55)
    replies = {"plan": {"goal": "g", "steps": [step("r", "respond")]}, "respond": "ok"}
    return replies[request.purpose]


@pytest.mark.parametrize(("scale", "status"), [(1.0, "failed"), (100.0, "completed")])
def test_stage_timeout_scale(env: Env, scale: float, status: str) -> None:
    model = FunctionModel(slow)
    turn = TurnContext(
        key=KEY, input=UserMessage("hello"), store=env.store, memory=env.memory, model=model,
        tools=env.tools,
        config=PlannerConfig(stage_timeout_scale=scale),
        stage_timeouts={"plan": 0.5, "respond": 0.5},
    )  # fmt: skip
    events = run(turn)
    assert events[-1].status == status
    plan_call = turn.records[0]
    assert plan_call.purpose == "plan"
    assert plan_call.latency_ms > 0  # a timed-out call is traced with the time it took
    if status == "failed":
        assert plan_call.error == "timed out"
