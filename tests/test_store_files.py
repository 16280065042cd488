"""The file store writes the seed's layout, and it persists across store instances."""

from __future__ import annotations

import json
from pathlib import Path

from agentkit.store import ConversationKey, FileConversationStore
from agentkit.types import Message, ToolCallRecord

KEY = ConversationKey("innovator-001", "conv-mn3112l3")


def test_files_follow_the_seed_layout(tmp_path: Path) -> None:
    store = FileConversationStore(tmp_path)
    store.create(KEY, "创建 Master Agent")
    question = Message.user("你好")
    store.append(KEY, question)
    reply = Message.assistant(
        "你好,我是 Innovator",
        message_id=question.message_id,
        tool_calls=(ToolCallRecord(id="c1", name="x"),),
    )
    store.append(KEY, reply)
    folder = tmp_path / "agents" / "innovator-001" / "conversations" / "conv-mn3112l3"

    meta = json.loads((folder / "meta.json").read_text())
    assert {k: meta[k] for k in ("conversationId", "agentId", "title", "status")} == {
        "conversationId": "conv-mn3112l3",
        "agentId": "innovator-001",
        "title": "创建 Master Agent",
        "status": "idle",
    }
    assert meta["stats"] == {
        "messageCount": 2,
        "toolCallCount": 1,
        "inputTokens": 0,
        "outputTokens": 0,
    }
    assert (
        meta["createdAt"].endswith("Z") and meta["updatedAt"] == reply.to_json_dict()["timestamp"]
    )

    history = json.loads((folder / "history.json").read_text())
    assert history[0] == {
        "role": "user",
        "content": "你好",
        "messageId": question.message_id,
        "timestamp": question.to_json_dict()["timestamp"],
    }
    assert history[1]["role"] == "assistant"
    assert history[1]["toolCalls"][0]["name"] == "x"

    log = (folder / question.message_id / "messages.log").read_text()
    stamp = question.to_json_dict()["timestamp"]
    assert log.startswith(f"[{stamp}] [USER]\n你好\n\n[")
    assert "] [AGENT]\n你好,我是 Innovator\n\n" in log


def test_a_new_store_instance_sees_the_same_conversation(tmp_path: Path) -> None:
    first = FileConversationStore(tmp_path)
    first.create(KEY, "t")
    sent = [Message.user(f"m{i}") for i in range(7)]
    for message in sent:
        first.append(KEY, message)
    first.set_status(KEY, "completed")
    second = FileConversationStore(tmp_path)
    assert second.messages(KEY) == sent
    assert second.recent(KEY, 3) == sent[-3:]
    assert second.meta(KEY) == first.meta(KEY)
    assert second.meta(KEY).status == "completed"
    second.append(KEY, Message.user("after"))
    assert [m.content for m in first.messages(KEY)][-2:] == ["m6", "after"]
    assert first.verify().ok


def test_history_json_is_a_valid_array_after_every_append(tmp_path: Path) -> None:
    store = FileConversationStore(tmp_path)
    store.create(KEY, "t")
    history = (
        tmp_path / "agents" / KEY.agent_id / "conversations" / KEY.conversation_id / "history.json"
    )
    assert json.loads(history.read_text()) == []
    for index in range(5):
        store.append(KEY, Message.user(f'line {index}\n"quoted" ]'))
        parsed = json.loads(history.read_text())
        assert [entry["content"] for entry in parsed] == [
            f'line {i}\n"quoted" ]' for i in range(index + 1)
        ]
