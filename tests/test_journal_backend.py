"""The journal backend contract: files, memory and PostgreSQL keep records the same way.

What the one conversation layer (agentkit.store.conversation_store) relies on of a backend
(agentkit.store.backend): a conversation created whole or not at all, records read back by
kind, by turn and from the end, a writer lease that excludes other writers and fences a
lease that is no longer held, traces, listing, delete, and a clean scan and check after
normal use. tests/test_store_contract*.py then run the whole store API over each.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from agentkit.errors import ConversationBusyError, ConversationNotFoundError, UsageError
from agentkit.store import ConversationKey, StaleWriterError
from agentkit.store._records import (
    AnnotationRecord,
    CreatedRecord,
    JournalRecord,
    MessageRecord,
    StatusRecord,
    fold,
)
from agentkit.store.backend import JournalBackend
from agentkit.store.files import FileJournal
from agentkit.store.memory import MemoryJournal
from agentkit.types import Message

from tests._postgres import postgres_server, postgres_url  # noqa: F401 (fixtures)

KEY = ConversationKey("agent-1", "conv-1")
_T0 = datetime(2026, 3, 23, 10, 12, 11, 993000, tzinfo=UTC)


@pytest.fixture(params=["file", "memory", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JournalBackend]:
    if request.param == "file":
        yield FileJournal(tmp_path, lock_timeout=5.0)
    elif request.param == "postgres":
        from agentkit.store._pg import PostgresDatabase
        from agentkit.store.postgres import PostgresJournal

        with PostgresDatabase(request.getfixturevalue("postgres_url")) as database:
            yield PostgresJournal(database, lock_timeout=5.0)
    else:
        yield MemoryJournal(lock_timeout=5.0)


def _created(key: ConversationKey = KEY) -> CreatedRecord:
    return CreatedRecord(
        seq=1, conversation_id=key.conversation_id, agent_id=key.agent_id, title="t", at=_T0
    )


def _message(seq: int, turn: str, role: str = "user") -> MessageRecord:
    message = Message(
        role=role,  # type: ignore[arg-type]
        content=f"{role} of {turn} ✓\nsecond line",
        message_id=turn,
        timestamp=_T0 + timedelta(seconds=seq),
    )
    return MessageRecord(seq=seq, message=message)


def _journal() -> list[JournalRecord]:
    """Two turns with notes and statuses."""
    at = _T0 + timedelta(seconds=1)
    return [
        _created(),
        _message(2, "msg-a"),
        StatusRecord(seq=3, status="running", at=at),
        AnnotationRecord(seq=4, message_id="msg-a", label="SESSION", text="scenario A", at=at),
        _message(5, "msg-a", "assistant"),
        StatusRecord(seq=6, status="completed", at=at),
        _message(7, "msg-b"),
        AnnotationRecord(seq=8, message_id="msg-b", label="PLAN", text="{}", at=at),
        _message(9, "msg-b", "assistant"),
    ]


def _create(backend: JournalBackend, records: list[JournalRecord]) -> None:
    backend.create(KEY, records, fold(records).meta, {})


def test_a_conversation_is_created_whole_and_read_back_by_kind_turn_and_end(
    backend: JournalBackend,
) -> None:
    records = _journal()
    meta = fold(records).meta
    backend.create(KEY, records, meta, {"msg-a": ['{"purpose": "plan"}', '{"n": 2}']})
    assert backend.exists(KEY)
    assert backend.meta(KEY) == meta
    assert backend.read(KEY) == records
    assert backend.read(KEY, frozenset({"message"})) == [records[i] for i in (1, 4, 6, 8)]
    assert backend.read(KEY, frozenset({"status", "annotation"}), last=2) == records[5:8:2]
    assert backend.read(KEY, turn="msg-a") == [records[1], records[3], records[4]]
    assert backend.read(KEY, frozenset({"annotation"}), turn="msg-b") == [records[7]]
    assert backend.read(KEY, last=1) == records[-1:]
    assert backend.read(KEY, turn="msg-none") == []
    assert [m.content for m in backend.messages(KEY)] == [
        r.message.content for r in records if isinstance(r, MessageRecord)
    ]
    assert backend.recent(KEY, 3) == [r.message for r in records[4::2]]
    assert backend.call_records(KEY, "msg-a") == ['{"purpose": "plan"}', '{"n": 2}']
    assert backend.call_records(KEY, "msg-b") == []
    assert [m.conversation_id for m in backend.listing("agent-1")] == ["conv-1"]
    assert backend.listing("agent-2") == []
    assert backend.keys(None) == [KEY]
    assert backend.keys("agent-2") == []


def test_a_create_is_all_or_nothing_and_never_over_an_existing_conversation(
    backend: JournalBackend,
) -> None:
    def fail() -> None:
        raise RuntimeError("prepare failed")

    records = _journal()
    with pytest.raises(RuntimeError, match="prepare failed"):
        backend.create(KEY, records, fold(records).meta, {"msg-a": ["{}"]}, fail)
    assert not backend.exists(KEY)
    for read in (backend.meta, backend.read, lambda key: backend.call_records(key, "msg-a")):
        with pytest.raises(ConversationNotFoundError):
            read(KEY)
    _create(backend, records[:2])
    with pytest.raises(UsageError, match="already exists"):
        _create(backend, records)
    assert backend.read(KEY) == records[:2]


def test_an_append_under_the_lease_moves_it_and_is_read_back(backend: JournalBackend) -> None:
    records = _journal()
    _create(backend, records[:2])
    lease = backend.acquire(KEY, 1.0)
    try:
        assert (lease.key, lease.records, lease.meta) == (KEY, 2, fold(records[:2]).meta)
        backend.append(lease, records[2:4], fold(records[:4]).meta, durable=False)
        backend.append(lease, records[4:], fold(records).meta, durable=True)
        assert lease.records == len(records)
        assert lease.meta == fold(records).meta
    finally:
        backend.release(lease)
    backend.release(lease)  # idempotent
    assert backend.read(KEY) == records
    assert backend.meta(KEY) == fold(records).meta
    with backend.exclusive(KEY, 1.0):  # a reader that must see it whole changes nothing
        scanned = backend.scan(KEY)
    assert scanned.records == records and not scanned.problems
    assert backend.check(KEY, fold(records), scanned) == []


def test_one_writer_at_a_time_and_a_lease_no_longer_held_never_writes(
    backend: JournalBackend,
) -> None:
    records = _journal()
    _create(backend, records[:2])
    first = backend.acquire(KEY, 1.0)
    taken = threading.Event()
    done = threading.Event()
    failures: list[BaseException] = []

    def other() -> None:
        try:
            with pytest.raises(ConversationBusyError):
                backend.acquire(KEY, 0.05)
        except BaseException as error:
            failures.append(error)
        taken.set()
        done.wait(10)

    thread = threading.Thread(target=other)
    thread.start()
    try:
        assert taken.wait(10)
        assert not failures, failures
    finally:
        done.set()
        thread.join()
    backend.release(first)
    second = backend.acquire(KEY, 1.0)
    try:
        assert second.epoch != first.epoch
        with pytest.raises(StaleWriterError) as caught:  # released: fenced out
            backend.append(first, records[2:3], fold(records[:3]).meta, durable=True)
        assert caught.value.epoch == first.epoch
        backend.append(second, records[2:3], fold(records[:3]).meta, durable=True)
    finally:
        backend.release(second)
    assert backend.read(KEY) == records[:3]
    with pytest.raises(ConversationNotFoundError):
        backend.acquire(ConversationKey("agent-1", "nope"), 0)


def test_a_delete_removes_the_records_and_the_traces(backend: JournalBackend) -> None:
    records = _journal()
    _create(backend, records)
    backend.open_call_records(KEY, "msg-a").append('{"a": 1}')
    other = ConversationKey("agent-1", "conv-2")
    backend.create(other, [_created(other)], fold([_created(other)]).meta, {})
    lease = backend.acquire(KEY, 1.0)
    try:
        backend.delete(lease)
    finally:
        backend.release(lease)
    assert not backend.exists(KEY)
    assert backend.keys("agent-1") == [other]
    for read in (backend.meta, backend.read, lambda key: backend.call_records(key, "msg-a")):
        with pytest.raises(ConversationNotFoundError):
            read(KEY)
    _create(backend, records[:1])  # the name is free again, with nothing of the old one
    assert backend.call_records(KEY, "msg-a") == []
    assert backend.read(KEY) == records[:1]


def test_traces_are_whole_lines_per_turn(backend: JournalBackend) -> None:
    _create(backend, _journal())
    sink = backend.open_call_records(KEY, "msg-b")
    sink.append('{"i": 1}')
    sink.close()
    backend.open_call_records(KEY, "msg-b").append('{"i": 2, "text": "多字节"}')
    with pytest.raises(ValueError, match="newline"):
        backend.open_call_records(KEY, "msg-b").append('{"a":\n1}')
    assert backend.call_records(KEY, "msg-b") == ['{"i": 1}', '{"i": 2, "text": "多字节"}']
    with pytest.raises(ConversationNotFoundError):
        backend.call_records(ConversationKey("agent-1", "nope"), "msg-b")
