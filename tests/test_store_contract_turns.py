"""The store contract, part two: what a turn leaves besides its messages.

Checkpoints, forks, typed records (compressions, resets) and model-call traces, against
every implementation (file, memory, PostgreSQL) through the same fixture as
tests/test_store_contract.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from agentkit.errors import (
    ConversationBusyError,
    ConversationNotFoundError,
    InvalidIdError,
    TurnNotFinishedError,
    TurnNotFoundError,
    UsageError,
)
from agentkit.store import (
    ConversationKey,
    ConversationStore,
    FileConversationStore,
    TurnCheckpoint,
)
from agentkit.store._records import StatusRecord
from agentkit.store.conversation_store import CUT_SHORT
from agentkit.store.forks import FORK_START
from agentkit.store.records import CompressionRecord, ResetRecord, window_start
from agentkit.types import Message, utc_now

from tests._postgres import postgres_server, postgres_url  # noqa: F401 (fixtures)
from tests.test_store_contract import KEY, store, turn  # noqa: F401 (the fixture)

FORK = ConversationKey("agent-1", "fork-1")


def _finished(store: ConversationStore, index: int, **memory: object) -> str:  # noqa: F811
    """One whole turn with its checkpoint; its message id."""
    question, answer = turn(index)
    store.append(KEY, question, status="running")
    store.append(KEY, answer, status="completed")
    store.record_checkpoint(
        KEY,
        TurnCheckpoint(
            message_id=question.message_id,
            messages=0,
            status="idle",
            at=utc_now(),
            **memory,  # type: ignore[arg-type]
        ),
    )
    return question.message_id


def _compression(mid: str, start: int) -> CompressionRecord:
    return CompressionRecord(
        message_id=mid, at=utc_now(), start=start, summarised=start, kept=2, strategy="extractive"
    )


def test_checkpoints_name_each_finished_turn_with_its_count_and_memory(
    store: ConversationStore,  # noqa: F811
) -> None:
    store.create(KEY, "t")
    first = _finished(store, 1, task_state={"goal": "a"}, task_state_version=1)
    second = _finished(store, 2, task_state={"goal": "b"}, task_state_version=2)
    marks = store.checkpoints(KEY)
    assert [(c.message_id, c.messages, c.status) for c in marks] == [
        (first, 2, "completed"),
        (second, 4, "completed"),
    ]
    assert [c.task_state for c in marks] == [{"goal": "a"}, {"goal": "b"}]
    assert store.last_checkpoint(KEY) == marks[-1]


def test_a_fork_is_the_prefix_with_its_records_and_traces_and_leaves_the_source(
    store: ConversationStore,  # noqa: F811
) -> None:
    store.create(KEY, "t")
    first = _finished(store, 1)
    store.add_record(KEY, _compression(first, 1))
    sink = store.open_call_records(KEY, first)
    sink.append(json.dumps({"purpose": "plan", "raw": "{}"}))
    sink.close()
    second = _finished(store, 2)
    store.open_call_records(KEY, second).append('{"purpose": "answer"}')
    before = list(store.messages(KEY))

    meta = store.fork(KEY, FORK, title="what if", at=first)
    assert meta.forked_from is not None
    assert (meta.forked_from.conversation_id, meta.forked_from.message_id) == ("conv-1", first)
    assert list(store.messages(FORK)) == before[:2]
    assert [c.message_id for c in store.checkpoints(FORK)] == [first]
    # a record made after the turn's checkpoint (its compression ran after the answer) is
    # not part of the state the fork starts from: the checkpoint's memory predates it
    assert store.records(FORK) == []
    later = store.fork(KEY, ConversationKey("agent-1", "fork-2"), title="later", at=second)
    assert store.records(ConversationKey("agent-1", "fork-2")) == store.records(KEY)
    assert later.stats.message_count == 4
    assert store.call_records(FORK, first) == [json.dumps({"purpose": "plan", "raw": "{}"})]
    assert store.call_records(FORK, second) == []
    assert list(store.messages(KEY)) == before  # the source is only read
    assert store.turn_log(FORK, first) == store.turn_log(KEY, first)


def test_a_fork_at_the_start_is_empty_and_a_fork_of_the_last_turn_is_whole(
    store: ConversationStore,  # noqa: F811
) -> None:
    store.create(KEY, "t")
    _finished(store, 1)
    last = _finished(store, 2)
    empty = store.fork(KEY, FORK, title="empty", at=FORK_START)
    assert empty.stats.message_count == 0 and store.checkpoints(FORK) == []
    whole = store.fork(KEY, ConversationKey("agent-1", "fork-2"), title="whole", at=None)
    assert whole.stats.message_count == 4
    assert whole.forked_from is not None and whole.forked_from.message_id == last


def test_a_fork_refuses_bad_turns_busy_sources_and_taken_names(
    store: ConversationStore,  # noqa: F811
) -> None:
    store.create(KEY, "t")
    first = _finished(store, 1)
    question, _ = turn(2)
    store.append(KEY, question, status="running")  # a turn without its checkpoint
    with pytest.raises(TurnNotFoundError):
        store.fork(KEY, FORK, title="x", at="msg-nothere")
    with pytest.raises(TurnNotFinishedError):
        store.fork(KEY, FORK, title="x", at=question.message_id)
    store.create(FORK, "taken")
    with pytest.raises(UsageError, match="already exists"):
        store.fork(KEY, FORK, title="x", at=first)
    with pytest.raises(ConversationNotFoundError):
        store.fork(
            ConversationKey("agent-1", "nope"), ConversationKey("agent-1", "f3"), title="x", at=None
        )

    held = threading.Event()
    done = threading.Event()

    def writer() -> None:
        with store.hold(KEY):
            held.set()
            done.wait()  # held until the busy check is over (set in the finally below)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        held.wait()
        with pytest.raises(ConversationBusyError):
            store.fork(KEY, ConversationKey("agent-1", "f4"), title="x", at=first)
    finally:
        done.set()
        thread.join()
    assert not store.exists(ConversationKey("agent-1", "f4"))


def test_records_come_back_typed_in_order_and_move_the_window_start(
    store: ConversationStore,  # noqa: F811
) -> None:
    store.create(KEY, "t")
    assert store.records(KEY) == []
    first = _finished(store, 1)
    second = _finished(store, 2)
    compression = _compression(first, 2)
    reset = ResetRecord(message_id=second, at=utc_now(), start=4)
    store.add_record(KEY, compression)
    store.add_record(KEY, reset)
    found = store.records(KEY)
    assert found == [compression, reset]
    assert [type(r) for r in found] == [CompressionRecord, ResetRecord]
    assert window_start(found) == 4
    assert window_start([compression]) == 2
    assert window_start([compression], compressed=False) == 0
    assert store.verify().ok
    assert len(store.messages(KEY)) == 4  # a record is not a message


def test_a_record_past_the_history_or_of_a_missing_conversation_is_refused(
    store: ConversationStore,  # noqa: F811
) -> None:
    store.create(KEY, "t")
    mid = _finished(store, 1)
    with pytest.raises(UsageError, match="starts at message 3"):
        store.add_record(KEY, _compression(mid, 3))
    assert store.records(KEY) == []
    with pytest.raises(ConversationNotFoundError):
        store.add_record(ConversationKey("agent-1", "nope"), _compression(mid, 0))
    with pytest.raises(ConversationNotFoundError):
        store.records(ConversationKey("agent-1", "nope"))


def test_traces_keep_whole_lines_per_turn_in_order(store: ConversationStore) -> None:  # noqa: F811
    store.create(KEY, "t")
    mid = _finished(store, 1)
    other = _finished(store, 2)
    assert store.call_records(KEY, mid) == []
    sink = store.open_call_records(KEY, mid)
    lines = [json.dumps({"i": i, "text": "多字节 ✓"}, ensure_ascii=False) for i in range(5)]
    for line in lines[:3]:
        sink.append(line)
    sink.close()
    again = store.open_call_records(KEY, mid)  # a later record opens it again
    for line in lines[3:]:
        again.append(line)
    again.close()
    store.open_call_records(KEY, other).append('{"other": true}')
    assert store.call_records(KEY, mid) == lines
    assert store.call_records(KEY, other) == ['{"other": true}']
    with pytest.raises(ValueError, match="newline"):
        store.open_call_records(KEY, mid).append('{"a":\n1}')
    assert store.call_records(KEY, mid) == lines
    with pytest.raises(InvalidIdError):
        store.open_call_records(KEY, "../escape")
    with pytest.raises(InvalidIdError):
        store.call_records(KEY, "../escape")
    with pytest.raises(ConversationNotFoundError):
        store.call_records(ConversationKey("agent-1", "nope"), mid)


def test_deleting_a_conversation_deletes_its_records_and_traces(
    store: ConversationStore,  # noqa: F811
) -> None:
    store.create(KEY, "t")
    mid = _finished(store, 1)
    store.add_record(KEY, _compression(mid, 1))
    store.open_call_records(KEY, mid).append("{}")
    store.delete(KEY)
    store.create(KEY, "again")
    assert store.records(KEY) == []
    assert store.call_records(KEY, mid) == []


def test_a_turn_cut_short_is_marked_failed_by_the_next_writer(
    store: ConversationStore,  # noqa: F811
) -> None:
    """A turn's writer that goes away while the status is ``running`` (here: it lets go of
    the lease without ending the turn) left a turn cut short: the next writer's first commit
    names it in its turn log and marks it failed, whichever backend; reads change nothing."""
    store.create(KEY, "t")
    _finished(store, 1)
    question, _ = turn(2)
    with store.hold(KEY):
        store.append(KEY, question, status="running")
    assert store.meta(KEY).status == "running"
    assert store.verify().ok  # a reader, not a writer: nothing is marked
    store.fork(KEY, FORK, title="before", at=None)  # the source is only read
    assert store.meta(KEY).status == "running"

    after, _ = turn(3)
    with store.hold(KEY):
        store.append(KEY, after, status="running")
        assert store.meta(KEY).status == "running"  # this turn's own
    kinds = [(r.kind, getattr(r, "status", None)) for r in store.journal(KEY)[-6:]]
    assert kinds == [
        ("message", None),
        ("status", "running"),
        ("annotation", None),
        ("status", "failed"),
        ("message", None),
        ("status", "running"),
    ]
    log = store.turn_log(KEY, question.message_id)
    assert log.endswith(f"[ERROR]\n{CUT_SHORT}\n\n")
    store.annotate(KEY, after.message_id, "NOTE", "a write outside any turn")
    assert store.meta(KEY).status == "failed"  # the third turn was let go running too
    assert store.verify().ok


KILLED_WRITER = """
import sys, time
from agentkit.store import ConversationKey, FileConversationStore
from agentkit.types import Message

