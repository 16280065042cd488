"""What makes a planner turn cheap, and that it stays correct (issue 13).

* the last messages and the last checkpoint are cached per folder, and another writer's
  records are still seen;
* a note made inside a turn (this thread holds the conversation's lock) rides along with the
  turn's next commit instead of a write of its own; outside a turn it is written at once;
* a turn that runs no side-effecting tool makes exactly two journal fsyncs and one
  (non-durable) ``system_config`` write of its ExecutionState, the state it ends in, written
  at the turn's end (between the two fsyncs, right before the answer's commit) and travelling
  in the turn's checkpoint, in the same commit as its answer; every state before it is staged
  in memory, where this process's readers see it;
* after a power loss that drops the last (non-durable) ExecutionState write, the next turn
  restores the state from the checkpoint instead of reporting an interrupted turn; a state
  written after the checkpoint (memory cleared, a new flow) is never overwritten;
* while a thread holds a conversation's lock it writes through files it opened once, closed
  when the lock is let go, and reopened after a recovery replaced them;
* the writer lock is re-entrant per thread and excludes other threads as it does processes.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from agentkit import Agent, ScriptedModel
from agentkit.errors import ConversationBusyError
from agentkit.store import ConversationKey, FileConversationStore
from agentkit.store._lazy import LazyMessages
from agentkit.store.sqlite_kv import SqliteConfigStore
from agentkit.types import Message

from .test_planner_crash import CONSENT, FINAL, INTERRUPTED, SCRIPT, make_root

KEY = ConversationKey("agent-1", "conv-1")


def _store_with_messages(root: Path, count: int) -> FileConversationStore:
    store = FileConversationStore(root)
    store.create(KEY, "t")
    for index in range(count):
        store.append(KEY, Message.user(f"message {index}"))
    return store


def _journal_size(store: FileConversationStore) -> int:
    return os.path.getsize(store.folder(KEY) / "journal.log")


# ------------------------------------------------------------------------------ the caches


def test_recent_sees_what_another_store_appended_after_it_cached_the_tail(tmp_path: Path) -> None:
    mine = _store_with_messages(tmp_path, 5)
    assert [m.content for m in mine.recent(KEY, 2)] == ["message 3", "message 4"]
    theirs = FileConversationStore(tmp_path)  # another process, as far as the files go
    theirs.append(KEY, Message.user("from elsewhere"))
    assert [m.content for m in mine.recent(KEY, 2)] == ["message 4", "from elsewhere"]
    mine.append(KEY, Message.user("mine again"))
    assert [m.content for m in theirs.recent(KEY, 3)] == [
        "message 4",
        "from elsewhere",
        "mine again",
    ]


def test_recent_beyond_the_cached_tail_reads_the_journal(tmp_path: Path) -> None:
    store = _store_with_messages(tmp_path, 300)
    assert len(store.recent(KEY, 3)) == 3  # caches a tail of the last messages
    everything = store.recent(KEY, 1000)
    assert len(everything) == 300
    assert everything[0].content == "message 0" and everything[-1].content == "message 299"
    assert FileConversationStore(tmp_path).recent(KEY, 1000) == everything


def test_last_checkpoint_follows_the_journal(tmp_path: Path) -> None:
    root, conversation = make_root(tmp_path)
    key = ConversationKey("launcher", conversation)
    with Agent.open("launcher", data_dir=root, model=ScriptedModel(SCRIPT)) as agent:
        agent.send("launch apollo", conversation)
        first = agent.store.last_checkpoint(key)
        assert first is not None
        agent.send("no", conversation)
        second = agent.store.last_checkpoint(key)
    assert second is not None and second.message_id != first.message_id
    fresh = FileConversationStore(root)  # read back from the journal's end
    assert fresh.last_checkpoint(key) == second
    assert fresh.checkpoints(key)[-1] == second


# ------------------------------------------------------------------------------ notes


def test_a_note_inside_a_held_turn_rides_along_with_the_next_commit(tmp_path: Path) -> None:
    store = _store_with_messages(tmp_path, 0)
    question = Message.user("hello")
    with store.hold(KEY):
        store.append(KEY, question, status="running")
        before = _journal_size(store)
        store.annotate(KEY, question.message_id, "PLAN", "the plan")
        assert _journal_size(store) == before  # nothing written for the note itself
        store.append(KEY, Message.assistant("hi", message_id=question.message_id), status="idle")
        assert _journal_size(store) > before
    log = FileConversationStore(tmp_path).turn_log(KEY, question.message_id)
    assert log.index("[PLAN]") < log.index("hi")  # in the order it was made


def test_a_note_left_at_the_end_of_a_turn_is_written_when_the_lock_is_let_go(
    tmp_path: Path,
) -> None:
    store = _store_with_messages(tmp_path, 1)
    message_id = store.recent(KEY, 1)[0].message_id
    with store.hold(KEY):
        store.annotate(KEY, message_id, "MEMORY", "after the answer")
        assert "after the answer" in store.turn_log(KEY, message_id)  # this thread sees it
    assert "after the answer" in FileConversationStore(tmp_path).turn_log(KEY, message_id)


def test_a_note_outside_a_turn_is_written_at_once(tmp_path: Path) -> None:
    store = _store_with_messages(tmp_path, 1)
    message_id = store.recent(KEY, 1)[0].message_id
    before = _journal_size(store)
    store.annotate(KEY, message_id, "NOTE", "at once")
    assert _journal_size(store) > before
    assert "at once" in FileConversationStore(tmp_path).turn_log(KEY, message_id)


def _open_files_under(folder: Path) -> dict[int, str]:
    """This process's open descriptors on files under *folder*: fd -> path."""
    found = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue  # the listing's own descriptor, closed meanwhile
        if target.startswith(f"{folder}/"):
            found[int(name)] = target
    return found


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_a_held_conversation_keeps_its_files_open_until_the_lock_is_let_go(
    tmp_path: Path,
) -> None:
    store = _store_with_messages(tmp_path, 0)
    folder = store.folder(KEY)
    question = Message.user("hello")
    with store.hold(KEY):
        store.append(KEY, question, status="running")
        opened = _open_files_under(folder)
        names = sorted(os.path.relpath(path, folder) for path in opened.values())
        turn_log = f"{question.message_id}/messages.log"
        assert names == sorted(["history.json", "journal.log", "meta.json", turn_log])
        store.append(KEY, Message.assistant("hi", message_id=question.message_id), status="idle")
        assert _open_files_under(folder) == opened  # written through the same descriptors
    assert _open_files_under(folder) == {}
    store.append(KEY, Message.user("outside a turn"))  # its own hold: opened and closed again
    assert _open_files_under(folder) == {}
    assert FileConversationStore(tmp_path).verify().ok


