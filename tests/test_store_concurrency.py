"""One writer per conversation, across processes and threads.

* two processes x 500 appends: nothing lost, nothing duplicated, each writer's order kept;
* a writer that cannot get the lock in time gets ConversationBusyError and writes nothing;
* four threads x 50 appends through one store instance;
* a delete while another process waits for the lock: the waiter sees the conversation gone and
  does not bring it back.

Writers are forked children of the test process; they report through their exit code and a pipe.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import random
import select
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from agentkit.errors import ConversationBusyError, ConversationNotFoundError
from agentkit.store import ConversationKey, FileConversationStore
from agentkit.types import Message

from ._processes import fork_call, wait_exit

pytestmark = pytest.mark.slow

KEY = ConversationKey("busy-agent", "conv-shared")
_AT = datetime(2026, 4, 1, 8, 0, tzinfo=UTC)


def _message(writer: str, index: int) -> Message:
    return Message(
        role="user",
        content=f"{writer} #{index}",
        message_id=f"{writer}-{index}",
        timestamp=_AT + timedelta(milliseconds=index),
    )


def _assert_verified(store: FileConversationStore) -> None:
    report = store.verify()
    assert report.ok, "\n".join(map(str, report.problems))


def _check_writers(messages: list[Message], writers: dict[str, int]) -> int:
    """Each writer's messages present once, in its own order. Returns how often writers switched."""
    ids = [m.message_id for m in messages]
    assert len(ids) == len(set(ids)), "a message was written twice"
    for writer, count in writers.items():
        own = [m.content for m in messages if m.message_id.startswith(f"{writer}-")]
        assert own == [f"{writer} #{i}" for i in range(count)], f"{writer}: lost or reordered"
    assert len(messages) == sum(writers.values())
    owners = [i.rsplit("-", 1)[0] for i in ids]
    return sum(a != b for a, b in itertools.pairwise(owners))


# ----------------------------------------------------------------- a. two processes


def _append_many(root: Path, writer: str, count: int, start_fd: int) -> None:
    store = FileConversationStore(root, lock_timeout=120)
    os.read(start_fd, 1)  # both writers start together
    jitter = random.Random(writer)
    for index in range(count):
        store.append(KEY, _message(writer, index))
        time.sleep(jitter.random() * 0.002)  # let the other writer in now and then


def test_two_processes_append_500_each(tmp_path: Path) -> None:
    root = tmp_path / "data"
    FileConversationStore(root).create(KEY, "two writers")
    start_r, start_w = os.pipe()
    pids = [fork_call(_append_many, root, writer, 500, start_r) for writer in ("wa", "wb")]
    os.close(start_r)
    os.write(start_w, b"go")
    os.close(start_w)
    assert [wait_exit(pid) for pid in pids] == [0, 0], "a writer failed (see captured stderr)"

    store = FileConversationStore(root)
    messages = store.messages(KEY)
    switches = _check_writers(messages, {"wa": 500, "wb": 500})
    assert store.meta(KEY).stats.message_count == 1000
    assert store.recent(KEY, 5) == messages[-5:]
    _assert_verified(store)
    print(
        f"\ntwo processes: 1000 messages, 0 lost, 0 duplicated, writers alternated {switches} times"
    )


# ------------------------------------------------------------------- b. bounded wait


def _hold_until_told(root: Path, ready_fd: int, release_fd: int) -> None:
    store = FileConversationStore(root)
    with store.hold(KEY):
        os.write(ready_fd, b"H")
        os.read(release_fd, 1)  # returns when the parent writes or goes away


def test_second_writer_gets_busy_after_a_bounded_wait(tmp_path: Path) -> None:
    root = tmp_path / "data"
    FileConversationStore(root).create(KEY, "held")
    FileConversationStore(root).append(KEY, _message("before", 0))
    journal = root / "agents" / KEY.agent_id / "conversations" / KEY.conversation_id / "journal.log"
    ready_r, ready_w = os.pipe()
    release_r, release_w = os.pipe()
    pid = fork_call(_hold_until_told, root, ready_w, release_r)
    os.close(ready_w)
    os.close(release_r)
    try:
        assert os.read(ready_r, 1) == b"H"
        before = journal.read_bytes()
        impatient = FileConversationStore(root, lock_timeout=0.2)
        with pytest.raises(ConversationBusyError) as info:
            impatient.append(KEY, _message("late", 0))
        error = info.value
        assert (error.agent_id, error.conversation_id) == (KEY.agent_id, KEY.conversation_id)
        assert error.waited == 0.2
        assert f"{KEY.agent_id}/{KEY.conversation_id} is busy" in str(error)
        with pytest.raises(ConversationBusyError):
            impatient.set_status(KEY, "running")
        assert journal.read_bytes() == before  # nothing was written
        # Readers do not wait for the writer.
        assert [m.message_id for m in impatient.messages(KEY)] == ["before-0"]
    finally:
        os.write(release_w, b"x")
        os.close(release_w)
        os.close(ready_r)
        code = wait_exit(pid)
    assert code == 0
    # Once the holder is gone the same store writes normally.
    impatient.append(KEY, _message("late", 0))
    assert [m.message_id for m in impatient.messages(KEY)] == ["before-0", "late-0"]
    _assert_verified(impatient)