where = sys.argv[1]
if where.startswith("postgresql://"):
    from agentkit.store.postgres import PostgresConversationStore
    store = PostgresConversationStore(where)
else:
    store = FileConversationStore(where)
key = ConversationKey("agent-1", "conv-1")
question = Message.user("killed mid-turn", message_id="msg-killed")
with store.hold(key):
    store.append(key, question, status="running")
    store.annotate(key, "msg-killed", "SESSION", "scenario A")
    print("running", flush=True)
    time.sleep(600)
"""


@pytest.mark.parametrize("where", ["file", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_turn_killed_mid_way_is_marked_failed_when_its_lease_is_found_lost(
    where: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """SIGKILL a real process mid-turn (after its durable ``running`` point): its lock goes
    with it (the flock, the PostgreSQL session), and the next writer marks the turn failed."""
    target: ConversationStore
    if where == "postgres":
        from agentkit.store.postgres import PostgresConversationStore

        spec = request.getfixturevalue("postgres_url")
        target = PostgresConversationStore(spec, lock_timeout=10.0)
    else:
        spec = str(tmp_path)
        target = FileConversationStore(tmp_path, lock_timeout=10.0)
    target.create(KEY, "t")
    with subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(KILLED_WRITER), spec],
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "running"
            with pytest.raises(ConversationBusyError), target.hold(KEY, timeout=0):
                pass
        finally:
            child.kill()
    assert target.meta(KEY).status == "running"
    question = Message.user("the next turn")
    with target.hold(KEY, timeout=10):  # waits for the server to end the dead session
        target.append(KEY, question, status="running")
        target.append(
            KEY, Message.assistant("done", message_id=question.message_id), status="completed"
        )
    assert target.turn_log(KEY, "msg-killed").endswith(f"[ERROR]\n{CUT_SHORT}\n\n")
    statuses = [r.status for r in target.journal(KEY) if isinstance(r, StatusRecord)]
    assert statuses == ["running", "failed", "running", "completed"]
    assert target.verify().ok
    close = getattr(target, "close", None)
    if close is not None:
        close()
