"""Agent folders, config validation, the system prompt and the seed 16.4 API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agentkit import (
    Agent,
    AgentNotFoundError,
    ConfigError,
    ConversationNotFoundError,
    InMemoryConversationStore,
    Message,
    resolve_data_dir,
)
from agentkit.agent_folder import PROMPT_FILES, list_agent_ids

from .conftest import SAMPLE_AGENTS


def test_sample_agents_load_with_their_engines() -> None:
    root = SAMPLE_AGENTS.parent
    assert {"innovator-001", "desk-001"} <= set(list_agent_ids(root))
    innovator = Agent.open("innovator-001", data_dir=root, store=InMemoryConversationStore())
    desk = Agent.open("desk-001", data_dir=root, store=InMemoryConversationStore())
    assert innovator.config.engine == "chat"
    assert desk.config.engine == "planner"
    assert desk.config.planner.strategy == "plan_replan"
    assert "create_trader" in desk.config.tools
    assert "Innovator" in innovator.system_prompt()
    for agent in ("innovator-001", "desk-001"):
        for sub in ("skills", "memory", "knowledge", "workspace", "logs"):
            assert (SAMPLE_AGENTS / agent / sub).is_dir()
        for name in PROMPT_FILES:
            assert (SAMPLE_AGENTS / agent / name).is_file()


def make_agent(root: Path, agent_id: str, config: object, files: dict[str, str]) -> Path:
    folder = root / "agents" / agent_id
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def test_system_prompt_follows_the_documented_order(tmp_path: Path) -> None:
    files = {name: f"<{name}>" for name in reversed(PROMPT_FILES)}
    files["soul.md"] = "  \n"  # empty files are left out
    files["notes.md"] = "not part of the prompt"
    make_agent(tmp_path, "a1", {}, files)
    prompt = Agent.open("a1", data_dir=tmp_path).system_prompt()
    expected = [f"<{name}>" for name in PROMPT_FILES if name != "soul.md"]
    assert prompt == "\n\n".join(expected)


@pytest.mark.parametrize(
    ("config", "field", "problem"),
    [
        ({"modle": "llama"}, "modle", "unknown key"),
        ({"engine": "rocket"}, "engine", "'chat' or 'planner'"),
        ({"compression": {"keep_recent": -1}}, "compression.keep_recent", "greater than or equal"),
        ({"planner": {"strategy": "yolo"}}, "planner.strategy", "plan_replan"),
        ({"max_turns": "many"}, "max_turns", "integer"),
        ([1, 2], "", "dictionary"),
    ],
)
def test_bad_config_names_the_file_and_field(
    tmp_path: Path, config: object, field: str, problem: str
) -> None:
    folder = make_agent(tmp_path, "a1", config, {})
    with pytest.raises(ConfigError) as caught:
        Agent.open("a1", data_dir=tmp_path)
    error = caught.value
    assert error.path == folder / "config.json"
    assert str(folder / "config.json") in str(error)
    assert error.field == field
    assert problem in str(error)


def test_config_that_is_not_json_is_a_clear_error(tmp_path: Path) -> None:
    folder = make_agent(tmp_path, "a1", {}, {})
    (folder / "config.json").write_text('{"model": "llama",\n}')
    with pytest.raises(ConfigError, match=r"not valid JSON \(line 2, column 1\)"):
        Agent.open("a1", data_dir=tmp_path)


def test_unknown_agent_is_reported(tmp_path: Path) -> None:
    with pytest.raises(AgentNotFoundError, match="nobody"):
        Agent.open("nobody", data_dir=tmp_path)
    assert not (tmp_path / "agents").exists()


def test_data_dir_comes_from_argument_then_env_then_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTKIT_DATA_DIR", str(tmp_path / "env"))
    assert resolve_data_dir(tmp_path / "arg") == tmp_path / "arg"
    assert resolve_data_dir() == tmp_path / "env"
    monkeypatch.delenv("AGENTKIT_DATA_DIR")
    monkeypatch.chdir(tmp_path)
    assert resolve_data_dir() == tmp_path / "data"


def test_conversation_api_end_to_end(data_dir: Path) -> None:
    agent = Agent.open("innovator-001", data_dir=data_dir)
    meta = agent.create_conversation("  创建   Master Agent ")
    assert meta.title == "创建 Master Agent"
    assert meta.conversation_id.startswith("conv-")
    cid = meta.conversation_id
    question = Message.user("你好")
    assert question.message_id.startswith("msg-")
    agent.append_message(cid, question)
    meta = agent.append_message(cid, Message.assistant("你好!", message_id=question.message_id))
    assert meta.stats.message_count == 2

    folder = data_dir / "agents" / "innovator-001" / "conversations" / cid
    assert json.loads((folder / "meta.json").read_text())["stats"]["messageCount"] == 2
    assert len(json.loads((folder / "history.json").read_text())) == 2
    assert "[AGENT]\n你好!" in (folder / question.message_id / "messages.log").read_text()

    conversation = agent.get_conversation(cid)
    assert conversation.meta == meta
    assert [m.content for m in conversation.messages] == ["你好", "你好!"]
    assert agent.load_conversation_history(cid) == list(conversation.messages)
    assert agent.load_recent_messages(cid, 1)[0].content == "你好!"
    assert "[USER]\n你好" in agent.turn_log(cid, question.message_id)
    assert [m.conversation_id for m in agent.list_conversations()] == [cid]
    assert conversation.to_json_dict()["meta"]["conversationId"] == cid

    agent.delete_conversation(cid)
    assert agent.list_conversations() == []
    assert not folder.exists()
    with pytest.raises(ConversationNotFoundError):
        agent.get_conversation(cid)


def test_conversations_of_two_agents_are_separate(data_dir: Path) -> None:
    innovator = Agent.open("innovator-001", data_dir=data_dir)
    desk = Agent.open("desk-001", data_dir=data_dir)
    cid = innovator.create_conversation("mine").conversation_id
    assert desk.list_conversations() == []
    with pytest.raises(ConversationNotFoundError):
        desk.load_conversation_history(cid)


def test_opening_an_agent_recovers_what_a_crash_left(data_dir: Path) -> None:
    agent = Agent.open("innovator-001", data_dir=data_dir)
    cid = agent.create_conversation("t").conversation_id
    question = Message.user("kept")
    agent.append_message(cid, question)
    folder = data_dir / "agents" / "innovator-001" / "conversations" / cid
    conversations = folder.parent
    # A crash: a torn journal tail, a stale temp file, an interrupted create and delete.
    with open(folder / "journal.log", "ab") as journal:
        journal.write(b"0000004a 1234")
    (folder / ".meta.json.abcd1234.tmp").write_text("{")
    (conversations / ".conv-x.creating-0001").mkdir()
    (conversations / ".conv-y.deleted-0002").mkdir()
    assert not agent.store.verify("innovator-001").ok

    reopened = Agent.open("innovator-001", data_dir=data_dir)
    report = reopened.store.verify("innovator-001")
    assert report.ok, report.problems
    assert [m.content for m in reopened.load_conversation_history(cid)] == ["kept"]
    assert sorted(p.name for p in conversations.iterdir()) == [f".{cid}.lock", cid]
