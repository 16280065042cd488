"""Checkpoints per turn and forks: the history prefix, the memory of that turn, the source
untouched, paused flows, bad input, and a fork killed at every write."""

from __future__ import annotations

import hashlib
import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from agentkit import Agent
from agentkit.errors import (
    ConversationBusyError,
    ConversationNotFoundError,
    InvalidIdError,
    TurnNotFinishedError,
    TurnNotFoundError,
)
from agentkit.events import AskUserEvent, ToolCallEvent
from agentkit.models.scripted import ScriptedModel
from agentkit.store import ConversationKey, FileConversationStore, SqliteConfigStore
from agentkit.types import Message

from ._processes import fork_call, wait_exit
from .test_model_cassette import DESK_TURNS, fixed_desk_clock, seed  # noqa: F401
from .test_store_crash import CRASH_CODE, _crash_on_call

AGENT = "desk-001"


def folder_of(data_dir: Path, conversation_id: str) -> Path:
    return data_dir / "agents" / AGENT / "conversations" / conversation_id


def digest(path: Path) -> dict[str, str]:
    """Every file under *path* and the hash of its bytes."""
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def memory_rows(data_dir: Path, conversation_id: str) -> dict[str, Any]:
    with SqliteConfigStore(data_dir / "agentkit.db") as kv:
        rows = {}
        for key in kv.keys(""):
            if key.endswith(f":{AGENT}:{conversation_id}"):
                entry = kv.get(key)
                assert entry is not None
                rows[key.split(":")[0]] = (entry.value, entry.version)
        return rows


def desk_conversation(data_dir: Path, turns: int = 3) -> tuple[str, list[str], list[Any]]:
    """Run the first *turns* desk turns; the conversation, its turn ids, the memory after
    each turn."""
    seed(data_dir)
    conversation: str | None = None
    ids: list[str] = []
    after: list[Any] = []
    for text, script in DESK_TURNS[:turns]:
        with Agent.open(AGENT, data_dir=data_dir, model=ScriptedModel(script)) as agent:
            result = agent.send(text, conversation)
        conversation = result.conversation_id
        ids.append(result.result.message_id)
        after.append(memory_rows(data_dir, conversation))
    assert conversation is not None
    return conversation, ids, after


def traders(data_dir: Path) -> list[str]:
    with Agent.open(AGENT, data_dir=data_dir, model="scripted:none.json") as agent:
        result = agent.loop.run(agent.tools.arun("list_traders", {}))
    return [trader["name"] for trader in json.loads(result.text).get("traders", [])]


def test_every_finished_turn_has_a_checkpoint(data_dir: Path) -> None:
    conversation, ids, after = desk_conversation(data_dir)
    store = FileConversationStore(data_dir)
    checkpoints = store.checkpoints(ConversationKey(AGENT, conversation))
    assert [c.message_id for c in checkpoints] == ids
    assert [c.messages for c in checkpoints] == [2, 4, 6]
    for checkpoint, rows in zip(checkpoints, after, strict=True):
        assert (checkpoint.execution_state, checkpoint.execution_state_version) == rows[
            "execution_state"
        ]
        assert checkpoint.status == "completed"
    assert [c.execution_state["status"] for c in checkpoints] == [  # type: ignore[index,call-overload]
        "waiting_user",
        "waiting_confirmation",
        "completed",
    ]
    assert store.verify().ok


