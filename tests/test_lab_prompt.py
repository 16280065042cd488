"""Prompt lab: traces of a planner turn, template value recovery, replay, overrides, widgets."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from string import Template

import pytest
from agentkit import Agent, FunctionModel, InvalidIdError, ModelRequest, ScriptedModel
from agentkit.calls.records import CallRecord
from agentkit.planning import replay
from agentkit.planning.prompts import load_prompt, render_prompt
from agentkit.planning.replay import (
    PromptTemplateError,
    TraceError,
    TraceNotFoundError,
    check_template,
    replay_turn,
    save_prompt_override,
    template_values,
)
from agentkit.store import ConversationKey
from agentkit.tools import agent_tools
from lab import PromptLab
from lab.prompt_view import calls_frame, messages_text, plan_lines, plans_side_by_side

RECORDED_PLAN = {
    "goal": "show the user's traders",
    "steps": [
        {"id": "s1", "type": "tool", "title": "List traders", "tool_name": "list_traders",
         "tool_args": {}},
        {"id": "s2", "type": "respond", "title": "Answer", "instruction": "Say which exist."},
    ],
}  # fmt: skip
NEW_PLAN = {
    "goal": "traders",
    "steps": [{"id": "only", "type": "respond", "title": "Answer", "instruction": "say none"}],
}
EDIT = (
    "Make a short plan for the user's request.",
    "Make the SHORTEST plan; one step if possible.",
)


def run(coroutine):
    return asyncio.run(coroutine)


@pytest.fixture
def turn(data_dir: Path):
    """A recorded planner turn of desk-001: plan, replan, respond."""
    script = {
        "plan": [RECORDED_PLAN],
        "replan": [{"action": "continue", "reason": "the list is enough"}],
        "respond": ["You have no traders yet."],
    }
    with Agent.open("desk-001", data_dir=data_dir, model=ScriptedModel(script)) as recorder:
        result = recorder.send("list my traders")
    assert result.result.status == "completed"
    agent = Agent.open("desk-001", data_dir=data_dir, model=ScriptedModel({"plan": [NEW_PLAN]}))
    yield agent, result.conversation_id, result.session.message_id
    agent.close()


def folder_of(agent: Agent, conversation_id: str) -> Path:
    return agent.folder.path / "conversations" / conversation_id


def load_call_records(agent: Agent, conversation_id: str, message_id: str) -> list[CallRecord]:
    return replay.load_call_records(
        agent.runtime.store, ConversationKey(agent.id, conversation_id), message_id
    )


# -- traces -----------------------------------------------------------------------------------


def test_a_turns_calls_are_loaded_in_order_with_their_schema(turn) -> None:
    agent, cid, mid = turn
    records = load_call_records(agent, cid, mid)
    assert [r.purpose for r in records] == ["plan", "replan", "respond"]
    plan = records[0]
    assert plan.schema_ is not None and plan.schema_["type"] == "object"
    assert plan.parsed == RECORDED_PLAN
    assert [m["role"] for m in plan.messages] == ["system", "user"]
    assert "list my traders" in plan.messages[1]["content"]
    frame = calls_frame(records)
    assert list(frame["purpose"]) == ["plan", "replan", "respond"]
    assert frame.loc[2, "reply"] == "You have no traders yet."


def test_a_message_without_calls_jsonl_is_a_clear_error(turn) -> None:
    agent, cid, _ = turn
    with pytest.raises(TraceNotFoundError, match=r"no model calls recorded for turn msg-nothere"):
        load_call_records(agent, cid, "msg-nothere")
    with pytest.raises(TraceNotFoundError):
        PromptLab(agent, cid, "msg-nothere")
    with pytest.raises(InvalidIdError):
        load_call_records(agent, cid, "../escape")


def test_a_malformed_trace_line_is_named(turn) -> None:
    agent, cid, mid = turn
    assert agent.call_records(cid, mid)[0].purpose == "plan"  # readable before the damage
    calls = folder_of(agent, cid) / mid / "calls.jsonl"
    lines = calls.read_text(encoding="utf-8").splitlines()
    calls.write_text("\n".join([lines[0], '{"purpose": "plan"', *lines[1:]]), encoding="utf-8")
    with pytest.raises(TraceError, match="line 2 is not a call record"):
        load_call_records(agent, cid, mid)


# -- templates --------------------------------------------------------------------------------


def test_template_values_invert_a_rendering_exactly() -> None:
    text = "Goal: $goal\nCost: $$5 ${goal}!\n\n$notes\n"
    rendered = Template(text).safe_substitute(goal="ship it", notes="a\n\nb $x").strip()
    assert template_values(text, rendered) == {"goal": "ship it", "notes": "a\n\nb $x"}
    assert template_values("Other: $goal", rendered) is None
    assert template_values(text, rendered.replace("Cost", "Price")) is None


def test_the_recorded_plan_prompt_yields_the_values_the_runtime_used(turn) -> None:
    agent, cid, mid = turn
    plan = load_call_records(agent, cid, mid)[0]
    values = template_values(load_prompt("plan").template, plan.messages[1]["content"])
    assert values is not None
    assert values["request"] == "list my traders" and values["max_steps"] == "8"
    assert "list_traders" in values["tools"]
    assert render_prompt("plan", None, **values) == plan.messages[1]["content"]


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("plan", "Plan $request, $bogus, ${other}", r"unknown placeholder \$bogus, \$other"),
        ("respond", "Costs $ 5", "line 1, column 7 starts no placeholder"),
        ("plan", "two\nlines $", "line 2, column 7"),
        ("nonsense", "hello", "is not a planner prompt"),
    ],
)  # fmt: skip
def test_a_bad_template_is_refused_with_what_is_wrong(name: str, text: str, message: str) -> None:
    with pytest.raises(PromptTemplateError, match=message):
        check_template(name, text)


# -- replay -----------------------------------------------------------------------------------


def test_the_replay_sends_the_same_inputs_in_the_edited_template(turn) -> None:
    agent, cid, mid = turn
    records = load_call_records(agent, cid, mid)
    edited = load_prompt("plan").template.replace(*EDIT)
    model = ScriptedModel({"plan": [NEW_PLAN], "replan": [{"action": "finish"}], "respond": ["ok"]})
    with agent_tools(agent.folder) as tools:
        replayed = run(
            replay_turn(records, model, templates={"plan": edited}, agent_dir=agent.folder.path,
                        tools=tools)
        )  # fmt: skip
    assert [(c.purpose, c.template) for c in replayed] == [
        ("plan", "plan"),
        ("replan", "replan"),
        ("respond", "respond"),
    ]
    plan_request = model.requests[0]
    recorded = records[0].messages
    assert plan_request.messages[0].content == recorded[0]["content"]  # the system prompt
    values = template_values(load_prompt("plan").template, recorded[1]["content"])
    assert plan_request.messages[1].content == Template(edited).safe_substitute(values).strip()
    assert EDIT[1] in plan_request.messages[1].content
    assert EDIT[0] not in plan_request.messages[1].content
    # the unedited prompts are re-rendered to exactly what the turn sent
    for request, record in zip(model.requests[1:], records[1:], strict=True):
        assert [m.model_dump() for m in request.messages] == record.messages
    plan = replayed[0]
    assert plan.old_parsed == RECORDED_PLAN and plan.new_parsed == NEW_PLAN
    assert plan.problem == "" and not plan.repaired and plan.error == ""
    assert replayed[2].new_parsed == "ok" and replayed[2].old_raw == "You have no traders yet."


def test_an_invalid_replayed_plan_gets_one_repair_round(turn) -> None:
    agent, cid, mid = turn
    records = load_call_records(agent, cid, mid)
    bad = {"goal": "x", "steps": [{"id": "a", "type": "tool", "tool_name": "launch_rocket"}]}
    model = ScriptedModel({"plan": [bad, NEW_PLAN]})
    with agent_tools(agent.folder) as tools:
        (plan,) = run(replay_turn(records, model, purposes=["plan"], tools=tools))
    assert plan.repaired and plan.problem == "" and plan.new_parsed == NEW_PLAN
    repair = model.requests[1].messages
    assert [m.role for m in repair] == ["system", "user", "assistant", "user"]
    assert "unknown tool 'launch_rocket'" in repair[-1].content
    # still invalid after the repair: the problem is reported, nothing raised
    model = ScriptedModel({"plan": [bad]})
    with agent_tools(agent.folder) as tools:
        (plan,) = run(replay_turn(records, model, purposes=["plan"], tools=tools))
    assert plan.repaired and "unknown tool" in plan.problem and len(model.requests) == 2


def test_a_model_failure_is_recorded_not_raised(turn) -> None:
    agent, cid, mid = turn
    records = load_call_records(agent, cid, mid)
    (plan,) = run(replay_turn(records, ScriptedModel({"respond": ["x"]}), purposes=["plan"]))
    assert "plan" in plan.error and plan.new_parsed is None


async def never_answers(request: ModelRequest) -> str:
    """A model function that never returns (the replay's stage timeout must end the call)."""
    await asyncio.Event().wait()
    raise AssertionError("never reached")


def test_a_call_over_its_stage_timeout_is_recorded_as_timed_out(turn) -> None:
    agent, cid, mid = turn
    records = load_call_records(agent, cid, mid)
    stuck = FunctionModel(never_answers)
    (plan,) = run(replay_turn(records, stuck, purposes=["plan"], timeouts={"plan": 0.05}))
    assert plan.error == "timed out after 0.05 s (the plan stage's limit)"
    assert plan.new_parsed is None and not plan.repaired
    assert [request.purpose for request in stuck.requests] == ["plan"]  # the call was made


def test_a_prompt_no_template_reproduces_is_sent_as_recorded(turn) -> None:
    agent, cid, mid = turn
    records = load_call_records(agent, cid, mid)
    messages = [dict(m) for m in records[0].messages]
    messages[1]["content"] = "A prompt written by some older template: list my traders"
    altered = records[0].model_copy(update={"messages": messages})
    model = ScriptedModel({"plan": [NEW_PLAN]})
    edited = load_prompt("plan").template.replace(*EDIT)
    (plan,) = run(replay_turn([altered], model, templates={"plan": edited}))
    assert plan.template == ""
    assert model.requests[0].messages[1].content == messages[1]["content"]


def test_an_override_made_after_the_turn_still_finds_the_recorded_template(turn) -> None:
    agent, cid, mid = turn
    save_prompt_override(agent.folder.path, "plan", "New words.\n$request\n$tools")
    records = load_call_records(agent, cid, mid)
    model = ScriptedModel({"plan": [NEW_PLAN]})
    (plan,) = run(replay_turn(records, model, agent_dir=agent.folder.path, purposes=["plan"]))
    # the package default reproduced the recording; unedited, it is re-sent exactly
    assert plan.template == "plan"
    assert model.requests[0].messages[1].content == records[0].messages[1]["content"]


def test_an_unknown_placeholder_stops_the_replay_before_any_model_call(turn) -> None:
    agent, cid, mid = turn
    records = load_call_records(agent, cid, mid)
    model = ScriptedModel({"plan": [NEW_PLAN]})
    with pytest.raises(PromptTemplateError, match="unknown placeholder \\$budget"):
        run(replay_turn(records, model, templates={"plan": "Plan $request within $budget"}))
    assert model.requests == []


# -- overrides --------------------------------------------------------------------------------


def test_a_saved_override_is_written_atomically_and_used_by_the_next_turn(turn) -> None:
    agent, cid, _ = turn
    edited = load_prompt("plan").template.replace(*EDIT)
    path = save_prompt_override(agent.folder.path, "plan", edited)
    assert path == agent.folder.path / "prompts" / "plan.md"
    assert path.read_text(encoding="utf-8") == edited
    assert sorted(p.name for p in path.parent.iterdir()) == ["plan.md"]  # no temp file left
    # a bad edit is refused and the saved override is untouched
    with pytest.raises(PromptTemplateError):
        save_prompt_override(agent.folder.path, "plan", edited + "\n$budget")
    assert path.read_text(encoding="utf-8") == edited
    model = ScriptedModel({"plan": [NEW_PLAN], "respond": ["none"]})
    with Agent.open("desk-001", data_dir=agent.folder.path.parents[1], model=model) as again:
        assert again.send("what can you do?", cid).result.status == "completed"
    (plan_request,) = [r for r in model.requests if r.purpose == "plan"]
    assert EDIT[1] in plan_request.messages[-1].content


# -- the widget -------------------------------------------------------------------------------


def test_the_lab_shows_the_calls_and_compares_plans_on_click(turn) -> None:
    agent, cid, mid = turn
    lab = PromptLab(agent, cid, mid, purposes=["plan"])
    try:
        assert "list_traders" in lab.calls.value and lab.call.value == 0
        assert lab.call_messages.value.startswith("── system ──")
        assert "── reply ──" in lab.call_messages.value
        lab.call.value = 2
        assert "You have no traders yet." in lab.call_messages.value
        assert lab.template_name.value == "plan" and "package default" in lab.template_source.value
        lab.editor.value = lab.editor.value.replace(*EDIT)
        lab.rerun_button.click()
        assert "replayed 1 calls with scripted:inline" in lab.status.value
        assert list(lab.plans.columns) == ["recorded plan", "replayed plan"]
        assert lab.plans["recorded plan"].tolist() == plan_lines(RECORDED_PLAN)
        assert lab.plans["replayed plan"].tolist()[:2] == plan_lines(NEW_PLAN)
        assert "s1 [tool] list_traders({}) List traders" in lab.plan_table.value
        assert lab.old_plan == RECORDED_PLAN and lab.new_plan == NEW_PLAN
        sent = agent.model.requests[0].messages[-1].content  # type: ignore[union-attr]
        assert EDIT[1] in sent
    finally:
        lab.close()


def test_the_lab_refuses_a_bad_template_and_saves_a_good_one(turn) -> None:
    agent, cid, mid = turn
    lab = PromptLab(agent, cid, mid)
    try:
        lab.template_name.value = "respond"
        assert lab.editor.value == load_prompt("respond").template
        lab.editor.value += "\nBudget: $budget"
        lab.rerun_button.click()
        assert "unknown placeholder $budget" in lab.status.value.replace("&#x27;", "'")
        lab.save_button.click()
        assert "unknown placeholder" in lab.status.value
        assert not (agent.folder.path / "prompts" / "respond.md").exists()
        assert agent.model.requests == []  # type: ignore[union-attr]
        lab.editor.value = lab.editor.value.replace("\nBudget: $budget", "\nBe brief.")
        lab.save_button.click()
        saved = agent.folder.path / "prompts" / "respond.md"
        assert saved.read_text(encoding="utf-8").rstrip("\n").endswith("Be brief.")
        assert "agent override" in lab.template_source.value and str(saved) in lab.status.value
    finally:
        lab.close()


def test_the_lab_can_switch_to_another_model_spec(turn, tmp_path: Path) -> None:
    agent, cid, mid = turn
    script = tmp_path / "other.json"
    script.write_text(json.dumps({"plan": [RECORDED_PLAN]}), encoding="utf-8")
    lab = PromptLab(agent, cid, mid, purposes=["plan"])
    try:
        lab.model.value = f"scripted:{script}"
        lab.rerun_button.click()
        assert f"scripted:{script}" in lab.status.value
        assert lab.new_plan == RECORDED_PLAN
        assert lab.plans["recorded plan"].tolist() == lab.plans["replayed plan"].tolist()
        assert agent.model.requests == []  # type: ignore[union-attr]
    finally:
        lab.close()


def test_plans_side_by_side_pad_and_show_non_plans() -> None:
    frame = plans_side_by_side(RECORDED_PLAN, "no json here")
    assert frame["replayed plan"].tolist() == ['(no plan: "no json here")', "", ""]
    assert messages_text([{"role": "user", "content": "hi"}]) == "── user ──\nhi"