def test_recovery_inside_a_held_conversation_reopens_the_files_it_replaced(
    tmp_path: Path,
) -> None:
    store = _store_with_messages(tmp_path, 1)
    with store.hold(KEY):
        store.append(KEY, Message.user("before"))  # the files are open now
        store.recover(KEY.agent_id, full=True)  # rebuilds every view: new files, renamed in
        store.append(KEY, Message.user("after"))  # must go to the new files, not the old
    fresh = FileConversationStore(tmp_path)
    assert fresh.verify().ok
    history = json.loads((fresh.folder(KEY) / "history.json").read_text())
    assert [entry["content"] for entry in history] == ["message 0", "before", "after"]


# ------------------------------------------------------------------------------ the lock


def test_the_writer_lock_is_reentrant_and_excludes_other_threads(tmp_path: Path) -> None:
    store = _store_with_messages(tmp_path, 0)
    seen: list[str] = []

    def other_thread() -> None:
        try:
            with store.hold(KEY, timeout=0):
                seen.append("got it")
        except ConversationBusyError:
            seen.append("busy")

    with store.hold(KEY), store.hold(KEY, timeout=0):  # re-entered by the same thread
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
    assert seen == ["busy"]
    thread = threading.Thread(target=other_thread)
    thread.start()
    thread.join()
    assert seen == ["busy", "got it"]  # released by the outer hold's end


# ------------------------------------------------------------------------------ a turn's writes


def test_a_turn_without_side_effects_makes_two_journal_fsyncs_and_one_execution_state_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, conversation = make_root(tmp_path)
    script = {"plan": [{"goal": "g", "steps": [{"id": "r1", "type": "respond", "title": "t"}]}],
              "respond": ["Hello there."]}  # fmt: skip
    fsyncs: list[int] = []
    durable_sets: list[str] = []
    state_writes: list[str] = []
    real_fsync, real_set = os.fsync, SqliteConfigStore.set

    order: list[str] = []  # fsyncs and ExecutionState writes, in the order they came

    def counted_fsync(fd: int) -> None:
        fsyncs.append(fd)
        order.append("fsync")
        real_fsync(fd)

    def counted_set(self: SqliteConfigStore, key: str, value: Any, **kw: Any) -> Any:
        if kw.get("durable", True):
            durable_sets.append(key)
        if key.startswith("execution_state:"):
            state_writes.append(value["status"])
            order.append(f"state {value['status']}")
        return real_set(self, key, value, **kw)

    with Agent.open("launcher", data_dir=root, model=ScriptedModel(script)) as agent:
        agent.send("hello", conversation)  # warm-up
        monkeypatch.setattr(os, "fsync", counted_fsync)
        monkeypatch.setattr(SqliteConfigStore, "set", counted_set)
        result = agent.send("hello again", conversation)
        monkeypatch.undo()
        assert result.result.status == "completed"
        key = ConversationKey("launcher", conversation)
        checkpoints = agent.store.checkpoints(key)
        stored = agent.execution_state(conversation)
    assert len(fsyncs) == 2, fsyncs
    assert durable_sets == []
    # planning, the plan, the step running, the end: staged in the turn; the end state is
    # written once, at the turn's end, just before the answer's commit
    assert state_writes == ["completed"]
    assert order == ["fsync", "state completed", "fsync"]
    # one checkpoint per turn (the agent did not write a second one), holding the end state
    assert len(checkpoints) == 2
    assert stored is not None and stored.value.status == "completed"
    assert checkpoints[-1].message_id == result.result.message_id
    assert checkpoints[-1].execution_state_version == stored.version
    assert checkpoints[-1].execution_state == json.loads(stored.value.model_dump_json())
    assert checkpoints[-1].messages == 4 and checkpoints[-1].status == "completed"