@pytest.mark.parametrize("turn", [0, 1, 2], ids=["first", "middle", "last"])
def test_fork_at_a_turn_has_its_history_prefix_and_memory_and_leaves_the_source(
    data_dir: Path, turn: int
) -> None:
    conversation, ids, after = desk_conversation(data_dir)
    source = folder_of(data_dir, conversation)
    before = digest(source)
    source_memory = memory_rows(data_dir, conversation)

    with Agent.open(AGENT, data_dir=data_dir, model="scripted:none.json") as agent:
        meta = agent.fork(conversation, at=ids[turn], title="what if")
        fork = meta.conversation_id
        assert meta.title == "what if"
        assert meta.forked_from is not None
        assert meta.forked_from.conversation_id == conversation
        assert meta.forked_from.message_id == ids[turn]
        source_messages = agent.load_conversation_history(conversation)
        fork_messages = agent.load_conversation_history(fork)
        assert fork_messages == source_messages[: 2 * (turn + 1)]
        assert meta.stats.message_count == 2 * (turn + 1)
        assert agent.turn_log(fork, ids[turn]) == agent.turn_log(conversation, ids[turn])

    history = (folder_of(data_dir, fork) / "history.json").read_bytes()
    entries = [
        line.rstrip(b",") for line in (source / "history.json").read_bytes().split(b"\n")[1:-2]
    ]
    assert history == b"[\n" + b",\n".join(entries[: 2 * (turn + 1)]) + b"\n]\n"  # the bytes
    on_disk = json.loads((folder_of(data_dir, fork) / "meta.json").read_text())
    assert on_disk["forkedFrom"] == {"conversationId": conversation, "messageId": ids[turn]}
    assert (folder_of(data_dir, fork) / ids[turn] / "calls.jsonl").is_file()

    restored = memory_rows(data_dir, fork)
    expected = after[turn]
    assert restored["execution_state"][0] == {
        **expected["execution_state"][0],
        "conversation_id": fork,
    }
    assert ("task_state" in restored) == ("task_state" in expected)
    if "task_state" in expected:
        assert restored["task_state"][0] == expected["task_state"][0]

    assert digest(source) == before  # byte for byte
    assert memory_rows(data_dir, conversation) == source_memory
    assert FileConversationStore(data_dir).verify().ok


def test_a_fork_of_a_fork_and_a_fork_of_the_latest_turn(data_dir: Path) -> None:
    conversation, ids, _ = desk_conversation(data_dir)
    with Agent.open(AGENT, data_dir=data_dir, model="scripted:none.json") as agent:
        latest = agent.fork(conversation)
        assert latest.forked_from is not None and latest.forked_from.message_id == ids[-1]
        assert latest.title.endswith("(fork)")
        again = agent.fork(latest.conversation_id, at=ids[0])
        assert len(agent.load_conversation_history(again.conversation_id)) == 2
        assert next(m.conversation_id for m in agent.list_conversations()) == again.conversation_id


def test_a_paused_flow_stays_paused_and_approval_runs_the_tool_only_in_the_fork(
    data_dir: Path,
) -> None:
    conversation, _ids, _ = desk_conversation(data_dir, turns=2)  # waiting for consent
    source = folder_of(data_dir, conversation)
    before = digest(source)
    with Agent.open(AGENT, data_dir=data_dir, model="scripted:none.json") as agent:
        fork = agent.fork(conversation).conversation_id
        state = agent.execution_state(fork)
        assert state is not None and state.value.status == "waiting_confirmation"
    assert traders(data_dir) == []

    with Agent.open(AGENT, data_dir=data_dir, model=ScriptedModel(DESK_TURNS[2][1])) as agent:
        approved = agent.send("yes", fork)
        assert approved.text == "Trader Alpha is ready."
        calls = [e.name for e in approved.events if isinstance(e, ToolCallEvent)]
        assert calls.count("create_trader") == 1
        fork_state = agent.execution_state(fork)
        source_state = agent.execution_state(conversation)
    assert fork_state is not None and fork_state.value.status == "completed"
    assert source_state is not None and source_state.value.status == "waiting_confirmation"
    assert traders(data_dir) == ["Alpha"]  # once
    assert digest(source) == before


def test_a_question_stays_pending_in_the_fork(data_dir: Path) -> None:
    conversation, ids, _ = desk_conversation(data_dir, turns=3)
    with Agent.open(AGENT, data_dir=data_dir, model=ScriptedModel(DESK_TURNS[1][1])) as agent:
        fork = agent.fork(conversation, at=ids[0]).conversation_id
        state = agent.execution_state(fork)
        assert state is not None and state.value.status == "waiting_user"
        answered = agent.send("Alpha", fork)  # taken as the answer: a replan, no new plan
        consent = [e for e in answered.events if isinstance(e, AskUserEvent)]
        assert consent and consent[0].kind == "confirmation"