def test_a_killed_holder_does_not_block_forever(tmp_path: Path) -> None:
    root = tmp_path / "data"
    FileConversationStore(root).create(KEY, "holder dies")
    ready_r, ready_w = os.pipe()
    release_r, release_w = os.pipe()
    pid = fork_call(_hold_until_told, root, ready_w, release_r)
    os.close(ready_w)
    os.close(release_r)
    assert os.read(ready_r, 1) == b"H"
    os.kill(pid, 9)
    assert wait_exit(pid) == -9
    os.close(ready_r)
    os.close(release_w)
    store = FileConversationStore(root, lock_timeout=5)
    store.append(KEY, _message("after", 0))  # the kernel dropped the dead holder's flock
    assert [m.message_id for m in store.messages(KEY)] == ["after-0"]


# --------------------------------------------------------------------------- c. threads


def test_four_threads_append_50_each_through_one_store(tmp_path: Path) -> None:
    root = tmp_path / "data"
    store = FileConversationStore(root, lock_timeout=120)
    store.create(KEY, "threads")
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def work(writer: str) -> None:
        try:
            barrier.wait()
            for index in range(50):
                store.append(KEY, _message(writer, index))
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=work, args=(f"th{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors

    messages = store.messages(KEY)
    switches = _check_writers(messages, {f"th{i}": 50 for i in range(4)})
    assert store.meta(KEY).stats.message_count == 200
    _assert_verified(FileConversationStore(root))
    print(f"\nfour threads: 200 messages, writers alternated {switches} times")


# ------------------------------------------------------------- d. delete while waiting


def _append_and_report(root: Path, queued_fd: int, out_fd: int) -> None:
    """Append once; ``Q`` to *queued_fd* on finding the lock taken; the outcome to *out_fd*."""
    real_flock = fcntl.flock
    told = False

    def flock(fd: int, operation: int) -> None:
        nonlocal told
        try:
            real_flock(fd, operation)
        except BlockingIOError:
            if not told:
                told = True
                os.write(queued_fd, b"Q")
            raise

    fcntl.flock = flock  # this (forked) process only
    store = FileConversationStore(root, lock_timeout=60)
    try:
        store.append(KEY, _message("waiter", 0))
    except ConversationNotFoundError as error:
        os.write(out_fd, f"NotFound {error.agent_id}/{error.conversation_id}".encode())
    else:
        os.write(out_fd, b"appended")


def test_delete_while_another_process_waits(tmp_path: Path) -> None:
    root = tmp_path / "data"
    store = FileConversationStore(root)
    store.create(KEY, "doomed")
    store.append(KEY, _message("before", 0))
    conversations = root / "agents" / KEY.agent_id / "conversations"
    queued_r, queued_w = os.pipe()
    out_r, out_w = os.pipe()
    with store.hold(KEY):
        pid = fork_call(_append_and_report, root, queued_w, out_w)
        os.close(queued_w)
        os.close(out_w)
        # Wait (a generous hang guard, not a timing assertion) until the child found the lock
        # taken: it is then inside hold(), past its first existence check, polling the lock.
        ready, _, _ = select.select([queued_r], [], [], 60)
        assert ready, "the waiter never queued on the lock"
        assert os.read(queued_r, 1) == b"Q"
        store.delete(KEY)  # re-entrant: we already hold the lock
    assert wait_exit(pid) == 0
    os.close(queued_r)
    with os.fdopen(out_r, "rb") as out:
        said = out.read().decode()
    assert said == f"NotFound {KEY.agent_id}/{KEY.conversation_id}"
    assert not store.exists(KEY)
    assert not (conversations / KEY.conversation_id).exists()
    assert [p.name for p in conversations.iterdir() if not p.name.endswith(".lock")] == []
    assert store.conversations(KEY.agent_id) == []
    with pytest.raises(ConversationNotFoundError):
        store.messages(KEY)
    _assert_verified(store)
