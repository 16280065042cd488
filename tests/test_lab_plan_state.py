"""The plan a view shows, from events only: on every path the planner announces, the fold of a
turn's events is what the planner stored (the table's rows, the status, the pause)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agentkit.config import PlannerConfig
from agentkit.events import AgentEvent, AskUserEvent, ErrorEvent, PlanningEvent, ResultEvent
from agentkit.memory import ExecutionState
from lab.plan_state import PlanFold
from lab.plan_table import pending_request, plan_frame

from .test_planner import Env, env, run, seed_desk, step

__all__ = ["env"]  # the fixture, re-exported for pytest

NEXT_STEP = PlannerConfig(strategy="next_step")
TOOL_LOOP = PlannerConfig(strategy="tool_loop")


def shown(state: ExecutionState | None) -> dict[str, Any] | None:
    """Everything of *state* a plan view shows."""
    if state is None:
        return None
    approval = state.pending_approval
    return {
        "status": state.status,
        "goal": state.goal,
        "last_error": state.last_error,
        "current": state.current_step_id if state.is_active else "",
        "steps": [
            (s.id, s.type, s.status, s.title, s.tool_name, s.tool_args, s.result_summary, s.error)
            for s in state.steps
        ],
        "pending": pending_request(state),
        "approval": None
        if approval is None
        else (approval.approval_id, approval.tool_name, dict(approval.tool_args), approval.step_id),
        "table": plan_frame(state).to_dict(orient="records"),
    }


class Followed:
    """One conversation's turns driven through the planner, a fold following their events."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.fold = PlanFold(mask=env.tools.mask.text)

    def send(self, text: str, script: dict[str, list[Any]], **options: Any) -> list[AgentEvent]:
        """One turn; the fold must then show what is stored."""
        self.fold.begin(text)
        events = run(self.env.turn(text, script, **options))
        for event in events:
            self.fold.apply(event)
        assert shown(self.fold.state) == shown(self.env.state())
        return events


@pytest.fixture
def followed(env: Env) -> Followed:
    seed_desk(env.workspace)  # a model config (model-1) and an exchange account (ex-1)
    return Followed(env)


TRADER = {"name": "Gamma", "exchange_id": "ex-1", "model_id": "model-1"}


def test_a_plan_of_a_read_a_reasoning_step_and_the_answer(followed: Followed) -> None:
    script = {
        "plan": [
            {
                "goal": "overview",
                "steps": [
                    step("s1", "tool", tool_name="list_traders"),
                    step("s2", "reason", instruction="Think."),
                    step("s3", "respond", instruction="Say it."),
                ],
            }
        ],
        "replan": [{"action": "continue"}, {"action": "continue"}],
        "reason": ["Nothing to add."],
        "respond": ["No traders yet."],
    }
    followed.send("give me an overview", script)
    state = followed.fold.state
    assert state is not None and state.status == "completed"
    assert [s.status for s in state.steps] == ["done", "done", "done"]


def test_a_question_answered_then_consent_given_runs_the_call(followed: Followed) -> None:
    ask = {"plan": [{"goal": "a trader", "steps": [step("q1", "ask_user", instruction="Name?")]}]}
    followed.send("create a trader", ask)
    assert followed.fold.state is not None and followed.fold.state.status == "waiting_user"
    replaced = {
        "replan": [
            {
                "action": "replace_remaining",
                "steps": [
                    step("t1", "tool", tool_name="create_trader", tool_args=TRADER),
                    step("r1", "respond", instruction="Confirm."),
                ],
            }
        ]
    }
    events = followed.send("Gamma, on ex-1 with model-1", replaced)
    assert next(e for e in events if isinstance(e, AskUserEvent)).step_id == "t1"
    pending = followed.fold.state.pending_approval if followed.fold.state else None
    assert pending is not None and pending.tool_name == "create_trader"
    followed.send("yes", {"replan": [{"action": "continue"}], "respond": ["Gamma is ready."]})
    assert [t.name for t in followed.env.db.traders()] == ["Gamma"]
    assert followed.fold.state is not None and followed.fold.state.status == "completed"


@pytest.mark.parametrize("text", ["no", "never mind, show my traders"])
def test_a_consent_refused_or_withdrawn_runs_nothing(followed: Followed, text: str) -> None:
    plan = {"goal": "a trader", "steps": [step("t1", "tool", tool_name="create_trader")]}
    plan["steps"][0]["tool_args"] = TRADER
    followed.send("create trader Gamma on ex-1 with model-1", {"plan": [plan]})
    later = {
        "plan": [{"goal": "traders", "steps": [step("s1", "tool", tool_name="list_traders")]}],
        "replan": [{"action": "finish", "reason": "Listed."}],
        "respond": ["No traders."],
    }
    events = followed.send(text, later)
    assert followed.env.db.traders() == []
    new_request = any(isinstance(e, PlanningEvent) for e in events)
    assert new_request == (text != "no")


def test_a_failing_call_is_replanned_to_an_answer(followed: Followed) -> None:
    plan = {"goal": "a trader", "steps": [step("t1", "tool", tool_name="create_trader")]}
    plan["steps"][0]["tool_args"] = {**TRADER, "exchange_id": "ex-9"}  # no such account
    followed.send("create trader Gamma on ex-9 with model-1", {"plan": [plan]})
    finish = {"replan": [{"action": "finish", "reason": "No such account."}], "respond": ["No."]}
    followed.send("yes", finish)
    state = followed.fold.state
    assert state is not None and state.step("t1").status == "failed"
    assert state.steps[-1].type == "respond" and state.steps[-1].status == "done"