def test_bad_forks_are_clear_errors_and_write_nothing(data_dir: Path) -> None:
    conversation, ids, _ = desk_conversation(data_dir, turns=1)
    with Agent.open(AGENT, data_dir=data_dir, model="scripted:none.json") as agent:
        # a turn cut short: its user message is there, it never finished
        cut = Message.user("a turn that never finished")
        agent.append_message(conversation, cut)
        root_before = digest(data_dir / "agents")
        with SqliteConfigStore(data_dir / "agentkit.db") as kv:
            keys_before = kv.keys()

        with pytest.raises(TurnNotFoundError, match="no turn 'msg-nope'"):
            agent.fork(conversation, at="msg-nope")
        with pytest.raises(TurnNotFinishedError, match="no checkpoint"):
            agent.fork(conversation, at=cut.message_id)
        with pytest.raises(InvalidIdError):
            agent.fork(conversation, at="../x")
        with pytest.raises(ConversationNotFoundError):
            agent.fork("conv-missing")
        other = FileConversationStore(data_dir)  # another writer (its own lock)
        with other.hold(ConversationKey(AGENT, conversation)), pytest.raises(ConversationBusyError):
            agent.fork(conversation, at=ids[0])

        assert digest(data_dir / "agents") == root_before
        with SqliteConfigStore(data_dir / "agentkit.db") as kv:
            assert kv.keys() == keys_before
        # the last *finished* turn is still forkable
        assert agent.fork(conversation).forked_from.message_id == ids[0]  # type: ignore[union-attr]


def _fork_tree(data_dir: Path) -> list[Path]:
    conversations = data_dir / "agents" / AGENT / "conversations"
    return sorted(p for p in conversations.iterdir() if p.is_dir())


@pytest.mark.slow
def test_a_fork_killed_at_every_write_is_complete_or_absent(data_dir: Path, tmp_path: Path) -> None:
    conversation, ids, _after = desk_conversation(data_dir, turns=2)
    base = tmp_path / "base"
    shutil.copytree(data_dir, base)
    source_digest = digest(folder_of(base, conversation))

    outcomes: list[str] = []
    for torn in (False, True):
        for at in itertools.count(1):
            work = tmp_path / f"{'torn' if torn else 'crash'}-{at}"
            shutil.copytree(base, work)

            def child(work: Path = work, at: int = at, torn: bool = torn) -> None:
                agent = Agent.open(AGENT, data_dir=work, model="scripted:none.json")
                _crash_on_call(at, torn=torn)
                agent.fork(conversation, at=ids[1])

            code = wait_exit(fork_call(child))
            store = FileConversationStore(work)
            store.recover()
            assert store.verify().ok, store.verify().problems
            forks = [p for p in _fork_tree(work) if p.name != conversation]
            assert digest(folder_of(work, conversation)) == source_digest
            assert not [
                p
                for p in (work / "agents" / AGENT / "conversations").iterdir()
                if p.name.startswith(".") and not p.name.endswith(".lock")
            ]
            if forks:
                (fork,) = forks
                with Agent.open(AGENT, data_dir=work, model="scripted:none.json") as agent:
                    messages = agent.load_conversation_history(fork.name)
                    assert len(messages) == 4
                    state = agent.execution_state(fork.name)
                    assert state is not None and state.value.status == "waiting_confirmation"
                outcomes.append("N")
            else:
                outcomes.append("o")
            if code == 0:
                assert forks
                break
            assert code == CRASH_CODE
            assert at < 300
        print(f"\nfork ({'torn' if torn else 'crash'}): {''.join(outcomes)}")
        assert outcomes[0] == "o" and outcomes[-1] == "N"
        assert outcomes == sorted(outcomes, key="oN".index)  # once there, it stays
        outcomes.clear()


@pytest.mark.parametrize("at", ["", "   ", "\t"])
def test_a_fork_at_an_empty_or_blank_turn_is_an_invalid_id_not_the_last_turn(
    data_dir: Path, at: str
) -> None:
    with Agent.open("innovator-001", data_dir=data_dir, model=ScriptedModel(["one"])) as agent:
        conversation = agent.send("hi").conversation_id
        with pytest.raises(InvalidIdError):
            agent.fork(conversation, at=at)
        assert [c.conversation_id for c in agent.list_conversations()] == [conversation]
