"""Crash safety of FileConversationStore: SIGKILLs, deterministic crash points, I/O errors.

What is checked after every crash, on a fresh store after ``recover()``:

* every acknowledged message is present exactly once, in order; the message that was in flight
  is either fully present or absent;
* ``history.json`` and ``meta.json`` parse, and ``history.json`` equals the messages' JSON form;
* ``verify()`` is ok, no ``.*.tmp`` temp file and no half-created / half-deleted folder is left;
* the conversation accepts writes again.

Writers are forked children of the test process (already imported, so a kill costs
milliseconds); one test also kills a fresh interpreter running tests/_crash_worker.py.
"""

from __future__ import annotations

import contextlib
import errno
import importlib.util
import itertools
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from agentkit.errors import StoreError
from agentkit.store import ConversationKey, FileConversationStore
from agentkit.store._journal import scan_frames
from agentkit.types import Message

from ._processes import fork_call, wait_exit

pytestmark = pytest.mark.slow

_HERE = Path(__file__).resolve().parent
_WORKER_PATH = _HERE / "_crash_worker.py"
_spec = importlib.util.spec_from_file_location("_agentkit_crash_worker", _WORKER_PATH)
assert _spec is not None
assert _spec.loader is not None
worker = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(worker)

AGENT = "crash-agent"
CRASH_CODE = 137  # what the simulated crash exits with (like 128 + SIGKILL)
_AT = datetime(2026, 2, 1, 12, 0, tzinfo=UTC)


# ---------------------------------------------------------------------------------- helpers


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def _first_line(fd: int) -> bytes:
    """What *fd* gives until its first newline (or its end): read before a kill, kept."""
    data = b""
    while b"\n" not in data and (chunk := os.read(fd, 4096)):
        data += chunk
    return data


def _conv_dir(root: Path, key: ConversationKey) -> Path:
    return root / "agents" / key.agent_id / "conversations" / key.conversation_id


def _names(root: Path) -> Iterator[Path]:
    for folder, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            if name.startswith("."):
                yield Path(folder, name)


def _temp_files(root: Path) -> list[Path]:
    return [p for p in _names(root) if p.name.endswith(".tmp")]


def _leftovers(root: Path) -> list[Path]:
    return [p for p in _names(root) if ".creating-" in p.name or ".deleted-" in p.name]


def _assert_consistent(store: FileConversationStore, key: ConversationKey) -> list[Message]:
    """Check the files of *key* agree with each other and with the journal; return messages."""
    report = store.verify()
    assert report.ok, "verify() found problems:\n" + "\n".join(map(str, report.problems))
    root = store.root
    assert not _temp_files(root), _temp_files(root)
    assert not _leftovers(root), _leftovers(root)
    messages = store.messages(key)
    directory = _conv_dir(root, key)
    history = json.loads((directory / "history.json").read_bytes())
    assert history == [m.to_json_dict() for m in messages]
    meta = json.loads((directory / "meta.json").read_bytes())
    assert meta["conversationId"] == key.conversation_id
    assert meta["stats"]["messageCount"] == len(messages)
    assert store.recent(key, 3) == messages[-3:]
    return messages


# ------------------------------------------------------------ a. SIGKILL at random moments

KILLS = 220


