"""The conversation browser: data-root tables as plain functions, and the widget's drill-down."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentkit import Agent, ConversationNotFoundError, ScriptedModel
from lab import ConversationBrowser
from lab.conversation_tables import (
    AGENT_COLUMNS,
    CONVERSATION_COLUMNS,
    MESSAGE_COLUMNS,
    TURN_COLUMNS,
    agents_frame,
    conversations_frame,
    messages_frame,
    turns_frame,
)

from tests.conftest import tree


def chat(data_dir: Path, *texts: str) -> str:
    """One conversation of innovator-001 with a scripted reply per text; returns its id."""
    script = {"chat": [f"reply {number}" for number in range(1, len(texts) + 1)]}
    with Agent.open("innovator-001", data_dir=data_dir, model=ScriptedModel(script)) as agent:
        conversation = None
        for text in texts:
            conversation = agent.send(text, conversation).conversation_id
    assert conversation is not None
    return conversation


def test_agents_are_listed_with_their_engine(data_dir: Path) -> None:
    frame = agents_frame(data_dir)
    assert list(frame.columns) == list(AGENT_COLUMNS)
    engines = dict(zip(frame["agentId"], frame["engine"], strict=True))
    assert engines["desk-001"] == "planner" and engines["innovator-001"] == "chat"
    assert list(frame["agentId"]) == sorted(path.name for path in (data_dir / "agents").iterdir())


def test_conversations_messages_and_turns_of_an_agent(data_dir: Path) -> None:
    conversation = chat(data_dir, "first question", "second question")
    with Agent.open("innovator-001", data_dir=data_dir) as agent:
        conversations = conversations_frame(agent)
        messages = messages_frame(agent, conversation)
        turns = turns_frame(agent, conversation)
    assert list(conversations.columns) == list(CONVERSATION_COLUMNS)
    assert list(conversations["conversationId"]) == [conversation]
    assert conversations["messages"][0] == 4
    assert list(messages.columns) == list(MESSAGE_COLUMNS)
    assert list(messages["role"]) == ["user", "assistant", "user", "assistant"]
    assert list(messages["content"]) == ["first question", "reply 1", "second question", "reply 2"]
    assert list(turns.columns) == list(TURN_COLUMNS)
    assert list(turns["user"]) == ["first question", "second question"]
    assert list(turns["reply"]) == ["reply 1", "reply 2"]
    assert list(turns["messageId"]) == list(messages["messageId"][::2])
    assert all(turns["logLines"] >= 2)  # [USER] and [AGENT] at least


def test_an_empty_data_root_gives_empty_tables_with_their_columns(tmp_path: Path) -> None:
    frame = agents_frame(tmp_path)
    assert frame.empty and list(frame.columns) == list(AGENT_COLUMNS)


def test_an_unknown_conversation_is_a_clear_error(data_dir: Path) -> None:
    with Agent.open("innovator-001", data_dir=data_dir) as agent:
        with pytest.raises(ConversationNotFoundError):
            messages_frame(agent, "conv-nosuchthing")
        assert conversations_frame(agent).empty


def test_the_browser_drills_down_to_a_turn_log_and_writes_nothing(data_dir: Path) -> None:
    conversation = chat(data_dir, "hello <b>there</b>")
    before = tree(data_dir)
    browser = ConversationBrowser(data_dir)
    assert list(browser.agent_choice.options) == list(agents_frame(data_dir)["agentId"])
    browser.select("innovator-001")
    assert browser.conversation_choice.value == conversation
    assert list(browser.messages["content"]) == ["hello <b>there</b>", "reply 1"]
    assert "hello &lt;b&gt;there&lt;/b&gt;" in browser.messages_table.value  # escaped
    message_id = browser.turns["messageId"][0]
    assert browser.turn_choice.value == message_id
    assert "[USER]" in browser.turn_log.value and "[AGENT]" in browser.turn_log.value
    browser.select("desk-001")
    assert browser.conversations.empty and browser.conversation_choice.value is None
    assert "No conversations yet." in browser.conversations_table.value
    assert browser.turn_log.value == "<i>No turn selected.</i>"
    assert tree(data_dir) == before


def test_refresh_picks_up_new_conversations(data_dir: Path) -> None:
    browser = ConversationBrowser(data_dir)
    browser.select("innovator-001")
    assert browser.conversations.empty
    conversation = chat(data_dir, "new one")
    browser.refresh_button.click()
    assert browser.agent_choice.value == "innovator-001"
    assert list(browser.conversations["conversationId"]) == [conversation]


def test_refresh_shows_new_messages_of_the_conversation_on_screen(data_dir: Path) -> None:
    conversation = chat(data_dir, "first")
    browser = ConversationBrowser(data_dir)
    browser.select("innovator-001", conversation)
    first_turn = browser.turn_choice.value
    with Agent.open(
        "innovator-001", data_dir=data_dir, model=ScriptedModel({"chat": ["later reply"]})
    ) as agent:
        agent.send("second", conversation)
    browser.refresh_button.click()
    assert browser.conversation_choice.value == conversation
    assert list(browser.messages["content"]) == ["first", "reply 1", "second", "later reply"]
    assert "later reply" in browser.messages_table.value
    assert browser.turn_choice.value != first_turn  # the newest turn, its log shown
    assert "later reply" in browser.turn_log.value


def test_line_breaks_in_messages_show_as_breaks_not_as_backslash_n(data_dir: Path) -> None:
    chat(data_dir, "first line\nsecond line <i>x</i>")
    browser = ConversationBrowser(data_dir)
    browser.select("innovator-001")
    table = browser.messages_table.value
    assert "first line<br>second line &lt;i&gt;x&lt;/i&gt;" in table
    assert "\\n" not in table
