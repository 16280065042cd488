"""The conversation store contract: every implementation must pass all of it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from agentkit.errors import (
    ConversationBusyError,
    ConversationNotFoundError,
    InvalidIdError,
    UsageError,
)
from agentkit.store import (
    ConversationKey,
    ConversationStore,
    FileConversationStore,
    InMemoryConversationStore,
)
from agentkit.types import Message, ToolCallRecord

from tests._postgres import postgres_server, postgres_url  # noqa: F401 (fixtures)

KEY = ConversationKey("agent-1", "conv-1")


@pytest.fixture(params=["file", "memory", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ConversationStore]:
    if request.param == "file":
        yield FileConversationStore(tmp_path, lock_timeout=5.0)
    elif request.param == "postgres":
        from agentkit.store.postgres import PostgresConversationStore

        with PostgresConversationStore(
            request.getfixturevalue("postgres_url"), lock_timeout=5.0
        ) as postgres:
            yield postgres
    else:
        yield InMemoryConversationStore(lock_timeout=5.0)


def at(second: int) -> datetime:
    return datetime(2026, 3, 23, 10, 12, second, 993000, tzinfo=UTC)


def turn(index: int, text: str = "") -> tuple[Message, Message]:
    mid = f"msg-{index:04d}"
    return (
        Message(
            role="user", content=text or f"question {index}", message_id=mid, timestamp=at(index)
        ),
        Message(role="assistant", content=f"answer {index}", message_id=mid, timestamp=at(index)),
    )


def test_create_gives_an_idle_empty_conversation(store: ConversationStore) -> None:
    meta = store.create(KEY, "创建 Master Agent")
    assert (meta.conversation_id, meta.agent_id, meta.title) == (
        "conv-1",
        "agent-1",
        "创建 Master Agent",
    )
    assert meta.status == "idle"
    assert (meta.stats.message_count, meta.stats.tool_call_count) == (0, 0)
    assert meta.created_at == meta.updated_at
    assert store.exists(KEY)
    assert store.messages(KEY) == []
    assert store.meta(KEY) == meta


def test_create_twice_is_refused(store: ConversationStore) -> None:
    store.create(KEY, "first")
    with pytest.raises(UsageError, match="already exists"):
        store.create(KEY, "second")
    assert store.meta(KEY).title == "first"


def test_appended_messages_come_back_in_order(store: ConversationStore) -> None:
    store.create(KEY, "t")
    sent: list[Message] = []
    for index in range(5):
        for message in turn(index, "多行\n内容 ✓" if index == 2 else ""):
            meta = store.append(KEY, message)
            sent.append(message)
    assert store.messages(KEY) == sent
    assert meta.stats.message_count == 10
    assert meta.updated_at == sent[-1].timestamp
    assert store.meta(KEY) == meta


def test_tool_calls_are_counted(store: ConversationStore) -> None:
    store.create(KEY, "t")
    question, _ = turn(1)
    store.append(KEY, question)
    calls = (
        ToolCallRecord(id="c1", name="list_traders"),
        ToolCallRecord(id="c2", name="create_trader", arguments={"name": "t1"}),
    )
    reply = Message.assistant("done", message_id=question.message_id, tool_calls=calls)
    meta = store.append(KEY, reply)
    assert (meta.stats.message_count, meta.stats.tool_call_count) == (2, 2)
    assert store.messages(KEY)[-1].tool_calls == calls


def test_recent_returns_the_tail_oldest_first(store: ConversationStore) -> None:
    store.create(KEY, "t")
    sent = [m for index in range(15) for m in turn(index)]
    for message in sent:
        store.append(KEY, message)
    store.set_status(KEY, "completed")  # non-message records are skipped
    assert store.recent(KEY, 0) == []
    assert store.recent(KEY, 1) == sent[-1:]
    assert store.recent(KEY, 20) == sent[-20:]
    assert store.recent(KEY, 1000) == sent
    with pytest.raises(UsageError):
        store.recent(KEY, -1)


def test_status_changes_are_kept(store: ConversationStore) -> None:
    store.create(KEY, "t")
    assert store.set_status(KEY, "running").status == "running"
    assert store.meta(KEY).status == "running"
    meta = store.set_status(KEY, "failed")
    assert meta.status == "failed"
    assert meta.stats.message_count == 0
    with pytest.raises(ValueError, match="status"):
        store.set_status(KEY, "exploded")  # type: ignore[arg-type]
    assert store.meta(KEY).status == "failed"


def test_turn_log_holds_the_turn_in_the_seed_format(store: ConversationStore) -> None:
    store.create(KEY, "t")
    question = Message(role="user", content="你好", message_id="msg-a", timestamp=at(11))
    reply = Message(
        role="assistant",
        content="你好,我是 Innovator",
        message_id="msg-a",
        timestamp=at(26).replace(microsecond=207000),
    )
    store.append(KEY, question)
    store.annotate(KEY, "msg-a", "SESSION", "scenario A")
    store.append(KEY, reply)
    log = store.turn_log(KEY, "msg-a")
    assert log.startswith("[2026-03-23T10:12:11.993Z] [USER]\n你好\n\n[")
    assert "] [SESSION]\nscenario A\n\n" in log
    assert log.endswith("[2026-03-23T10:12:26.207Z] [AGENT]\n你好,我是 Innovator\n\n")
    assert [m.content for m in store.messages(KEY)] == ["你好", "你好,我是 Innovator"]
    with pytest.raises(UsageError, match="no turn"):
        store.turn_log(KEY, "msg-none")
    with pytest.raises(ValueError, match="label"):
        store.annotate(KEY, "msg-a", "lower case", "x")


def test_conversations_are_listed_per_agent_newest_first(store: ConversationStore) -> None:
    keys = [ConversationKey("agent-1", f"conv-{n}") for n in range(3)]
    for key in keys:
        store.create(key, key.conversation_id)
    store.create(ConversationKey("agent-2", "conv-x"), "other agent")
    question, _ = turn(1)
    store.append(
        keys[0], question.model_copy(update={"timestamp": datetime.now(UTC) + timedelta(1)})
    )
    listed = store.conversations("agent-1")
    assert listed[0].conversation_id == "conv-0"
    assert {m.conversation_id for m in listed} == {"conv-0", "conv-1", "conv-2"}
    assert [m.conversation_id for m in store.conversations("agent-2")] == ["conv-x"]
    assert store.conversations("agent-3") == []


def test_delete_removes_the_conversation(store: ConversationStore) -> None:
    store.create(KEY, "t")
    store.append(KEY, turn(1)[0])
    other = ConversationKey("agent-1", "conv-2")
    store.create(other, "kept")
    store.delete(KEY)
    assert not store.exists(KEY)
    assert [m.conversation_id for m in store.conversations("agent-1")] == ["conv-2"]
    for call in (store.meta, store.messages, lambda k: store.append(k, turn(2)[0]), store.delete):
        with pytest.raises(ConversationNotFoundError):
            call(KEY)
    assert store.verify().ok


def test_missing_conversations_are_reported(store: ConversationStore) -> None:
    missing = ConversationKey("agent-1", "conv-missing")
    with pytest.raises(ConversationNotFoundError, match="conv-missing"):
        store.meta(missing)
    with pytest.raises(ConversationNotFoundError):
        store.recent(missing, 3)
    with pytest.raises(ConversationNotFoundError):
        store.set_status(missing, "running")
    with pytest.raises(ConversationNotFoundError), store.hold(missing):
        pass
    assert not store.exists(missing)


def test_keys_validate_their_ids() -> None:
    for agent, conversation in [("..", "c"), ("a", "../c"), ("a/b", "c"), ("a", ""), ("a", "c\n")]:
        with pytest.raises(InvalidIdError):
            ConversationKey(agent, conversation)


def test_hold_is_reentrant_and_excludes_other_threads(store: ConversationStore) -> None:
    store.create(KEY, "t")
    with store.hold(KEY), store.hold(KEY):
        store.append(KEY, turn(1)[0])  # the holder can write
    held = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with store.hold(KEY):
            held.set()
            release.wait()  # held until the busy check is over (set in the finally below)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        held.wait()
        with (
            pytest.raises(ConversationBusyError, match="busy") as caught,
            store.hold(KEY, timeout=0.1),
        ):
            pass
        assert caught.value.conversation_id == "conv-1"
    finally:
        release.set()
        thread.join()
    assert len(store.messages(KEY)) == 1
    with store.hold(KEY):  # free again (within the store's lock_timeout)
        pass


def test_verify_is_clean_after_normal_use(store: ConversationStore) -> None:
    store.create(KEY, "t")
    for message in turn(1):
        store.append(KEY, message)
    store.annotate(KEY, "msg-0001", "SESSION", "scenario B")
    store.set_status(KEY, "completed")
    assert store.recover() == []  # nothing to repair after normal use
    report = store.verify()
    assert report.ok, report.problems
    assert report.conversations == 1
    assert store.verify("agent-1").conversations == 1
    assert store.verify("agent-9").conversations == 0
