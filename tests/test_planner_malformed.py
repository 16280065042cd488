"""Malformed plan/replan replies: each is repaired or ends in a clear error; never an exception."""
# ruff: noqa: E501  (the malformed replies are data, kept one per line)

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agentkit import Agent
from agentkit.events import ErrorEvent, PlanEvent, ReplanEvent
from agentkit.memory import MemoryRepository
from agentkit.models.scripted import ScriptedModel
from agentkit.planning import extract_json
from agentkit.planning.plan import PlanFormatError
from agentkit.store.sqlite_kv import SqliteConfigStore

GOOD = {"goal": "g", "steps": [{"id": "r", "type": "respond", "title": "answer"}]}
GOOD_TEXT = json.dumps(GOOD)
TOOL = {"id": "t", "type": "tool", "title": "list", "tool_name": "list_traders", "tool_args": {}}

# Replies that the lenient extraction plus strict validation accept as they are.
REPAIRED_LOCALLY: dict[str, str] = {
    "json_fence": f"```json\n{GOOD_TEXT}\n```",
    "bare_fence": f"```\n{GOOD_TEXT}\n```",
    "prose_around": f"Sure! Here is the plan:\n{GOOD_TEXT}\nHope it helps.",
    "trailing_commas": '{"goal": "g", "steps": [{"id": "r", "type": "respond", "title": "a",},],}',
    "fence_and_trailing_comma": '```json\n{"goal": "g", "steps": [{"id": "r", "type": "respond", "title": "a"},]}\n```',
    "null_optionals": '{"goal": "g", "steps": [{"id": "r", "type": "respond", "title": "a", "tool_name": null, "tool_args": null}]}',
    "missing_goal": '{"steps": [{"id": "r", "type": "respond"}]}',
    "extra_keys": '{"goal": "g", "thoughts": "x", "steps": [{"id": "r", "type": "respond", "status": "new"}]}',
    "leading_whitespace": f"\n\n   {GOOD_TEXT}   \n",
}

# Replies that cannot be used; the repeated bad reply fails the repair round too.
INVALID: dict[str, Any] = {
    "empty": "",
    "prose_only": "I will create a trader for you.",
    "truncated": '{"goal": "g", "steps": [{"id": "r", "type": "resp',
    "truncated_in_fence": '```json\n{"goal": "g", "steps": [',
    "non_object_list": json.dumps([GOOD]),
    "non_object_string": '"a plan"',
    "non_object_number": "42",
    "null": "null",
    "steps_not_list": '{"goal": "g", "steps": "respond"}',
    "steps_empty": '{"goal": "g", "steps": []}',
    "steps_missing": '{"goal": "g"}',
    "step_not_object": '{"goal": "g", "steps": ["respond"]}',
    "unknown_step_type": '{"goal": "g", "steps": [{"id": "x", "type": "think", "title": "t"}]}',
    "step_id_missing": '{"goal": "g", "steps": [{"type": "respond", "title": "t"}]}',
    "step_id_number": '{"goal": "g", "steps": [{"id": 1, "type": "respond", "title": "t"}]}',
    "goal_wrong_type": '{"goal": ["g"], "steps": [{"id": "r", "type": "respond"}]}',
    "confirmation_as_string": '{"goal": "g", "steps": [{"id": "r", "type": "respond", "requires_confirmation": "no"}]}',
    "tool_args_list": '{"goal": "g", "steps": [{"id": "t", "type": "tool", "tool_name": "list_traders", "tool_args": []}]}',
    "tool_without_name": '{"goal": "g", "steps": [{"id": "t", "type": "tool", "title": "t"}]}',
    "hallucinated_tool": '{"goal": "g", "steps": [{"id": "t", "type": "tool", "tool_name": "place_order", "tool_args": {}}]}',
    "invalid_tool_args": '{"goal": "g", "steps": [{"id": "t", "type": "tool", "tool_name": "create_trader", "tool_args": {"name": 5}}]}',
    "unexpected_tool_arg": '{"goal": "g", "steps": [{"id": "t", "type": "tool", "tool_name": "list_traders", "tool_args": {"limit": 3}}]}',
    "ask_user_without_question": '{"goal": "g", "steps": [{"id": "a", "type": "ask_user"}]}',
    "too_many_steps": json.dumps(
        {"goal": "g", "steps": [{**TOOL, "id": f"t{i}"} for i in range(9)]}
    ),
    "duplicate_ids": json.dumps({"goal": "g", "steps": [TOOL, TOOL]}),
    "huge_string": json.dumps(
        {"goal": "g", "steps": [{"id": "r", "type": "respond", "instruction": "x" * 10_000}]}
    ),
    "oversize_reply": "{" + " " * 70_000 + "}",
    "deep_nesting": "[" * 5000 + "]" * 5000,
    "two_objects": '{"goal": "a"} {"goal": "b"}',
    "python_literal": "{'goal': 'g', 'steps': [{'id': 'r', 'type': 'respond'}]}",
}


