"""Hostile ids are rejected everywhere before any path is built; nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentkit import Agent, InvalidIdError, Message, UsageError
from agentkit.ids import is_valid_id, new_conversation_id, new_message_id
from agentkit.store import ConversationKey, FileConversationStore
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from .conftest import run_cli, tree

HOSTILE = [
    "",
    ".",
    "..",
    "../x",
    "../../etc",
    "a/b",
    "a\\b",
    "/abs",
    ".hidden",
    "a.b",
    "a\n",
    "a\r",
    "a\tb",
    " a",
    "a ",
    "a\x00b",
    "%2e%2e",
    "..%2f",
    "x" * 65,
    "ａｂｃ",  # full-width look-alikes
    "аdmin",  # Cyrillic а
    "é",
    "٣",
    "a:b",
    "~root",
    "-rf",
    "_x",
    "\u202eabc",  # right-to-left override
    "\u2024\u2024",  # one-dot leaders, look like ..
]


def test_valid_ids_are_accepted() -> None:
    for good in ["a", "A9", "innovator-001", "conv-mn3112l3", "x" * 64, "a_b-c"]:
        assert is_valid_id(good)
    assert is_valid_id(new_conversation_id()) and new_conversation_id().startswith("conv-")
    assert is_valid_id(new_message_id()) and new_message_id().startswith("msg-")
    assert new_message_id() != new_message_id()


@pytest.mark.parametrize("bad", HOSTILE)
def test_hostile_ids_are_rejected_by_the_api(data_dir: Path, bad: str) -> None:
    agent = Agent.open("innovator-001", data_dir=data_dir)
    cid = agent.create_conversation("t").conversation_id
    before = tree(data_dir.parent)
    assert not is_valid_id(bad)
    with pytest.raises(InvalidIdError):
        Agent.open(bad, data_dir=data_dir)
    calls = [
        lambda: agent.load_conversation_history(bad),
        lambda: agent.load_recent_messages(bad, 5),
        lambda: agent.get_conversation(bad),
        lambda: agent.delete_conversation(bad),
        lambda: agent.append_message(bad, Message.user("x")),
    ]
    for call in calls:
        with pytest.raises(InvalidIdError):
            call()
    with pytest.raises(InvalidIdError):
        FileConversationStore(data_dir).conversations(bad)
    with pytest.raises(InvalidIdError):
        ConversationKey("innovator-001", bad)
    with pytest.raises(ValidationError):
        Message(role="user", content="x", message_id=bad, timestamp="2026-01-01T00:00:00Z")
    with pytest.raises(InvalidIdError):
        agent.turn_log(cid, bad)
    assert tree(data_dir.parent) == before


@pytest.mark.parametrize("bad", HOSTILE)
def test_hostile_ids_are_rejected_by_the_cli(data_dir: Path, bad: str) -> None:
    before = tree(data_dir.parent)
    invocations = [
        ["info", bad],
        ["new", bad],
        ["conversations", bad],
        ["history", bad, "conv-1"],
        ["history", "innovator-001", bad],
        ["delete", "innovator-001", bad],
        ["delete", bad, "conv-1"],
        ["verify", bad],
        ["info", "--", bad],
    ]
    for args in invocations:
        result = run_cli("--data-dir", str(data_dir), *args)
        assert result.exit_code == 2, (args, result.output)
        assert result.stdout == ""
        assert result.stderr.count("\n") == 1
        assert result.stderr.startswith("agentkit: error: ")
        if not bad.startswith("-"):  # option-like values are refused by the parser first
            assert result.stderr.startswith("agentkit: error: invalid")
    assert tree(data_dir.parent) == before


def test_a_symlink_out_of_the_data_root_is_refused(data_dir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (data_dir / "agents" / "innovator-001" / "conversations").symlink_to(outside)
    with pytest.raises(UsageError, match="outside the data root"):
        Agent.open("innovator-001", data_dir=data_dir)
    store = FileConversationStore(data_dir)
    with pytest.raises(UsageError, match="outside the data root"):
        store.create(ConversationKey("innovator-001", "conv-1"), "t")
    assert list(outside.iterdir()) == []


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=70))
def test_every_accepted_id_is_one_plain_path_component(candidate: str) -> None:
    if not is_valid_id(candidate):
        with pytest.raises(InvalidIdError):
            ConversationKey("a", candidate)
        return
    root = Path("/data/agents/a/conversations")
    path = root / candidate
    assert path.parent == root
    assert path.name == candidate
    assert candidate.isascii() and not candidate.startswith((".", "-", "_"))
