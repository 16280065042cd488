"""The journal: torn tails are cut back to the last complete record, damage is never truncated.

* a journal cut at every byte of its last records recovers to exactly the complete prefix;
* a flipped byte in the middle raises CorruptJournalError, keeps a copy, truncates nothing;
* Hypothesis properties of the framing (``agentkit.store._journal``);
* damaged views over a clean journal are reported by ``verify()`` and rebuilt by ``recover()``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from agentkit.errors import CorruptJournalError
from agentkit.store import ConversationKey, FileConversationStore
from agentkit.store import _journal as journal_mod
from agentkit.store._journal import encode_frame, read_tail_frames, scan_frames
from agentkit.store._records import MessageRecord, decode_record, fold
from agentkit.types import Message, ToolCallRecord
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

KEY = ConversationKey("journal-agent", "conv-j")
_AT = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)


def _msg(role: str, message_id: str, content: str, minute: int, **extra: object) -> Message:
    return Message(
        role=role,  # type: ignore[arg-type]
        content=content,
        message_id=message_id,
        timestamp=_AT + timedelta(minutes=minute),
        **extra,  # type: ignore[arg-type]
    )


def _build(root: Path) -> list[Message]:
    """A conversation whose journal holds every record kind; the last record opens a turn."""
    store = FileConversationStore(root)
    store.create(KEY, "cut me")
    messages = [
        _msg("user", "t1", "Plan a trip to Lyon", 0),
        _msg("assistant", "t1", 'Sure — "Lyon"\nday 1: Vieux-Lyon', 1),
        _msg("user", "t2", "And a day in Annecy?", 2),
        _msg(
            "assistant",
            "t2",
            "Yes: train at 8:04 ✓",
            3,
            tool_calls=(ToolCallRecord(id="c1", name="trains", arguments={"to": "Annecy"}),),
        ),
        _msg("user", "t3", "Thanks!", 4),
    ]
    store.append(KEY, messages[0])
    store.annotate(KEY, "t1", "SCENARIO", "travel")
    store.append(KEY, messages[1])
    store.set_status(KEY, "running")
    store.append(KEY, messages[2])
    store.append(KEY, messages[3])
    store.set_status(KEY, "idle")
    store.append(KEY, messages[4])
    return messages


def _dir(root: Path) -> Path:
    return root / "agents" / KEY.agent_id / "conversations" / KEY.conversation_id


def _assert_views_match(store: FileConversationStore, messages: list[Message]) -> None:
    report = store.verify()
    assert report.ok, "\n".join(map(str, report.problems))
    assert store.messages(KEY) == messages
    assert store.recent(KEY, 2) == messages[-2:]
    directory = _dir(store.root)
    assert json.loads((directory / "history.json").read_bytes()) == [
        m.to_json_dict() for m in messages
    ]
    meta = json.loads((directory / "meta.json").read_bytes())
    assert meta["stats"]["messageCount"] == len(messages)
    assert not [p for p in directory.rglob(".*") if p.name.endswith(".tmp")]


# ------------------------------------------------------------------------- a. torn tails

CUT_RECORDS = 4  # the last record, and three before it


def _cut_points(starts: list[int], size: int) -> list[int]:
    """Every byte offset of the last record; of the three before it, every offset of the frame
    header and the newline, and every 7th byte of the payload."""
    ends = [*starts[1:], size]
    points = set(range(starts[-1], size + 1))
    for start, end in zip(starts[-CUT_RECORDS:-1], ends[-CUT_RECORDS:-1], strict=True):
        points.update(range(start, start + 20))
        points.update(range(start + 20, end - 2, 7))
        points.update((end - 2, end - 1))
    return sorted(points)


def test_journal_cut_at_every_byte_of_the_last_records(tmp_path: Path) -> None:
    base = tmp_path / "base"
    messages = _build(base)
    data = (_dir(base) / "journal.log").read_bytes()
    frames = scan_frames(data).frames
    ends = [f.offset for f in frames[1:]] + [len(data)]
    records = [decode_record(f.payload) for f in frames]
    cuts = _cut_points([f.offset for f in frames], len(data))
    assert cuts[0] == frames[-CUT_RECORDS].offset

    for cut in cuts:
        complete = sum(end <= cut for end in ends)
        kept = [r.message for r in records[:complete] if isinstance(r, MessageRecord)]
        expected = fold(records[:complete])

        work = tmp_path / "work"
        shutil.copytree(base, work)
        os.truncate(_dir(work) / "journal.log", cut)

        store = FileConversationStore(work)
        assert store.recover() == ([] if cut == len(data) else [KEY])
        assert (_dir(work) / "journal.log").stat().st_size == ends[complete - 1], cut
        _assert_views_match(store, kept)
        meta = store.meta(KEY)
        assert meta.status == expected.meta.status
        assert meta.stats == expected.meta.stats
        for message_id in expected.turns:
            assert store.turn_log(KEY, message_id) == expected.turn_log(message_id)
        # Nothing of a cut-off turn survives in the views, and the journal takes appends again.
        assert {p.name for p in _dir(work).iterdir() if p.is_dir()} == set(expected.turns)
        again = _msg("user", "t9", f"after a cut at byte {cut}", 9)
        store.append(KEY, again)
        _assert_views_match(FileConversationStore(work), [*kept, again])

        shutil.rmtree(work)
    assert len(messages) == 5


# ---------------------------------------------------------------- b. damage in the middle


def _flip_payload(line: bytearray) -> None:
    line[30] ^= 0x01


def _flip_length(line: bytearray) -> None:
    line[7] = ord("g")  # not a hex digit


def _flip_crc(line: bytearray) -> None:
    line[12] = ord("0") if line[12] != ord("0") else ord("1")


def _upper_crc(line: bytearray) -> None:
    # A checksum digit in upper case: lower-case only, so a case flip cannot pass unnoticed.
    letter = next(i for i in range(9, 17) if chr(line[i]) in "abcdef")
    line[letter] = ord(chr(line[letter]).upper())


def _newline_in_payload(line: bytearray) -> None:
    line[40] = ord("\n")


def _join_with_next(line: bytearray) -> None:
    line[-1] = ord(" ")  # the record's own newline


FLIPS: dict[str, Callable[[bytearray], None]] = {
    "payload-bit": _flip_payload,
    "length-digit": _flip_length,
    "crc-digit": _flip_crc,
    "crc-upper-case": _upper_crc,
    "newline-in-payload": _newline_in_payload,
    "lost-newline": _join_with_next,
}


def _damage(root: Path, flip: Callable[[bytearray], None]) -> tuple[Path, bytes, int]:
    journal = _dir(root) / "journal.log"
    data = journal.read_bytes()
    frames = scan_frames(data).frames
    victim = frames[3]  # three good records follow it
    end = frames[4].offset
    line = bytearray(data[victim.offset : end])
    flip(line)
    damaged = data[: victim.offset] + bytes(line) + data[end:]
    assert damaged != data
    assert len(damaged) == len(data)
    journal.write_bytes(damaged)
    return journal, damaged, victim.offset


@pytest.mark.parametrize("flip", list(FLIPS))
def test_damage_in_the_middle_is_reported_and_never_truncated(tmp_path: Path, flip: str) -> None:
    root = tmp_path / "data"
    written = _build(root)
    journal, damaged, offset = _damage(root, FLIPS[flip])
    store = FileConversationStore(root)

    # The views' sizes still match the checkpoint, so reading the whole history serves the
    # view (history.json was written from the record before it rotted) and reads no journal;
    # verify reads everything and finds the damage, as does any read of the journal itself.
    assert store.messages(KEY) == written
    with pytest.raises(CorruptJournalError) as info:
        store.backend._load_journal(journal.parent, end=len(damaged))
    error = info.value
    assert error.offset == offset
    assert error.path == journal
    assert f"corrupt journal record at byte {offset} of {journal}" in str(error)
    assert error.quarantine is not None
    assert error.quarantine.read_bytes() == damaged
    assert str(error.quarantine) in str(error)
    assert journal.read_bytes() == damaged  # nothing truncated

    report = store.verify()
    assert [p.kind for p in report.problems] == ["corrupt-record"]
    assert f"byte {offset}" in report.problems[0].detail
    assert journal.read_bytes() == damaged

    # When the views are stale too, recovery leaves it for a person (verify reports it) and
    # a writer, which recovers first, refuses.
    (_dir(root) / "meta.json").unlink()
    assert store.recover() == []
    assert [p.kind for p in store.verify().problems] == ["corrupt-record"]
    with pytest.raises(CorruptJournalError) as again:
        store.append(KEY, _msg("user", "t9", "must not be written", 9))
    assert again.value.offset == offset
    assert journal.read_bytes() == damaged
    assert {p.name for p in _dir(root).glob("journal.corrupt-*.log")} == {error.quarantine.name}


# ------------------------------------------------------------------ c. framing properties

_payload = st.binary(max_size=120).map(lambda b: b.replace(b"\n", b"")) | st.sampled_from(
    [b"", b'{"kind":"message"}', "é✓".encode() * 40]
)
_blocks = st.sampled_from([1, 2, 5, 17, 64, 64 * 1024])


def _boundaries(payloads: list[bytes]) -> list[int]:
    ends, position = [], 0
    for payload in payloads:
        position += len(encode_frame(payload))
        ends.append(position)
    return ends


def _tail(data: bytes, block: int, end: int | None = None) -> list[bytes]:
    old = journal_mod._TAIL_BLOCK
    journal_mod._TAIL_BLOCK = block
    try:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "journal.log"
            path.write_bytes(data)
            return list(read_tail_frames(path, end))
    finally:
        journal_mod._TAIL_BLOCK = old


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payloads=st.lists(_payload, max_size=12), block=_blocks, base=st.integers(0, 10**6))
def test_frames_round_trip(payloads: list[bytes], block: int, base: int) -> None:
    data = b"".join(encode_frame(p) for p in payloads)
    ends = _boundaries(payloads)
    scan = scan_frames(data, base)
    assert [f.payload for f in scan.frames] == payloads
    assert [f.offset for f in scan.frames] == [base + e for e in [0, *ends[:-1]]][: len(payloads)]
    assert scan.good_end == base + len(data)
    assert scan.bad_offset is None
    assert not scan.damage
    assert _tail(data, block) == payloads[::-1]
    for count, end in enumerate(ends, start=1):
        assert _tail(data, block, end) == payloads[:count][::-1]


@settings(max_examples=200, deadline=None)
@given(payloads=st.lists(_payload, min_size=1, max_size=10), block=_blocks, data=st.data())
def test_any_truncation_is_a_clean_prefix(
    payloads: list[bytes], block: int, data: st.DataObject
) -> None:
    whole = b"".join(encode_frame(p) for p in payloads)
    ends = _boundaries(payloads)
    cut = data.draw(st.integers(0, len(whole)), label="cut")
    complete = sum(end <= cut for end in ends)
    scan = scan_frames(whole[:cut])
    assert [f.payload for f in scan.frames] == payloads[:complete]
    assert scan.damage is False
    assert scan.good_end == ([0, *ends][complete])
    if cut in (0, *ends):
        assert scan.bad_offset is None
    else:
        assert scan.bad_offset == scan.good_end
        assert scan.bad_reason == "torn record"
    # Read backwards, a torn tail of any length is skipped (the newest complete record first).
    assert _tail(whole[:cut], block) == payloads[:complete][::-1]


@settings(max_examples=200, deadline=None)
@given(payloads=st.lists(_payload, min_size=3, max_size=8), data=st.data())
def test_a_flipped_bit_before_the_tail_is_damage(
    payloads: list[bytes], data: st.DataObject
) -> None:
    whole = bytearray(b"".join(encode_frame(p) for p in payloads))
    starts = [0, *_boundaries(payloads)]
    victim = data.draw(st.integers(0, len(payloads) - 3), label="record")
    position = data.draw(st.integers(starts[victim], starts[victim + 1] - 1), label="byte")
    whole[position] ^= 1 << data.draw(st.integers(0, 7), label="bit")
    scan = scan_frames(bytes(whole))
    assert [f.payload for f in scan.frames] == payloads[:victim]
    assert scan.bad_offset == starts[victim]
    assert scan.damage is True


# ---------------------------------------------------- d. damaged views, clean journal


def _delete_history(directory: Path) -> None:
    (directory / "history.json").unlink()


def _garbage_meta(directory: Path) -> None:
    (directory / "meta.json").write_bytes(b"{not json")


def _truncate_history(directory: Path) -> None:
    path = directory / "history.json"
    os.truncate(path, path.stat().st_size // 2)


def _edit_history_in_place(directory: Path) -> None:
    path = directory / "history.json"
    path.write_bytes(path.read_bytes().replace(b"Lyon", b"Nice"))  # same size, still JSON


def _edit_meta(directory: Path) -> None:
    path = directory / "meta.json"
    meta = json.loads(path.read_bytes())
    meta["title"] = "renamed behind the store's back"
    path.write_text(json.dumps(meta))


def _truncate_turn_log(directory: Path) -> None:
    os.truncate(directory / "t1" / "messages.log", 10)


def _delete_turn_log(directory: Path) -> None:
    (directory / "t2" / "messages.log").unlink()


def _stray_temp(directory: Path) -> None:
    (directory / ".history.json.0badf00d.tmp").write_bytes(b"[\n")


def _orphan_turn(directory: Path) -> None:
    (directory / "t-ghost").mkdir()
    (directory / "t-ghost" / "messages.log").write_text(
        "[2026-01-01T00:00:00.000Z] [USER]\nboo\n\n"
    )


def _leftover_create(directory: Path) -> None:
    (directory.parent / ".conv-x.creating-0a0b0c0d").mkdir()
    (directory.parent / ".conv-x.creating-0a0b0c0d" / "journal.log").write_bytes(b"")


# damage, the problem verify() reports, whether the cheap recover() sees it
# (False: only recover(full=True) does, because journal and history sizes still match).
VIEW_DAMAGE: dict[str, tuple[Callable[[Path], None], str, bool]] = {
    "history.json deleted": (_delete_history, "missing-file", True),
    "meta.json garbage": (_garbage_meta, "missing-file", True),
    "history.json truncated": (_truncate_history, "history-mismatch", True),
    "history.json edited in place": (_edit_history_in_place, "history-mismatch", False),
    "meta.json edited": (_edit_meta, "meta-mismatch", False),
    "messages.log truncated": (_truncate_turn_log, "turn-log-mismatch", False),
    "messages.log deleted": (_delete_turn_log, "turn-log-mismatch", False),
    "stray temp file": (_stray_temp, "temp-file", False),
    "orphan turn folder": (_orphan_turn, "orphan-turn", False),
    "interrupted create": (_leftover_create, "leftover", True),
}


@pytest.mark.parametrize("damage", list(VIEW_DAMAGE))
def test_damaged_views_are_reported_and_rebuilt(tmp_path: Path, damage: str) -> None:
    root = tmp_path / "data"
    messages = _build(root)
    directory = _dir(root)
    pristine = {
        p.relative_to(directory): p.read_bytes() for p in directory.rglob("*") if p.is_file()
    }
    journal = (directory / "journal.log").read_bytes()
    breaker, kind, cheap = VIEW_DAMAGE[damage]
    breaker(directory)

    store = FileConversationStore(root)
    report = store.verify()
    assert kind in {p.kind for p in report.problems}, report.problems

    store.recover()
    if not cheap:
        # The cheap check (journal + history sizes against the checkpoint) cannot see this one.
        assert kind in {p.kind for p in store.verify().problems}
        store.recover(full=True)
    _assert_views_match(store, messages)
    assert (directory / "journal.log").read_bytes() == journal
    rebuilt = {
        p.relative_to(directory): p.read_bytes() for p in directory.rglob("*") if p.is_file()
    }
    assert rebuilt == pristine
    assert not list(directory.parent.glob(".*.creating-*"))


def test_a_kill_during_the_events_cache_write_leaves_verify_clean_and_the_next_turn_sweeps_it(
    tmp_path: Path,
) -> None:
    """kill -9 between the turn events cache's temp write and its rename (serve --workers):
    the cache is never fsynced nor part of the conversation, so its temp file is no problem
    for verify; the conversation's next turn removes it. Any other temp file still is one."""
    from agentkit.store.file_events import FileTurnEvents
    from agentkit.store.turn_events import StoredEvent

    root = tmp_path / "data"
    _build(root)
    directory = _dir(root)
    (directory / ".turn-events.log.0badf00d.tmp").write_bytes(b"msg-1\t1\tsession\t{}")
    store = FileConversationStore(root)
    assert not store.verify().problems
    events = FileTurnEvents(store)
    try:
        events.append(KEY, "msg-2", [StoredEvent(1, "session", "{}")])
    finally:
        events.close()
    assert not list(directory.glob(".turn-events.log.*.tmp"))
    assert (directory / "turn-events.log").read_bytes() == b"msg-2\t1\tsession\t{}\n"
    _stray_temp(directory)
    assert {p.kind for p in store.verify().problems} == {"temp-file"}