def _rewind_execution_state(root: Path, key: str, row: tuple[str, int, str]) -> None:
    """What a power loss leaves: the row as its last durable write had it."""
    with sqlite3.connect(root / "agentkit.db") as db:
        db.execute(
            "UPDATE system_config SET value = ?, version = ?, updated_at = ? WHERE key = ?",
            (*row, key),
        )


def _row(root: Path, key: str) -> tuple[str, int, str]:
    with sqlite3.connect(root / "agentkit.db") as db:
        found = db.execute(
            "SELECT value, version, updated_at FROM system_config WHERE key = ?", (key,)
        ).fetchone()
    assert found is not None
    return (str(found[0]), int(found[1]), str(found[2]))


def test_after_a_power_loss_the_end_state_comes_back_from_the_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, conversation = make_root(tmp_path)
    key = f"execution_state:launcher:{conversation}"
    durable_rows: list[tuple[str, int, str]] = []
    real_set = SqliteConfigStore.set

    def remember_durable(self: SqliteConfigStore, name: str, value: Any, **kw: Any) -> Any:
        entry = real_set(self, name, value, **kw)
        if name == key and kw.get("durable", True):
            durable_rows.append(_row(root, key))
        return entry

    monkeypatch.setattr(SqliteConfigStore, "set", remember_durable)
    with Agent.open("launcher", data_dir=root, model=ScriptedModel(SCRIPT)) as agent:
        assert agent.send("launch apollo", conversation).text.startswith(CONSENT)
        assert agent.send("yes", conversation).text == FINAL
    monkeypatch.undo()
    last_durable = durable_rows[-1]  # the step's "done" save, right after the tool
    assert json.loads(last_durable[0])["status"] == "running"
    _rewind_execution_state(root, key, last_durable)

    with Agent.open("launcher", data_dir=root, model=ScriptedModel(SCRIPT)) as agent:
        result = agent.send("launch apollo", conversation)
        message_id = result.result.message_id
        log = agent.store.turn_log(ConversationKey("launcher", conversation), message_id)
    assert not result.text.startswith(INTERRUPTED), result.text  # the turn had finished
    assert result.text.startswith(CONSENT)  # a new request, planned as any other
    assert "restored from the last turn's checkpoint" in log


def test_a_state_written_after_the_checkpoint_is_never_replaced_by_it(tmp_path: Path) -> None:
    root, conversation = make_root(tmp_path)
    key = ConversationKey("launcher", conversation)
    with Agent.open("launcher", data_dir=root, model=ScriptedModel(SCRIPT)) as agent:
        agent.send("launch apollo", conversation)
        agent.send("no", conversation)
        checkpoint = agent.store.last_checkpoint(key)
        assert checkpoint is not None and checkpoint.execution_state_version > 1
        agent.clear_memory(conversation)  # a new flow starts at version 1, after the checkpoint
        memory = agent.memory
        assert not memory.restore_execution_state("launcher", conversation, checkpoint)
        assert agent.send("launch apollo", conversation).text.startswith(CONSENT)
        now = agent.execution_state(conversation)
        assert now is not None and now.version < checkpoint.execution_state_version
        assert not memory.restore_execution_state("launcher", conversation, checkpoint)
        assert agent.execution_state(conversation) == now


# ------------------------------------------------------------------------------ full load


def test_a_full_load_is_list_like_and_validates_each_message_on_first_read(
    tmp_path: Path,
) -> None:
    store = _store_with_messages(tmp_path, 5)
    loaded = FileConversationStore(tmp_path).messages(KEY)  # a new store, as a new process
    assert isinstance(loaded, LazyMessages)  # the view is current: parsed, not yet validated
    expected = [f"message {index}" for index in range(5)]
    assert len(loaded) == 5
    assert [m.content for m in loaded] == expected
    assert loaded[-1].content == "message 4" and loaded[1:3] == [loaded[1], loaded[2]]
    assert loaded == store.messages(KEY) == list(loaded)
    assert isinstance(loaded[0], Message) and loaded[0].timestamp.tzinfo is not None
    with pytest.raises(IndexError):
        loaded[5]


