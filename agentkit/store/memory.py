"""The in-memory journal backend: the contract's meaning, without files.

Used by tests and notebooks that want no disk, and as the reference the other backends are
checked against (all pass tests/test_journal_backend.py and, through the one conversation
layer, tests/test_store_contract*.py). A conversation is its list of records, its metadata
and its turns' traces; the writer lease is a lock per conversation with an epoch.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from agentkit.errors import ConversationBusyError, ConversationNotFoundError, UsageError
from agentkit.store._records import JournalRecord, Views, turn_of
from agentkit.store.backend import JournalBackend, Lease, RecordKind, Scanned
from agentkit.store.conversation_store import ConversationStore
from agentkit.store.values import CallRecordSink, ConversationKey, Problem
from agentkit.types import ConversationMeta

__all__ = ["InMemoryConversationStore", "MemoryJournal"]


@dataclass
class _Conversation:
    meta: ConversationMeta
    records: list[JournalRecord]
    lock: threading.Lock = field(default_factory=threading.Lock)
    epoch: int = 0
    #: message id -> the turn's trace lines
    traces: dict[str, list[str]] = field(default_factory=dict)


class _MemoryLease(Lease):
    __slots__ = ("conversation",)

    def __init__(self, key: ConversationKey, conversation: _Conversation) -> None:
        super().__init__(key, conversation.meta, len(conversation.records), conversation.epoch)
        self.conversation = conversation


class _ListSink(CallRecordSink):
    def __init__(self, lines: list[str]) -> None:
        self._lines = lines

    def append(self, line: str) -> None:
        if "\n" in line:
            raise ValueError("a trace line must not contain a newline")
        self._lines.append(line)


class MemoryJournal(JournalBackend):
    """Conversations as lists of records in this process."""

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

    # -- the writer lease ------------------------------------------------------------------

    def acquire(self, key: ConversationKey, wait: float, *, brief: bool = False) -> Lease:
        conversation = self._get(key)
        if not conversation.lock.acquire(timeout=max(wait, 0)):
            raise ConversationBusyError(key.agent_id, key.conversation_id, wait)
        with self._guard:
            deleted = self._conversations.get(key) is not conversation
        if deleted:  # deleted while we waited
            conversation.lock.release()
            raise ConversationNotFoundError(key.agent_id, key.conversation_id)
        conversation.epoch += 1
        return _MemoryLease(key, conversation)

    def release(self, lease: Lease, *, failed: bool = False) -> None:
        own = _MemoryLease.own(lease)
        if own.held:
            own.held = False
            own.conversation.lock.release()

    # -- writes ----------------------------------------------------------------------------

    def append(
        self,
        lease: Lease,
        records: Sequence[JournalRecord],
        meta: ConversationMeta,
        *,
        durable: bool,
    ) -> None:
        own = _MemoryLease.own(lease)
        conversation = own.conversation
        if not own.held or conversation.epoch != own.epoch:
            raise own.stale(conversation.epoch)
        conversation.records.extend(records)
        conversation.meta = meta
        own.moved(meta, len(records))

    def create(
        self,
        key: ConversationKey,
        records: Sequence[JournalRecord],
        meta: ConversationMeta,
        traces: Mapping[str, Sequence[str]],
        prepare: Callable[[], None] | None = None,
    ) -> None:
        conversation = _Conversation(meta=meta, records=list(records))
        conversation.traces = {turn: list(lines) for turn, lines in traces.items() if lines}
        if self.exists(key):
            raise UsageError(f"conversation {key} already exists")
        if prepare is not None:
            prepare()
        with self._guard:
            if key in self._conversations:
                raise UsageError(f"conversation {key} already exists")
            self._conversations[key] = conversation

    def delete(self, lease: Lease) -> None:
        own = _MemoryLease.own(lease)
        with self._guard:
            if self._conversations.get(own.key) is own.conversation:
                del self._conversations[own.key]

    # -- reads -----------------------------------------------------------------------------

    def exists(self, key: ConversationKey) -> bool:
        with self._guard:
            return key in self._conversations

    def meta(self, key: ConversationKey) -> ConversationMeta:
        return self._get(key).meta

    def listing(self, agent_id: str) -> list[ConversationMeta]:
        with self._guard:
            return [c.meta for k, c in self._conversations.items() if k.agent_id == agent_id]

    def keys(self, agent_id: str | None) -> list[ConversationKey]:
        with self._guard:
            found = [k for k in self._conversations if agent_id in (None, k.agent_id)]
        return sorted(found, key=str)

    def read(
        self,
        key: ConversationKey,
        kinds: frozenset[RecordKind] | None = None,
        *,
        turn: str | None = None,
        last: int | None = None,
    ) -> list[JournalRecord]:
        records = list(self._get(key).records)  # a copy: appends after this are not seen
        found = [
            record
            for record in records
            if (kinds is None or record.kind in kinds) and (turn is None or turn_of(record) == turn)
        ]
        return found[-last:] if last is not None else found

    # -- traces ----------------------------------------------------------------------------

    def open_call_records(self, key: ConversationKey, message_id: str) -> CallRecordSink:
        return _ListSink(self._get(key).traces.setdefault(message_id, []))

    def call_records(self, key: ConversationKey, message_id: str) -> list[str]:
        return list(self._get(key).traces.get(message_id, ()))

    # -- verify ----------------------------------------------------------------------------

    def scan(self, key: ConversationKey) -> Scanned:
        records = list(self._get(key).records)
        return Scanned(records, len(records))

    def check(self, key: ConversationKey, views: Views, scanned: Scanned) -> list[Problem]:
        if self._get(key).meta == views.meta:
            return []
        detail = "the metadata differs from the records' fold"
        return [Problem(key.agent_id, key.conversation_id, "meta-mismatch", detail)]


class InMemoryConversationStore(ConversationStore):
    """The conversation store over :class:`MemoryJournal` (nothing survives the process)."""

    def __init__(self, *, lock_timeout: float = 10.0) -> None:
        super().__init__(MemoryJournal(lock_timeout=lock_timeout))