def test_sigkill_at_random_moments_loses_no_acknowledged_message(tmp_path: Path) -> None:
    root = tmp_path / "data"
    key = ConversationKey(AGENT, "conv-kill")
    FileConversationStore(root).create(key, "killed again and again")
    rng = random.Random(20260201)
    expected: list[Message] = []  # what the previous recovery established
    stats: Counter[str] = Counter()
    directory = _conv_dir(root, key)

    for round_no in range(KILLS):
        read_fd, write_fd = os.pipe()
        pid = fork_call(
            worker.writer_loop, str(root), key.agent_id, key.conversation_id, round_no, write_fd
        )
        os.close(write_fd)
        # Every other round the kill's moment counts from the writer's first acknowledgement,
        # not from the fork: on a loaded machine a child may not even have started writing
        # within the random delay, and the test must still see acknowledged writes killed.
        seen = _first_line(read_fd) if rng.random() < 0.5 else b""
        time.sleep(rng.uniform(0.0, 0.07))
        os.kill(pid, signal.SIGKILL)
        code = wait_exit(pid)
        acks = (seen + _read_all(read_fd)).decode().splitlines()
        assert code == -signal.SIGKILL, f"round {round_no}: the writer ended by itself ({code})"
        stats["kills"] += 1
        stats["acked"] += len(acks)

        # What the kill left behind, before anyone repairs it.
        scan = scan_frames((directory / "journal.log").read_bytes())
        stats["torn journal tails repaired"] += scan.bad_offset is not None
        assert not scan.damage, f"round {round_no}: a kill damaged the middle of the journal"
        stats["temp files cleaned"] += len(_temp_files(root))
        with open(directory / "history.json", "rb") as history:
            history.seek(max(0, os.fstat(history.fileno()).st_size - 3))
            stats["history.json mid-update"] += history.read() not in (b"\n]\n", b"[]\n")

        store = FileConversationStore(root)
        stats["conversations recovered"] += len(store.recover())
        messages = _assert_consistent(store, key)

        plan = worker.planned(round_no, len(acks) + 1)
        assert acks == [f"ACK {m.role} {m.message_id}" for m in plan[: len(acks)]]
        assert messages[: len(expected)] == expected, f"round {round_no}: earlier messages changed"
        new = messages[len(expected) :]
        assert new in (plan[: len(acks)], plan[: len(acks) + 1]), (
            f"round {round_no}: acked {len(acks)}, found {[m.message_id for m in new]}"
        )
        stats["in-flight message durable"] += len(new) > len(acks)
        expected = messages

    # The conversation is still writable after all that.
    store = FileConversationStore(root)
    last = Message(role="user", content="after the storm", message_id="final", timestamp=_AT)
    store.append(key, last)
    assert _assert_consistent(store, key) == [*expected, last]

    print(
        f"\nSIGKILL test: {stats['kills']} kills, {stats['acked']} acked, "
        f"{len(expected)} messages kept, 0 lost; "
        f"{stats['torn journal tails repaired']} torn journal tails repaired, "
        f"{stats['temp files cleaned']} temp files cleaned, "
        f"{stats['conversations recovered']} recoveries, "
        f"{stats['in-flight message durable']} unacknowledged in-flight messages kept, "
        f"{stats['history.json mid-update']} kills left history.json without its closing bracket"
    )
    assert stats["acked"] > 0
    assert stats["conversations recovered"] > 0  # the kills did land mid-write


def test_sigkill_of_a_fresh_interpreter(tmp_path: Path) -> None:
    """The same check against a writer that is a new Python process (no forked state)."""
    root = tmp_path / "data"
    key = ConversationKey(AGENT, "conv-fresh")
    FileConversationStore(root).create(key, "killed from outside")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(_HERE.parent), *sys.path])}
    rng = random.Random(7)
    expected: list[Message] = []
    for round_no in range(1000, 1005):
        process = subprocess.Popen(
            [
                sys.executable,
                str(_WORKER_PATH),
                str(root),
                AGENT,
                key.conversation_id,
                str(round_no),
            ],
            stdout=subprocess.PIPE,
            env=env,
        )
        assert process.stdout is not None
        wanted = rng.randint(1, 6)
        acks: list[str] = []
        try:
            while len(acks) < wanted and (line := process.stdout.readline()):
                acks.append(line.decode().rstrip("\n"))
            time.sleep(rng.uniform(0.0, 0.01))
        finally:
            process.kill()
            rest = process.stdout.read()
            process.wait()
            process.stdout.close()
        acks += rest.decode().splitlines()
        assert process.returncode == -signal.SIGKILL, "the writer failed by itself"
        assert len(acks) >= wanted

        store = FileConversationStore(root)
        store.recover()
        messages = _assert_consistent(store, key)
        plan = worker.planned(round_no, len(acks) + 1)
        assert acks == [f"ACK {m.role} {m.message_id}" for m in plan[: len(acks)]]
        assert messages[: len(expected)] == expected
        assert messages[len(expected) :] in (plan[: len(acks)], plan[: len(acks) + 1])
        expected = messages


# ---------------------------------------------------------- b. deterministic crash points

_MUTATING = (
    *("write", "pwrite", "ftruncate", "truncate", "fsync"),
    *("replace", "rename", "mkdir", "rmdir", "unlink"),
)
_WRITES = ("write", "pwrite")