def test_a_create_or_delete_still_running_in_another_process_is_no_leftover(
    tmp_path: Path,
) -> None:
    """Another worker opening the agent (it recovers) leaves the temp folders of a live
    process alone, and removes those of a dead one."""
    root = tmp_path / "data"
    _build(root)
    conversations = _dir(root).parent
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)  # fmt: skip
    dead = int(finished.stdout)
    alive = [conversations / f".conv-x.creating-{os.getpid()}-0a0b0c0d",
             conversations / f".conv-y.deleted-{os.getpid()}-0a0b0c0e"]  # fmt: skip
    gone = [conversations / f".conv-x.creating-{dead}-0a0b0c0f",
            conversations / f".conv-y.deleted-{dead}-0a0b0c10"]  # fmt: skip
    for folder in (*alive, *gone):
        folder.mkdir()
    store = FileConversationStore(root)
    assert {p.kind for p in store.verify().problems} == {"leftover"}
    assert len(store.verify().problems) == len(gone)
    store.recover()
    assert [p.exists() for p in (*alive, *gone)] == [True, True, False, False]


def test_one_corrupt_conversation_does_not_stop_recovery_of_the_others(tmp_path: Path) -> None:
    root = tmp_path / "data"
    _build(root)
    other = ConversationKey(KEY.agent_id, "conv-healthy")
    store = FileConversationStore(root)
    store.create(other, "healthy")
    store.append(other, _msg("user", "h1", "still here", 1))
    _damage(root, _flip_payload)
    for key in (KEY, other):  # a crash left both dirty
        folder = root / "agents" / key.agent_id / "conversations" / key.conversation_id
        (folder / "meta.json").unlink()
    repaired = FileConversationStore(root).recover()
    assert repaired == [other]
    assert [m.content for m in store.messages(other)] == ["still here"]
    kinds = {(p.conversation_id, p.kind) for p in store.verify().problems}
    assert kinds == {(KEY.conversation_id, "corrupt-record")}
