"""The in-memory reference store: the contract's meaning, without files.

Used by tests and notebooks that want no disk, and as the reference the file store is checked
against (both pass tests/store_contract.py).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from agentkit.errors import ConversationBusyError, ConversationNotFoundError, UsageError
from agentkit.ids import check_id
from agentkit.store._checkpoint import TurnCheckpoint
from agentkit.store._records import (
    AnnotationRecord,
    CheckpointRecord,
    CreatedRecord,
    JournalRecord,
    MessageRecord,
    RecordEntry,
    StatusRecord,
    Views,
    fold,
)
from agentkit.store.base import (
    ConversationKey,
    ConversationStore,
    Prepare,
    Problem,
    TraceSink,
    VerifyReport,
    checked_journal,
)
from agentkit.store.forks import checkpoints_of, fork_records
from agentkit.store.records import ConversationRecord
from agentkit.types import ConversationMeta, ConversationStatus, Message, utc_now

__all__ = ["InMemoryConversationStore"]


@dataclass
class _Conversation:
    views: Views
    records: list[JournalRecord]
    lock: threading.RLock = field(default_factory=threading.RLock)
    #: message id -> the turn's trace lines
    traces: dict[str, list[str]] = field(default_factory=dict)


class _ListSink(TraceSink):
    def __init__(self, lines: list[str]) -> None:
        self._lines = lines

    def append(self, line: str) -> None:
        if "\n" in line:
            raise ValueError("a trace line must not contain a newline")
        self._lines.append(line)


class InMemoryConversationStore(ConversationStore):
    def __init__(self, *, lock_timeout: float = 10.0) -> None:
        self.lock_timeout = lock_timeout
        self._conversations: dict[ConversationKey, _Conversation] = {}
        self._guard = threading.Lock()

    def _get(self, key: ConversationKey) -> _Conversation:
        with self._guard:
            conversation = self._conversations.get(key)
        if conversation is None:
            raise ConversationNotFoundError(key.agent_id, key.conversation_id)
        return conversation

    def create(self, key: ConversationKey, title: str) -> ConversationMeta:
        record = CreatedRecord(
            seq=1,
            conversation_id=key.conversation_id,
            agent_id=key.agent_id,
            title=title,
            at=utc_now(),
        )
        with self._guard:
            if key in self._conversations:
                raise UsageError(f"conversation {key} already exists")
            self._conversations[key] = _Conversation(views=fold([record]), records=[record])
            return self._conversations[key].views.meta

    def exists(self, key: ConversationKey) -> bool:
        with self._guard:
            return key in self._conversations

    def conversations(self, agent_id: str) -> list[ConversationMeta]:
        check_id(agent_id, "agent")
        with self._guard:
            metas = [c.views.meta for k, c in self._conversations.items() if k.agent_id == agent_id]
        return sorted(metas, key=lambda m: (m.updated_at, m.conversation_id), reverse=True)

    def meta(self, key: ConversationKey) -> ConversationMeta:
        return self._get(key).views.meta

    def messages(self, key: ConversationKey) -> Sequence[Message]:
        return list(self._get(key).views.messages)

    def recent(self, key: ConversationKey, limit: int) -> list[Message]:
        if limit < 0:
            raise UsageError("limit must be >= 0")
        messages = self._get(key).views.messages
        return list(messages[len(messages) - limit :]) if limit else []

    def _write(self, key: ConversationKey, record: JournalRecord) -> ConversationMeta:
        conversation = self._get(key)
        with self.hold(key):
            conversation.records.append(record)
            conversation.views.apply(record)
            return conversation.views.meta

    def _next_seq(self, key: ConversationKey) -> int:
        return self._get(key).views.records + 1

    def append(
        self,
        key: ConversationKey,
        message: Message,
        *,
        status: ConversationStatus | None = None,
        checkpoint: TurnCheckpoint | None = None,
    ) -> ConversationMeta:
        with self.hold(key):
            meta = self._write(key, MessageRecord(seq=self._next_seq(key), message=message))
            if status is not None:
                record = StatusRecord(seq=self._next_seq(key), status=status, at=utc_now())
                meta = self._write(key, record)
            return self._write_checkpoint(key, checkpoint) if checkpoint else meta

    def set_status(
        self,
        key: ConversationKey,
        status: ConversationStatus,
        *,
        checkpoint: TurnCheckpoint | None = None,
    ) -> ConversationMeta:
        with self.hold(key):
            record = StatusRecord(seq=self._next_seq(key), status=status, at=utc_now())
            meta = self._write(key, record)
            return self._write_checkpoint(key, checkpoint) if checkpoint else meta

    def _write_checkpoint(
        self, key: ConversationKey, checkpoint: TurnCheckpoint
    ) -> ConversationMeta:
        meta = self._get(key).views.meta
        filled = checkpoint.model_copy(
            update={"messages": meta.stats.message_count, "status": meta.status}
        )
        return self._write(key, CheckpointRecord(seq=self._next_seq(key), checkpoint=filled))

    def annotate(self, key: ConversationKey, message_id: str, label: str, text: str) -> None:
        check_id(message_id, "message")
        with self.hold(key):
            record = AnnotationRecord(
                seq=self._next_seq(key),
                message_id=message_id,
                label=label,
                text=text,
                at=utc_now(),
            )
            self._write(key, record)

    def record_checkpoint(self, key: ConversationKey, checkpoint: TurnCheckpoint) -> None:
        with self.hold(key):
            self._write_checkpoint(key, checkpoint)

    def checkpoints(self, key: ConversationKey) -> list[TurnCheckpoint]:
        return checkpoints_of(list(self._get(key).records))

    def fork(
        self,
        source: ConversationKey,
        target: ConversationKey,
        *,
        title: str,
        at: str | None,
        prepare: Prepare | None = None,
    ) -> ConversationMeta:
        with self.hold(source, timeout=0):
            records, checkpoint = fork_records(
                list(self._get(source).records), source, target, title=title, at=at
            )
            if self.exists(target):
                raise UsageError(f"conversation {target} already exists")
            forked = _Conversation(views=fold(records), records=records)
            source_traces = self._get(source).traces
            forked.traces = {
                turn: list(source_traces[turn])
                for turn in forked.views.turns
                if turn in source_traces
            }
            if prepare is not None:
                prepare(checkpoint)
            with self._guard:
                if target in self._conversations:
                    raise UsageError(f"conversation {target} already exists")
                self._conversations[target] = forked
            return forked.views.meta

    def add_record(self, key: ConversationKey, record: ConversationRecord) -> None:
        with self.hold(key):
            count = self._get(key).views.message_count
            if record.start > count:
                raise UsageError(
                    f"a record of {key} starts at message {record.start}; it has {count}"
                )
            self._write(key, RecordEntry(seq=self._next_seq(key), record=record))

    def records(self, key: ConversationKey) -> list[ConversationRecord]:
        return [r.record for r in list(self._get(key).records) if isinstance(r, RecordEntry)]

    def journal(self, key: ConversationKey) -> list[JournalRecord]:
        with self.hold(key):
            return list(self._get(key).records)

    def restore(
        self,
        key: ConversationKey,
        records: Sequence[JournalRecord],
        traces: Mapping[str, Sequence[str]],
    ) -> ConversationMeta:
        views = checked_journal(key, records)
        restored = _Conversation(views=views, records=list(records))
        restored.traces = {
            check_id(t, "message"): list(lines) for t, lines in traces.items() if lines
        }
        with self._guard:
            if key in self._conversations:
                raise UsageError(f"conversation {key} already exists")
            self._conversations[key] = restored
        return views.meta

    def open_trace(self, key: ConversationKey, message_id: str) -> TraceSink:
        check_id(message_id, "message")
        return _ListSink(self._get(key).traces.setdefault(message_id, []))

    def trace(self, key: ConversationKey, message_id: str) -> list[str]:
        check_id(message_id, "message")
        return list(self._get(key).traces.get(message_id, ()))

    def turn_log(self, key: ConversationKey, message_id: str) -> str:
        check_id(message_id, "message")
        views = self._get(key).views
        if message_id not in views.turns:
            raise UsageError(f"conversation {key} has no turn {message_id!r}")
        return views.turn_log(message_id)

    def delete(self, key: ConversationKey) -> None:
        with self.hold(key), self._guard:
            del self._conversations[key]

    @contextmanager
    def hold(self, key: ConversationKey, timeout: float | None = None) -> Iterator[None]:
        conversation = self._get(key)
        wait = self.lock_timeout if timeout is None else timeout
        if not conversation.lock.acquire(timeout=wait):
            raise ConversationBusyError(key.agent_id, key.conversation_id, wait)
        try:
            with self._guard:
                deleted = self._conversations.get(key) is not conversation
            if deleted:  # deleted while we waited
                raise ConversationNotFoundError(key.agent_id, key.conversation_id)
            yield
        finally:
            conversation.lock.release()

    def recover(self, agent_id: str | None = None, *, full: bool = False) -> list[ConversationKey]:
        """Nothing survives a crash in memory, so there is never anything to repair."""
        if agent_id is not None:
            check_id(agent_id, "agent")
        return []

    def verify(self, agent_id: str | None = None) -> VerifyReport:
        if agent_id is not None:
            check_id(agent_id, "agent")
        with self._guard:
            keys = [k for k in self._conversations if agent_id in (None, k.agent_id)]
        # The views are kept by applying records one by one; re-folding checks that invariant.
        problems = [
            Problem(key.agent_id, key.conversation_id, "meta-mismatch", "views differ from records")
            for key in keys
            if fold(self._conversations[key].records).meta != self._conversations[key].views.meta
        ]
        return VerifyReport(conversations=len(keys), problems=tuple(problems))