def _crash_on_call(at: int, *, torn: bool) -> None:
    """In this (child) process, die just before the *at*-th file-changing call.

    With *torn*, count only ``write``/``pwrite`` calls and let the fatal one write half of its
    bytes first, as a kill in the middle of a large write would.
    """
    calls = itertools.count(1)
    for name in _WRITES if torn else _MUTATING:
        real = getattr(os, name)

        def wrapper(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
            if next(calls) == at:
                if torn:
                    data = bytes(args[1])
                    _real(args[0], data[: len(data) // 2], *args[2:])
                os._exit(CRASH_CODE)
            return _real(*args, **kwargs)

        setattr(os, name, wrapper)


_STAMP = re.compile(r"^\[[^\]]+\] ", re.MULTILINE)
KEY = ConversationKey(AGENT, "conv-base")
NEW_KEY = ConversationKey(AGENT, "conv-new")


def _msg(role: str, message_id: str, content: str) -> Message:
    return Message(role=role, content=content, message_id=message_id, timestamp=_AT)  # type: ignore[arg-type]


def _build_base(root: Path) -> None:
    store = FileConversationStore(root)
    store.create(KEY, "base")
    store.append(KEY, _msg("user", "t1", "first question"))
    store.annotate(KEY, "t1", "SCENARIO", "warm-up")
    store.append(KEY, _msg("assistant", "t1", "first answer"))
    store.append(KEY, _msg("user", "t2", "second question, still open"))


OPS: dict[str, Callable[[FileConversationStore], object]] = {
    "create": lambda s: s.create(NEW_KEY, "brand new"),
    "append-new-turn": lambda s: s.append(KEY, _msg("user", "t3", "a new turn " * 50)),
    "append-reply": lambda s: s.append(KEY, _msg("assistant", "t2", "the reply\nwith lines")),
    "set-status": lambda s: s.set_status(KEY, "running"),
    "annotate": lambda s: s.annotate(KEY, "t2", "SCENARIO", "annotated later"),
    "delete": lambda s: s.delete(KEY),
}


def _observe(root: Path) -> dict[str, Any]:
    """What a user can see of both conversations (annotation times left out)."""
    store = FileConversationStore(root)
    seen: dict[str, Any] = {}
    for key in (KEY, NEW_KEY):
        if not store.exists(key):
            seen[key.conversation_id] = None
            continue
        meta = store.meta(key)
        messages = store.messages(key)
        seen[key.conversation_id] = {
            "title": meta.title,
            "status": meta.status,
            "stats": meta.stats,
            "messages": [m.to_json_dict() for m in messages],
            "turns": {
                m.message_id: _STAMP.sub("", store.turn_log(key, m.message_id)) for m in messages
            },
        }
    return seen


def _run_crashing(
    work: Path, at: int, action: Callable[[FileConversationStore], object], *, torn: bool = False
) -> int:
    def child() -> None:
        store = FileConversationStore(work)
        _crash_on_call(at, torn=torn)
        action(store)

    return wait_exit(fork_call(child))


def _recover_and_check(work: Path, old: dict[str, Any], new: dict[str, Any]) -> str:
    store = FileConversationStore(work)
    store.recover()
    report = store.verify()
    assert report.ok, "\n".join(map(str, report.problems))
    assert not _temp_files(work), _temp_files(work)
    assert not _leftovers(work), _leftovers(work)
    for key in (KEY, NEW_KEY):
        if store.exists(key):
            _assert_consistent(store, key)
    seen = _observe(work)
    assert seen in (old, new), f"neither the old nor the new state:\n{seen}"
    outcome = "old" if seen == old else "new"
    # Writes work again.
    if store.exists(KEY):
        extra = _msg("user", "t9", "after the crash")
        store.append(KEY, extra)
        assert store.messages(KEY)[-1] == extra
        assert store.verify().ok
    return outcome


@pytest.mark.parametrize("op", list(OPS))
def test_crash_at_every_file_operation(tmp_path: Path, op: str) -> None:
    base = tmp_path / "base"
    _build_base(base)
    old = _observe(base)
    reference = tmp_path / "reference"
    shutil.copytree(base, reference)
    OPS[op](FileConversationStore(reference))
    new = _observe(reference)
    assert new != old

    for torn in (False, True):
        outcomes: list[str] = []
        for at in itertools.count(1):
            work = tmp_path / f"{'torn' if torn else 'crash'}-{at}"
            shutil.copytree(base, work)
            code = _run_crashing(work, at, OPS[op], torn=torn)
            if code == 0:  # fewer than *at* calls: the operation completed
                assert _recover_and_check(work, old, new) == "new"
                break
            assert code == CRASH_CODE, f"{op}: the child failed at call {at} (see stderr)"
            outcomes.append(_recover_and_check(work, old, new))
            assert at < 200
        kind = "half-written write" if torn else "crash before call"
        shown = "".join("o" if o == "old" else "N" for o in outcomes) or "(no such call)"
        print(f"\n{op}, {kind} k=1..{len(outcomes)}: {shown}  (o: old state, N: new state)")
        # All or nothing, and once the commit point is passed it stays passed.
        assert outcomes == sorted(outcomes, key=("old", "new").index)
        if not torn:
            assert outcomes[0] == "old"
            assert "new" in outcomes  # a crash after the commit point, before the return


def test_crash_during_recovery_of_a_crashed_append(tmp_path: Path) -> None:
    """Recovery itself killed at every step still converges to the same state."""
    base = tmp_path / "base"
    _build_base(base)
    old = _observe(base)
    reference = tmp_path / "reference"
    shutil.copytree(base, reference)
    OPS["append-new-turn"](FileConversationStore(reference))
    new = _observe(reference)

    nested = 0
    for at in itertools.count(1):
        crashed = tmp_path / f"crashed-{at}"
        shutil.copytree(base, crashed)
        if _run_crashing(crashed, at, OPS["append-new-turn"]) == 0:
            break
        settled = tmp_path / f"settled-{at}"
        shutil.copytree(crashed, settled)
        outcome = _recover_and_check(settled, old, new)
        for again in itertools.count(1):
            work = tmp_path / f"recovery-{at}-{again}"
            shutil.copytree(crashed, work)
            code = _run_crashing(work, again, lambda s: s.recover())
            nested += 1
            assert _recover_and_check(work, old, new) == outcome
            if code == 0:
                break
            assert code == CRASH_CODE
        shutil.rmtree(tmp_path / f"crashed-{at}")
    print(f"\ncrash during recovery: {nested} nested crash points checked")
    assert nested > 0


# --------------------------------------------------------------- c. I/O error injection


@contextlib.contextmanager
def _failing(
    name: str, at: int | None, error: int, *, partial: bool = False
) -> Iterator[Counter[str]]:
    """Make the *at*-th call of ``os.<name>`` fail with *error* (None: only count the calls)."""
    real = getattr(os, name)
    count: Counter[str] = Counter()

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        count[name] += 1
        if count[name] == at:
            if partial:
                data = bytes(args[1])
                real(args[0], data[: len(data) // 2], *args[2:])
            raise OSError(error, os.strerror(error))
        return real(*args, **kwargs)

    setattr(os, name, wrapper)
    try:
        yield count
    finally:
        setattr(os, name, real)


FAULTS = [
    ("fsync", errno.EIO, False),
    ("write", errno.ENOSPC, False),
    ("write", errno.ENOSPC, True),
    ("pwrite", errno.ENOSPC, False),
    # no os.ftruncate: meta.json is cut only when it shrinks (see the test after this one)
    # no os.replace: an append writes meta.json in place (replace is creation and recovery's)
    ("mkdir", errno.ENOSPC, False),
]


@pytest.mark.parametrize(("name", "error", "partial"), FAULTS)
def test_io_error_in_append_is_reported_and_recovered(
    tmp_path: Path, name: str, error: int, partial: bool
) -> None:
    root = tmp_path / "data"
    key = ConversationKey(AGENT, "conv-io")
    store = FileConversationStore(root)
    store.create(key, "faulty disk")
    store.append(key, _msg("user", "t0", "before any fault"))
    with _failing(name, None, error) as count:  # how many such calls one append makes
        store.append(key, _msg("user", "t-count", "counting"))
    calls = count[name]
    assert calls >= 1

    outcomes = Counter[str]()
    for at in range(1, calls + 1):
        before = store.messages(key)
        message = _msg("user", f"t-{at}", f"fault at call {at} " * 20)
        failure: StoreError | None = None
        with _failing(name, at, error, partial=partial):
            try:
                store.append(key, message)
            except StoreError as raised:
                failure = raised
        acknowledged = failure is None  # the failed call was one the store may shrug off
        if failure is not None:
            assert isinstance(failure.__cause__, OSError), failure
            assert failure.__cause__.errno == error, failure
            assert "nothing acknowledged" in str(failure)

        fresh = FileConversationStore(root)
        fresh.recover()
        after = _assert_consistent(fresh, key)
        if acknowledged:
            assert after == [*before, message], f"call {at}: an acknowledged append is missing"
            outcomes["acknowledged"] += 1
        else:
            assert after in (before, [*before, message]), f"call {at}: earlier messages changed"
            outcomes["error, kept" if after != before else "error, dropped"] += 1

        # The store instance that saw the error keeps working.
        follow = _msg("assistant", f"t-{at}", "written after the fault")
        store.append(key, follow)
        assert store.messages(key) == [*after, follow]
        _assert_consistent(store, key)
    how = f"{errno.errorcode[error]}{' after writing half' if partial else ''}"
    print(f"\nos.{name} -> {how}: {calls} calls per append, outcomes {dict(outcomes)}")
    assert outcomes["error, kept"] + outcomes["error, dropped"] > 0  # the faults were reported


def test_an_io_error_cutting_a_shorter_meta_json_is_reported_and_recovered(
    tmp_path: Path,
) -> None:
    """``meta.json`` is rewritten in place and cut when the new one is shorter (a status
    ``running`` → ``idle``): a failure there is reported, nothing acknowledged, and the
    folder is consistent again at the next write."""
    root = tmp_path / "data"
    key = ConversationKey(AGENT, "conv-cut")
    store = FileConversationStore(root)
    store.create(key, "shrinking meta")
    store.set_status(key, "running")
    with _failing("ftruncate", None, errno.EIO) as count:
        store.set_status(key, "completed")  # longer: nothing to cut
    assert count["ftruncate"] == 0
    with (
        _failing("ftruncate", 1, errno.EIO),
        pytest.raises(StoreError, match="nothing acknowledged") as failure,
    ):
        store.set_status(key, "idle")
    assert isinstance(failure.value.__cause__, OSError)
    fresh = FileConversationStore(root)
    fresh.recover()
    assert fresh.meta(key).status in ("completed", "idle")
    _assert_consistent(fresh, key)
    store.append(key, _msg("user", "t1", "after the fault"))
    assert store.meta(key).status in ("completed", "idle")
    _assert_consistent(store, key)
    assert store.verify().ok


def test_after_a_failed_fsync_the_journal_is_rewritten_before_the_next_write(
    tmp_path: Path,
) -> None:
    """fsyncgate (reliability.md R6): a failed fsync may drop pages the kernel still shows us,
    so the store does not fsync the same file again and trust it: it rewrites the journal from
    the bytes it validated (a new file, fsynced, renamed into place)."""
    root = tmp_path / "data"
    key = ConversationKey(AGENT, "conv-fsyncgate")
    store = FileConversationStore(root)
    store.create(key, "fsyncgate")
    store.append(key, _msg("user", "t0", "before the fault"))
    journal = root / "agents" / AGENT / "conversations" / "conv-fsyncgate" / "journal.log"
    inode_before = journal.stat().st_ino
    failed = _msg("user", "t1", "its fsync fails")
    with _failing("fsync", 1, errno.EIO), pytest.raises(StoreError, match="nothing acknowledged"):
        store.append(key, failed)
    assert journal.stat().st_ino == inode_before  # nothing rewritten yet
    follow = _msg("assistant", "t1", "after the fault")
    store.append(key, follow)
    assert journal.stat().st_ino != inode_before  # rewritten from validated bytes, then appended
    messages = store.messages(key)
    assert messages[0].content == "before the fault"
    assert messages[-1] == follow
    assert store.verify().ok
    # Once rewritten, later writes append to the same file again.
    inode_after = journal.stat().st_ino
    store.append(key, _msg("user", "t2", "normal again"))
    assert journal.stat().st_ino == inode_after


def test_inside_a_turn_a_write_reported_failed_that_landed_is_numbered_past(
    tmp_path: Path,
) -> None:
    """A turn's write whose fsync fails is reported (nothing acknowledged), yet its record
    reached the journal; the turn's next write, under the same lease, finds it there after
    recovery and numbers its own records after it: nothing is overwritten or lost."""
    key = ConversationKey(AGENT, "conv-landed")
    store = FileConversationStore(tmp_path / "data")
    store.create(key, "landed")
    question = _msg("user", "t1", "its fsync fails")
    answer = _msg("assistant", "t1", "after the fault")
    with store.hold(key):
        with (
            _failing("fsync", 1, errno.EIO),
            pytest.raises(StoreError, match="nothing acknowledged"),
        ):
            store.append(key, question, status="running")
        meta = store.append(key, answer, status="completed")
    assert store.messages(key) == [question, answer]
    assert meta.stats.message_count == 2 and meta.status == "completed"
    assert [r.seq for r in store.journal(key)] == [1, 2, 3, 4, 5]
    assert store.verify().ok