def test_a_history_entry_edited_in_place_is_read_from_the_journal(tmp_path: Path) -> None:
    """The checkpoint proves only the view's size: an entry edited by hand to an invalid
    value (same length) is noticed when read, and the journal's messages are given."""
    _store_with_messages(tmp_path, 3)
    history = tmp_path / "agents" / KEY.agent_id / "conversations" / KEY.conversation_id
    path = history / "history.json"
    data = path.read_bytes()
    assert data.count(b'"role":"user"') == 3
    path.write_bytes(data.replace(b'"role":"user"', b'"role":"nope"', 1))  # same size
    loaded = FileConversationStore(tmp_path).messages(KEY)
    assert isinstance(loaded, LazyMessages)
    assert [m.role for m in loaded] == ["user", "user", "user"]
    assert [m.content for m in loaded] == ["message 0", "message 1", "message 2"]


# ------------------------------------------------------------------------------ staged states


def test_a_turn_whose_stream_is_closed_leaves_no_staged_state_for_the_next(
    tmp_path: Path,
) -> None:
    """The states staged between durability points are this process's view of a running
    turn; a turn whose consumer walks away mid-plan never writes them, and the next turn
    starts from the stored state (as after a crash), planning the new request afresh."""
    root, conversation = make_root(tmp_path)
    plan = {"goal": "g", "steps": [{"id": "r1", "type": "respond", "title": "t"}]}
    script = {"plan": [plan, plan], "respond": ["first", "second"]}
    model = ScriptedModel(script)
    with Agent.open("launcher", data_dir=root, model=model) as agent:

        async def walk_away() -> None:
            stream = agent.send_message(conversation, "hello")
            async for event in stream:
                if type(event).__name__ == "PlanEvent":
                    break
            await stream.aclose()

        agent.loop.run(walk_away())
        staged = agent.execution_state(conversation)
        assert staged is not None and staged.value.is_active and staged.value.steps  # staged
        assert staged.version == 0  # never written
        result = agent.send("hello again", conversation)
        stored = agent.execution_state(conversation)
    assert result.result.status == "completed" and result.text == "first"
    assert stored is not None and stored.version == 1 and stored.value.status == "completed"
    assert stored.value.plan_id == f"plan-{result.result.message_id}"
    # the abandoned flow was never stored, so the new plan is not shown it as the previous one
    last_plan = [request for request in model.requests if request.purpose == "plan"][-1]
    assert not any("status: planning" in m.content for m in last_plan.messages)


def test_a_refused_write_drops_the_staged_state(tmp_path: Path) -> None:
    from agentkit.memory import ExecutionState, MemoryRepository
    from agentkit.store.kv import VersionConflictError

    with SqliteConfigStore(tmp_path / "agentkit.db") as kv:
        ours, theirs = MemoryRepository(kv), MemoryRepository(kv)
        state = ExecutionState(conversation_id="c-1", goal="ours", status="planning")
        ours.stage_execution_state("a-1", "c-1", state, version=0)
        assert ours.load_execution_state("a-1", "c-1").value.goal == "ours"  # type: ignore[union-attr]
        other = state.model_copy(update={"goal": "theirs"})
        theirs.save_execution_state("a-1", "c-1", other, expected_version=0)
        with pytest.raises(VersionConflictError):
            ours.save_execution_state("a-1", "c-1", state, expected_version=0)
        loaded = ours.load_execution_state("a-1", "c-1")
    assert loaded is not None and loaded.value.goal == "theirs" and loaded.version == 1


def test_a_reader_during_the_turn_sees_the_staged_end_state_before_it_is_written(
    tmp_path: Path,
) -> None:
    """The state a turn ends in is staged when its last step completes and written once, at
    the turn's end: a reader in this process (the plan view, pending approvals) sees it at
    once; the store gets it with the answer's commit."""
    root, conversation = make_root(tmp_path)
    script = {"plan": [{"goal": "g", "steps": [{"id": "r1", "type": "respond", "title": "t"}]}],
              "respond": ["Hello there."]}  # fmt: skip
    seen: list[tuple[str, int]] = []
    with Agent.open("launcher", data_dir=root, model=ScriptedModel(script)) as agent:

        async def turn() -> None:
            async for event in agent.send_message(conversation, "hello"):
                if event.type == "step_complete":  # the last step done: the flow is over
                    read = agent.execution_state(conversation)
                    assert read is not None
                    seen.append((read.value.status, read.version))

        agent.loop.run(turn())
        stored = agent.execution_state(conversation)
    assert seen == [("completed", 0)]  # the live state, not written yet
    assert stored is not None and (stored.value.status, stored.version) == ("completed", 1)
