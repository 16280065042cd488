"""The plan view: the table and the pause as plain values, and the widget's answer / consent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agentkit import Agent, ExecutionState, ScriptedModel
from agentkit.memory import Observation, PlanStep, Waiting
from agentkit_desk import open_desk
from lab import ChatPanel, PlanView
from lab.plan_table import PLAN_COLUMNS, pending_request, plan_frame

API_KEY = "AKEY-0123456789abcd"
SECRET_KEY = "SKEY-9876543210wxyz"


def consent_state() -> ExecutionState:
    """A flow paused for consent to a tool call that carries two secrets."""
    return ExecutionState(
        conversation_id="conv-x",
        goal="connect binance",
        status="waiting_confirmation",
        steps=(
            PlanStep(
                id="s1",
                type="ask_user",
                title="Ask for the keys",
                status="done",
                result_summary=f"key {API_KEY} secret {SECRET_KEY}",
            ),
            PlanStep(
                id="s2",
                type="tool",
                title="Connect",
                tool_name="create_exchange_config",
                tool_args={
                    "exchange": "binance",
                    "account_name": "main",
                    "api_key": API_KEY,
                    "secret_key": SECRET_KEY,
                },
                status="running",
            ),
            PlanStep(id="s3", type="respond", title="Confirm"),
        ),
        current_step_id="s2",
        observations=(
            Observation(step_id="s1", kind="user_reply", content=f"the key is {API_KEY}"),
        ),
        waiting=Waiting(question=f"Run create_exchange_config with {API_KEY}? (yes / no)"),
    )


def test_the_table_has_one_row_per_step_and_masks_every_secret() -> None:
    frame = plan_frame(consent_state())
    assert list(frame.columns) == list(PLAN_COLUMNS)
    assert list(frame["status"]) == ["done", "running", "pending"]
    assert list(frame["tool"]) == ["", "create_exchange_config", ""]
    assert frame["step"][1] == "▶ s2"  # the current step
    text = frame.to_string()
    for secret in (API_KEY, SECRET_KEY):
        assert secret not in text
    assert "****abcd" in frame["arguments"][1] and "binance" in frame["arguments"][1]
    assert "****abcd" in frame["observation"][0]  # the answer that quoted the key, scrubbed


def test_a_pause_is_read_from_the_stored_status() -> None:
    state = consent_state()
    pending = pending_request(state)
    assert pending is not None and pending.kind == "confirmation" and pending.step_id == "s2"
    assert API_KEY not in pending.text and "****abcd" in pending.text
    question = state.resume().pause(Waiting(question="Which exchange?"))
    asked = pending_request(question)
    assert asked is not None and asked.kind == "question" and asked.text == "Which exchange?"
    assert pending_request(state.complete("done")) is None
    assert pending_request(None) is None


def test_no_state_is_an_empty_table_with_its_columns() -> None:
    frame = plan_frame(None)
    assert frame.empty and list(frame.columns) == list(PLAN_COLUMNS)


# -- the widget against the planner ------------------------------------------------------------


def step(id: str, type: str, **fields: Any) -> dict[str, Any]:
    return {"id": id, "type": type, "title": fields.pop("title", id), **fields}


CONNECT = {
    "plan": [
        {
            "goal": "connect a binance account",
            "steps": [step("s1", "ask_user", instruction="What are your API key and secret?")],
        }
    ],
    "replan": [
        {
            "action": "replace_remaining",
            "steps": [
                step(
                    "s2",
                    "tool",
                    title="Connect the account",
                    tool_name="create_exchange_config",
                    tool_args={
                        "exchange": "binance",
                        "account_name": "main",
                        "api_key": API_KEY,
                        "secret_key": SECRET_KEY,
                    },
                ),
                step("s3", "respond", instruction="Confirm."),
            ],
        },
        {"action": "continue"},
    ],
    "respond": ["Your binance account is connected."],
}


@pytest.fixture
def desk(data_dir: Path) -> Iterator[tuple[Agent, ScriptedModel]]:
    model = ScriptedModel(CONNECT)
    with Agent.open("desk-001", data_dir=data_dir, model=model) as agent:
        yield agent, model


def exchanges(data_dir: Path) -> list[str]:
    with open_desk(data_dir / "agents" / "desk-001" / "workspace") as db:
        return [config.account_name for config in db.exchange_configs()]


def test_answer_then_approve_runs_the_tool_and_never_shows_a_secret(
    desk: tuple[Agent, ScriptedModel], data_dir: Path
) -> None:
    agent, _ = desk
    conversation = agent.send("connect my binance account main").conversation_id
    view = PlanView(agent, conversation)
    assert view.pending is not None and view.pending.kind == "question"
    assert view.pending_box.children == (view.question, view.answer_row)
    assert "What are your API key and secret?" in view.question.value

    view.answer_box.value = f"key {API_KEY} secret {SECRET_KEY}"
    view.answer_button.click()
    assert view.turn is not None
    view.turn.result(timeout=60)
    assert view.pending is not None and view.pending.kind == "confirmation"
    assert view.pending_box.children == (view.question, view.consent_row, view.form_box)
    shown = view.table.value + view.question.value + view.reply.value + view.summary.value
    assert "create_exchange_config" in shown and "****abcd" in shown
    assert API_KEY not in shown and SECRET_KEY not in shown
    assert exchanges(data_dir) == []  # not without consent

    view.approve_button.click()
    view.turn.result(timeout=60)
    assert exchanges(data_dir) == ["main"]
    assert view.pending is None and view.pending_box.children == ()
    assert view.state is not None and view.state.status == "completed"
    assert view.table.value.count(">done<") == 3
    assert "Your binance account is connected." in view.reply.value
    history = [m.content for m in agent.load_conversation_history(conversation)]
    assert history[-2:] == ["yes", "Your binance account is connected."]


def test_reject_sends_no_and_nothing_is_run(
    desk: tuple[Agent, ScriptedModel], data_dir: Path
) -> None:
    agent, _ = desk
    conversation = agent.send("connect my binance account main").conversation_id
    agent.send(f"key {API_KEY} secret {SECRET_KEY}", conversation)
    view = PlanView(agent, conversation)
    assert view.pending is not None and view.pending.kind == "confirmation"
    view.reject_button.click()
    assert view.turn is not None
    view.turn.result(timeout=60)
    assert exchanges(data_dir) == []
    assert view.pending is None
    assert [m.content for m in agent.load_conversation_history(conversation)][-2] == "no"
    assert "not run" in view.reply.value


def test_an_empty_answer_is_refused(desk: tuple[Agent, ScriptedModel]) -> None:
    agent, model = desk
    conversation = agent.send("connect my binance account main").conversation_id
    view = PlanView(agent, conversation)
    calls = len(model.requests)
    view.answer_box.value = "  "
    view.answer_button.click()
    assert view.turn is None
    assert "Type an answer first." in view.notice.value
    assert len(model.requests) == calls
    assert len(agent.load_conversation_history(conversation)) == 2


def test_a_stale_consent_button_sends_nothing(desk: tuple[Agent, ScriptedModel]) -> None:
    agent, model = desk
    conversation = agent.send("connect my binance account main").conversation_id
    agent.send(f"key {API_KEY} secret {SECRET_KEY}", conversation)
    view = PlanView(agent, conversation)  # shows the consent request
    assert view.pending is not None and view.pending.kind == "confirmation"
    agent.send("no", conversation)  # answered elsewhere (another tab, the CLI)
    before = len(agent.load_conversation_history(conversation))
    calls = len(model.requests)
    assert view.approve() is None
    assert "Nothing is waiting for your consent any more" in view.notice.value
    assert len(agent.load_conversation_history(conversation)) == before
    assert len(model.requests) == calls
    assert view.pending is None  # and the view now shows the real state


def test_in_a_chat_panel_the_answer_goes_through_the_chat(
    desk: tuple[Agent, ScriptedModel],
) -> None:
    agent, _ = desk
    panel = ChatPanel(agent)
    assert panel.plan_view is not None
    first = panel.submit("connect my binance account main")
    assert first is not None
    first.result(timeout=60)
    view = panel.plan_view
    assert view.pending is not None and view.pending.kind == "question"
    answered = view.answer(f"key {API_KEY} secret {SECRET_KEY}")
    assert answered is not None
    answered.result(timeout=60)
    consent = panel.transcript.value.split("To continue I need to run")[1]
    assert "create_exchange_config" in consent and "****abcd" in consent
    assert API_KEY not in consent
    assert view.pending is not None and view.pending.kind == "confirmation"


def test_an_unknown_conversation_shows_an_error_not_a_table(data_dir: Path) -> None:
    with Agent.open("desk-001", data_dir=data_dir) as agent:
        view = PlanView(agent, "conv-nosuchthing")
    assert "conv-nosuchthing" in view.notice.value
    assert view.state is None and "No plan steps yet" in view.table.value
