"""The TaskState editor: form functions from the schema, and the widget's versioned save."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from agentkit import Agent, TaskState
from agentkit.memory import DecisionMemory
from lab import TaskStateEditor
from lab.task_state_form import (
    InvalidFormError,
    diff_text,
    form_fields,
    move_fact,
    parse_form,
    to_form,
)
from pydantic import BaseModel

STATE = TaskState(
    current_goal="Set up a trader on Binance",
    active_flow="create_trader",
    open_loops=("Pick a model for the trader",),
    important_facts=("Prefers low risk", "Trades BTC only"),
    pinned_facts=("Never use leverage",),
    last_decision=DecisionMemory(
        action="use binance",
        reason="the only exchange connected",
        timestamp=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
    ),
)


def test_the_form_has_a_control_for_every_editable_field() -> None:
    fields = {field.name: field.kind for field in form_fields()}
    assert fields == {
        "current_goal": "text",
        "active_flow": "text",
        "open_loops": "lines",
        "important_facts": "lines",
        "pinned_facts": "lines",
        "last_decision.action": "text",
        "last_decision.reason": "text",
        "last_decision.still_valid": "flag",
    }


def test_a_field_type_without_a_control_is_refused_not_dropped() -> None:
    class Future(BaseModel):
        current_goal: str = ""
        budget: int = 0

    with pytest.raises(TypeError, match="budget"):
        form_fields(Future)


def test_the_form_round_trips_a_state_and_keeps_an_unchanged_decision_time() -> None:
    values = to_form(STATE)
    assert values["important_facts"] == "Prefers low risk\nTrades BTC only"
    assert values["last_decision.still_valid"] is True
    parsed = parse_form(values, base=STATE)
    assert parsed.model_dump(exclude={"updated_at"}) == STATE.model_dump(exclude={"updated_at"})

    values["last_decision.reason"] = "it has the lowest fees"
    edited = parse_form(values, base=STATE)
    assert edited.last_decision is not None and edited.last_decision.timestamp is None  # new


def test_list_items_are_one_per_line_blank_lines_ignored() -> None:
    values = to_form(TaskState())
    values["open_loops"] = "  Decide on a budget \n\n  \nReview last month"
    state = parse_form(values, base=TaskState())
    assert state.open_loops == ("Decide on a budget", "Review last month")
    assert state.last_decision is None  # an empty decision is no decision


@pytest.mark.parametrize(
    ("field", "text", "why"),
    [
        ("open_loops", "Decide on a budget\ncall list_traders", "line 2"),
        ("open_loops", "wait for the user's answer", "step-level"),
        ("important_facts", "API key is sk-live-0123456789abcdefgh", "credential"),
        ("current_goal", "use passphrase hunter2 for okx", "credential"),
    ],
)
def test_bad_items_are_refused_with_the_field_named(field: str, text: str, why: str) -> None:
    values = to_form(STATE)
    values[field] = text
    with pytest.raises(InvalidFormError) as refused:
        parse_form(values, base=STATE)
    assert set(refused.value.errors) == {field}
    assert why in refused.value.errors[field]


def test_pin_and_unpin_move_a_fact_between_the_lists() -> None:
    values = move_fact(to_form(STATE), "trades btc only", pin=True)
    assert values["important_facts"] == "Prefers low risk"
    assert values["pinned_facts"] == "Never use leverage\nTrades BTC only"
    back = move_fact(values, "Never use leverage", pin=False)
    assert back["pinned_facts"] == "Trades BTC only"
    assert back["important_facts"] == "Prefers low risk\nNever use leverage"
    with pytest.raises(InvalidFormError, match="not among the important facts"):
        move_fact(values, "Likes ETH", pin=True)


def test_the_diff_shows_what_the_edit_changes() -> None:
    assert diff_text(STATE, STATE, stored_version=3) == ""
    edited = STATE.model_copy(update={"current_goal": "Set up two traders"})
    diff = diff_text(STATE, edited, stored_version=3).splitlines()
    assert diff[0] == "--- stored (version 3)" and diff[1] == "+++ edited"
    assert "-current_goal: Set up a trader on Binance" in diff
    assert "+current_goal: Set up two traders" in diff


# -- the widget -------------------------------------------------------------------------------


@pytest.fixture
def stored(data_dir: Path) -> Iterator[tuple[Agent, str]]:
    with Agent.open("desk-001", data_dir=data_dir) as agent:
        conversation = agent.create_conversation("memory").conversation_id
        agent.save_task_state(conversation, STATE, expected_version=0)
        yield agent, conversation


def test_edit_pin_and_save_is_a_versioned_write(stored: tuple[Agent, str]) -> None:
    agent, conversation = stored
    editor = TaskStateEditor(agent, conversation)
    assert editor.loaded.version == 1
    assert editor.controls["current_goal"].value == "Set up a trader on Binance"
    editor.controls["current_goal"].value = "Set up two traders"
    assert "+current_goal: Set up two traders" in editor.diff.value
    assert editor.fact_choice.value == "Prefers low risk"  # the first fact, ready to pin
    editor.fact_choice.value = "Trades BTC only"
    editor.pin_button.click()
    assert editor.controls["pinned_facts"].value == "Never use leverage\nTrades BTC only"
    editor.save_button.click()
    assert "Saved: version 2" in editor.notice.value
    saved = agent.task_state(conversation)
    assert saved.version == 2
    assert saved.value.current_goal == "Set up two traders"
    assert saved.value.pinned_facts == ("Never use leverage", "Trades BTC only")
    assert saved.value.important_facts == ("Prefers low risk",)
    assert "No changes" in editor.diff.value


def test_a_stale_save_is_refused_writes_nothing_and_keeps_the_edit(
    stored: tuple[Agent, str],
) -> None:
    agent, conversation = stored
    editor = TaskStateEditor(agent, conversation)
    theirs = STATE.model_copy(update={"active_flow": "review_traders"})
    agent.save_task_state(conversation, theirs, expected_version=1)  # someone else, meanwhile
    editor.controls["current_goal"].value = "My edit"
    editor.save_button.click()
    assert "Someone else changed this TaskState" in editor.notice.value
    assert "now at version 2" in editor.notice.value
    after = agent.task_state(conversation)
    assert after.version == 2 and after.value.active_flow == "review_traders"
    assert after.value.current_goal == "Set up a trader on Binance"
    assert editor.controls["current_goal"].value == "My edit"  # nothing typed is lost
    editor.diff_button.click()
    assert "-active_flow: review_traders" in editor.diff.value  # against what is stored now
    assert "version 1 → 2" in editor.notice.value
    editor.reload_button.click()
    assert editor.loaded.version == 2
    assert editor.controls["active_flow"].value == "review_traders"


def test_invalid_fields_are_marked_inline_and_nothing_is_saved(stored: tuple[Agent, str]) -> None:
    agent, conversation = stored
    editor = TaskStateEditor(agent, conversation)
    editor.controls["open_loops"].value = "Pick a model\nstep 3: call create_trader"
    assert "step-level" in editor.errors["open_loops"].value  # shown as soon as it is typed
    editor.save_button.click()
    assert "nothing was saved" in editor.notice.value
    assert agent.task_state(conversation).version == 1
    editor.controls["open_loops"].value = "Pick a model"
    assert editor.errors["open_loops"].value == ""
    assert editor.save()


def test_a_new_conversation_starts_from_an_empty_state(data_dir: Path) -> None:
    with Agent.open("innovator-001", data_dir=data_dir) as agent:
        conversation = agent.create_conversation("fresh").conversation_id
        editor = TaskStateEditor(agent, conversation)
        assert editor.loaded.version == 0
        editor.set_values({"current_goal": "Write a plan", "important_facts": "Likes lists"})
        assert editor.save()
        assert agent.task_state(conversation).value.important_facts == ("Likes lists",)
        with pytest.raises(KeyError, match="no field"):
            editor.set_values({"budget": "3"})