def test_status_while_a_question_waits_leaves_it_waiting(followed: Followed) -> None:
    ask = {"plan": [{"goal": "a trader", "steps": [step("q1", "ask_user", instruction="Name?")]}]}
    followed.send("create a trader", ask)
    followed.send("/status", {})
    assert followed.fold.state is not None and followed.fold.state.status == "waiting_user"


def test_a_turn_that_fails_fails_the_flow(followed: Followed) -> None:
    bad = {"goal": "x", "steps": [step("s1", "tool", tool_name="launch_rocket")]}
    events = followed.send("do it", {"plan": [bad, bad]})
    assert [e.code for e in events if isinstance(e, ErrorEvent)] == ["invalid_plan"]
    assert followed.fold.state is not None and followed.fold.state.status == "failed"


def test_next_step_batches_are_added_to_the_plan(followed: Followed) -> None:
    script = {
        "plan": [
            {"goal": "overview", "steps": [step("b1", "tool", tool_name="list_traders")]},
            {"steps": [step("b2", "tool", tool_name="get_model_configs"), step("b3", "respond")]},
        ],
        "respond": ["You have one model config and no traders."],
    }
    followed.send("give me an overview", script, config=NEXT_STEP)
    assert followed.fold.state is not None
    assert [s.id for s in followed.fold.state.steps] == ["b1", "b2", "b3"]


def calls(*names_args: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"tool_calls": [{"name": n, "arguments": a} for n, a in names_args]}


def test_the_tool_loops_steps_come_from_its_calls(followed: Followed) -> None:
    reads = {"act": [calls(("list_traders", {})), calls(("list_traders", {}))], "respond": ["No."]}
    followed.send("traders?", reads, config=TOOL_LOOP)
    write = {"act": [calls(("create_trader", TRADER))]}
    followed.send("create trader Gamma on ex-1 with model-1", write, config=TOOL_LOOP)
    assert followed.fold.state is not None and followed.fold.state.status == "waiting_confirmation"
    events = followed.send("yes", {"act": ["Gamma is ready."]}, config=TOOL_LOOP)
    assert isinstance(events[-1], ResultEvent) and events[-1].text == "Gamma is ready."
    assert [t.name for t in followed.env.db.traders()] == ["Gamma"]


def test_a_new_request_after_a_finished_flow_starts_a_fresh_plan(followed: Followed) -> None:
    first = {
        "plan": [{"goal": "one", "steps": [step("s1", "respond", instruction="Hi.")]}],
        "respond": ["Hi."],
    }
    followed.send("say hi", first)
    second = {
        "plan": [{"goal": "two", "steps": [step("t1", "tool", tool_name="list_traders")]}],
        "replan": [{"action": "continue"}],
    }
    followed.send("list my traders", second)
    state = followed.fold.state
    assert state is not None and state.goal == "two" and [s.id for s in state.steps] == ["t1"]


API_KEY = "AKEY-0123456789abcd"
SECRET_KEY = "SKEY-9876543210wxyz"


def test_keys_typed_in_an_answer_are_scrubbed_once_a_plan_uses_them(followed: Followed) -> None:
    ask = {"plan": [{"goal": "an account", "steps": [step("q1", "ask_user", instruction="Keys?")]}]}
    followed.send("connect my binance account main", ask)
    account = {"exchange": "binance", "account_name": "main"}
    connect = step("t1", "tool", tool_name="create_exchange_config")
    connect["tool_args"] = {**account, "api_key": API_KEY, "secret_key": SECRET_KEY}
    events = followed.send(
        f"key {API_KEY} secret {SECRET_KEY}.",
        {"replan": [{"action": "replace_remaining", "steps": [connect]}]},
    )
    shown_anywhere = json.dumps([e.to_json_dict() for e in events])
    assert API_KEY not in shown_anywhere  # the events show the keys masked ...
    state = followed.fold.state
    assert state is not None and state.status == "waiting_confirmation"
    held = json.dumps(state.model_dump(mode="json"))
    assert "****abcd" in held and "****wxyz" in held  # ... and so does the fold, everywhere
    assert API_KEY not in held and SECRET_KEY not in held
    done = {"replan": [{"action": "finish", "reason": f"Connected with {API_KEY}."}]}
    followed.send("yes", {**done, "respond": [f"Connected (key {API_KEY})."]})
    state = followed.fold.state
    assert state is not None and state.status == "completed"
    held = json.dumps(state.model_dump(mode="json"))
    assert API_KEY not in held and SECRET_KEY not in held


def test_a_key_known_to_the_fold_is_scrubbed_from_later_answers_too(followed: Followed) -> None:
    connect = step("t1", "tool", tool_name="create_exchange_config")
    connect["tool_args"] = {
        "exchange": "binance",
        "account_name": "main",
        "api_key": API_KEY,
        "secret_key": SECRET_KEY,
    }
    plan = {"goal": "an account", "steps": [step("q1", "ask_user", instruction="Keys?")]}
    followed.send("connect my binance account main", {"plan": [plan]})
    check = step("q2", "ask_user", instruction="Is that the key of the main account?")
    replan = {"action": "replace_remaining", "steps": [check, connect]}
    followed.send(f"key {API_KEY} secret {SECRET_KEY}", {"replan": [replan]})
    followed.send(f"yes, {API_KEY} is main's", {"replan": [{"action": "continue"}]})
    state = followed.fold.state
    assert state is not None and state.status == "waiting_confirmation"
    assert state.step("q2").result_summary == "yes, ****abcd is main's"