def _agent(data_dir: Path, script: dict[str, list[Any]]) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(script)
    return Agent.open("desk-001", data_dir=data_dir, model=model), model


def _state(data_dir: Path, conversation_id: str) -> Any:
    with SqliteConfigStore(data_dir / "agentkit.db") as kv:
        loaded = MemoryRepository(kv).load_execution_state("desk-001", conversation_id)
    assert loaded is not None  # it validated on load: always a valid ExecutionState
    return loaded.value


def test_there_are_at_least_thirty_malformed_cases() -> None:
    assert len(REPAIRED_LOCALLY) + len(INVALID) >= 30


@pytest.mark.parametrize("reply", REPAIRED_LOCALLY.values(), ids=REPAIRED_LOCALLY.keys())
def test_wrapping_is_repaired_without_asking_again(data_dir: Path, reply: str) -> None:
    agent, model = _agent(data_dir, {"plan": [reply], "respond": ["answer"]})
    with agent:
        result = agent.send("hello")
    assert result.result.status == "completed" and result.text == "answer"
    assert [r.purpose for r in model.requests].count("plan") == 1
    assert [e for e in result.events if isinstance(e, ErrorEvent)] == []
    assert _state(data_dir, result.conversation_id).status == "completed"


@pytest.mark.parametrize("reply", INVALID.values(), ids=INVALID.keys())
def test_invalid_plan_fails_clearly_after_one_repair_round(data_dir: Path, reply: str) -> None:
    agent, model = _agent(data_dir, {"plan": [reply]})
    with agent:
        result = agent.send("hello")  # no exception escapes send_message
    errors = [e for e in result.events if isinstance(e, ErrorEvent)]
    assert len(errors) == 1 and errors[0].code == "invalid_plan"
    assert "repair" in errors[0].message
    assert result.result.status == "failed"
    plan_calls = [r for r in model.requests if r.purpose == "plan"]
    assert len(plan_calls) == 2  # the original and exactly one repair
    assert "could not be used" in plan_calls[1].messages[-1].content
    state = _state(data_dir, result.conversation_id)
    assert state.status == "failed" and state.last_error
    assert agent.get_conversation(result.conversation_id).meta.status == "failed"


@pytest.mark.parametrize("reply", list(INVALID.values())[:8], ids=list(INVALID.keys())[:8])
def test_the_repair_round_can_fix_a_plan(data_dir: Path, reply: str) -> None:
    agent, _ = _agent(data_dir, {"plan": [reply, GOOD_TEXT], "respond": ["fixed"]})
    with agent:
        result = agent.send("hello")
    plans = [e for e in result.events if isinstance(e, PlanEvent)]
    assert plans and plans[0].repaired and result.text == "fixed"


REPLANS: dict[str, str] = {
    "not_json": "continue please",
    "unknown_action": '{"action": "restart"}',
    "replace_without_steps": '{"action": "replace_remaining"}',
    "ask_without_question": '{"action": "ask_user"}',
    "hallucinated_tool": '{"action": "replace_remaining", "steps": [{"id": "n", "type": "tool", "tool_name": "nope"}]}',
    "reused_id": '{"action": "replace_remaining", "steps": [{"id": "t", "type": "respond"}]}',
    "list": "[]",
}


@pytest.mark.parametrize("reply", REPLANS.values(), ids=REPLANS.keys())
def test_invalid_replan_is_taken_as_continue(data_dir: Path, reply: str) -> None:
    plan = {"goal": "g", "steps": [TOOL, {"id": "r", "type": "respond", "title": "a"}]}
    agent, _ = _agent(data_dir, {"plan": [plan], "replan": [reply], "respond": ["done"]})
    with agent:
        result = agent.send("list my traders")
    replans = [e for e in result.events if isinstance(e, ReplanEvent)]
    assert replans[0].action == "continue" and "invalid" in replans[0].note
    assert result.text == "done" and result.result.status == "completed"


def test_a_missing_script_fails_clearly(data_dir: Path) -> None:
    agent, _ = _agent(data_dir, {"respond": ["x"]})  # no "plan" replies: the model errors
    with agent:
        result = agent.send("hello")
    assert result.result.status == "failed"
    assert [e.code for e in result.events if isinstance(e, ErrorEvent)] == ["invalid_plan"]


@pytest.mark.parametrize(
    "text", ["```json\n{}\n```", '{"a": 1,}', 'x {"a": {"b": 2}} y', "  [1, 2]  "]
)
def test_extract_json_unwraps(text: str) -> None:
    assert extract_json(text) is not None


@pytest.mark.parametrize("text", ["", "   ", "no json", '{"a": ', "{" * 3])
def test_extract_json_refuses(text: str) -> None:
    with pytest.raises(PlanFormatError):
        extract_json(text)
