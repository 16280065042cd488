"""The conversation store interface, and the report ``verify()`` returns.

Three implementations pass the same contract suite (tests/test_store_contract.py): the file
store (the seed's on-disk layout, crash-safe), an in-memory reference, and PostgreSQL
(``agentkit.store.postgres``, the ``postgres`` extra: N replicas sharing conversations).
Everything above the store (the Agent, the HTTP API, the workbench) talks to this interface
only.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from agentkit.errors import StoreError, UsageError
from agentkit.ids import check_id
from agentkit.store._checkpoint import TurnCheckpoint
from agentkit.store._records import CreatedRecord, JournalRecord, Views, fold
from agentkit.store.records import ConversationRecord
from agentkit.types import ConversationMeta, ConversationStatus, Message

__all__ = [
    "ConversationKey",
    "ConversationStore",
    "Prepare",
    "Problem",
    "ProblemKind",
    "StaleWriterError",
    "StoreUnavailableError",
    "TraceSink",
    "VerifyReport",
    "checked_journal",
]

Prepare = Callable[[TurnCheckpoint | None], None]
"""Called with a fork's checkpoint after every check and before the fork is visible."""


class StoreUnavailableError(StoreError):
    """The store's server cannot be reached now (down, restarting, no free connection);
    nothing was acknowledged. Retrying later may succeed (HTTP 503)."""


class StaleWriterError(StoreError):
    """A write of a writer that no longer holds the conversation was refused (fencing).

    The writer's lock was lost (its connection dropped) and another writer took the
    conversation since: ``epoch`` is the one this writer acquired, ``current`` the one the
    store holds now. Nothing of the refused write was stored."""

    def __init__(self, agent_id: str, conversation_id: str, epoch: int, current: int) -> None:
        self.agent_id = agent_id
        self.conversation_id = conversation_id
        self.epoch = epoch
        self.current = current
        super().__init__(
            f"write to {agent_id}/{conversation_id} refused: this writer's lock (epoch {epoch}) "
            f"was lost and another writer took the conversation (epoch {current})"
        )


@dataclass(frozen=True, slots=True)
class ConversationKey:
    """Which conversation: ``(agent_id, conversation_id)``, both checked on construction."""

    agent_id: str
    conversation_id: str

    def __post_init__(self) -> None:
        check_id(self.agent_id, "agent")
        check_id(self.conversation_id, "conversation")

    def __str__(self) -> str:
        return f"{self.agent_id}/{self.conversation_id}"


ProblemKind = Literal[
    "busy",
    "corrupt-record",
    "history-mismatch",
    "leftover",
    "meta-mismatch",
    "missing-file",
    "orphan-turn",
    "temp-file",
    "torn-tail",
    "turn-log-mismatch",
]


@dataclass(frozen=True, slots=True)
class Problem:
    """One inconsistency ``verify()`` found. ``conversation_id`` is empty for agent-level ones."""

    agent_id: str
    conversation_id: str
    kind: ProblemKind
    detail: str

    def __str__(self) -> str:
        where = f"{self.agent_id}/{self.conversation_id}" if self.conversation_id else self.agent_id
        return f"{where}: {self.kind}: {self.detail}"


@dataclass(frozen=True, slots=True)
class VerifyReport:
    conversations: int = 0
    problems: tuple[Problem, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return not self.problems


def checked_journal(key: ConversationKey, records: Sequence[JournalRecord]) -> Views:
    """The fold of *records* as the journal of *key* (what :meth:`ConversationStore.restore`
    accepts): it starts with *key*'s ``created`` record and numbers records 1, 2, …"""
    first = records[0] if records else None
    if not isinstance(first, CreatedRecord) or (first.agent_id, first.conversation_id) != (
        key.agent_id,
        key.conversation_id,
    ):
        raise UsageError(f"the journal of {key} must start with its own 'created' record")
    try:
        return fold(records)
    except ValueError as error:
        raise UsageError(f"the journal of {key} does not fold: {error}") from None


class TraceSink(ABC):
    """Where one turn's model-call trace goes, a JSON line at a time
    (:meth:`ConversationStore.open_trace`)."""

    @abstractmethod
    def append(self, line: str) -> None:
        """Add one record (one JSON object, no newline). A reader sees whole records only."""

    def close(self) -> None:  # noqa: B027 - nothing to release for most sinks
        """The turn is over (a later :meth:`append` opens the trace again)."""


class ConversationStore(ABC):
    """Conversations of agents: create, append, read, delete, and one writer at a time.

    Messages and status changes are acknowledged (the method returns) only once they are
    durable; turn-log notes ride along with the next of them. Writers on one
    conversation are serialised across threads and processes; a writer that waits longer than
    the store's lock timeout gets :class:`~agentkit.errors.ConversationBusyError`.
    """

    @abstractmethod
    def create(self, key: ConversationKey, title: str) -> ConversationMeta:
        """Create an empty conversation (status ``idle``). Fails if it exists."""

    @abstractmethod
    def exists(self, key: ConversationKey) -> bool: ...

    @abstractmethod
    def conversations(self, agent_id: str) -> list[ConversationMeta]:
        """Every conversation of *agent_id*, most recently updated first."""

    @abstractmethod
    def meta(self, key: ConversationKey) -> ConversationMeta: ...

    @abstractmethod
    def messages(self, key: ConversationKey) -> Sequence[Message]:
        """The whole history, oldest first (a read-only sequence; a long one may validate
        each message when it is first read)."""

    @abstractmethod
    def recent(self, key: ConversationKey, limit: int) -> list[Message]:
        """The last *limit* messages, oldest first, without reading the whole history."""

    @abstractmethod
    def append(
        self,
        key: ConversationKey,
        message: Message,
        *,
        status: ConversationStatus | None = None,
        checkpoint: TurnCheckpoint | None = None,
    ) -> ConversationMeta:
        """Append one message durably; return the updated metadata.

        With *status*, the conversation's status changes in the same commit (one durability
        point: a turn's user message with ``running``, its answer with the final status).
        With *checkpoint*, the finished turn's checkpoint is in that commit too (its
        ``messages`` and ``status`` are set to what they are after it).
        """

    @abstractmethod
    def set_status(
        self,
        key: ConversationKey,
        status: ConversationStatus,
        *,
        checkpoint: TurnCheckpoint | None = None,
    ) -> ConversationMeta:
        """Change the status durably (with *checkpoint*: as in :meth:`append`)."""

    @abstractmethod
    def annotate(self, key: ConversationKey, message_id: str, label: str, text: str) -> None:
        """Add a ``[LABEL]`` block to the turn's ``messages.log`` (not part of the history).

        Not a durability point: a note becomes durable with the conversation's next message or
        status change (a crash before that may lose it; it never loses a message)."""

    @abstractmethod
    def turn_log(self, key: ConversationKey, message_id: str) -> str:
        """The text of the turn's ``messages.log``."""

    @abstractmethod
    def delete(self, key: ConversationKey) -> None: ...

    @abstractmethod
    def hold(
        self, key: ConversationKey, timeout: float | None = None
    ) -> AbstractContextManager[None]:
        """Hold the conversation's writer lock across several writes (re-entrant)."""

    @abstractmethod
    def verify(self, agent_id: str | None = None) -> VerifyReport:
        """Check every conversation (of one agent, or all) without changing anything."""

    @abstractmethod
    def recover(self, agent_id: str | None = None, *, full: bool = False) -> list[ConversationKey]:
        """Repair what crashes left behind; return the conversations that were repaired."""

    # -- turn checkpoints and forks (agentkit.store.forks) --------------------------------------

    @abstractmethod
    def record_checkpoint(self, key: ConversationKey, checkpoint: TurnCheckpoint) -> None:
        """Append the checkpoint of a finished turn to the conversation's journal (its
        ``messages`` and ``status`` are set to the conversation's, as with ``append``)."""

    @abstractmethod
    def checkpoints(self, key: ConversationKey) -> list[TurnCheckpoint]:
        """The checkpoints of the conversation's finished turns, oldest first."""

    def last_checkpoint(self, key: ConversationKey) -> TurnCheckpoint | None:
        """The newest checkpoint (None: no turn has finished)."""
        found = self.checkpoints(key)
        return found[-1] if found else None

    @abstractmethod
    def fork(
        self,
        source: ConversationKey,
        target: ConversationKey,
        *,
        title: str,
        at: str | None,
        prepare: Prepare | None = None,
    ) -> ConversationMeta:
        """Create *target* as a fork of *source* at turn *at* (None: its last finished turn;
        ``FORK_START``: before the first), all or nothing; *source* is only read (its lock
        is taken without waiting: busy is an error). *prepare* runs before the fork is
        visible, with the checkpoint the fork ends at."""

    # -- typed records and traces -------------------------------------------------------------

    @abstractmethod
    def add_record(self, key: ConversationKey, record: ConversationRecord) -> None:
        """Keep a typed record (:mod:`agentkit.store.records`) in order with the messages,
        durably (a compression's, a reset's). Its ``start`` must not pass the history's end."""

    @abstractmethod
    def records(self, key: ConversationKey) -> list[ConversationRecord]:
        """The conversation's typed records, oldest first."""

    @abstractmethod
    def open_trace(self, key: ConversationKey, message_id: str) -> TraceSink:
        """Where turn *message_id*'s model calls are traced (the file store: its
        ``calls.jsonl``). Not a durability point: a line is durable with the conversation's
        next commit. A fork carries the traces of the turns it copies."""

    @abstractmethod
    def trace(self, key: ConversationKey, message_id: str) -> list[str]:
        """The trace lines of turn *message_id*, in order (empty: none kept)."""

    # -- moving conversations (agentkit export / import) -------------------------------------

    @abstractmethod
    def journal(self, key: ConversationKey) -> list[JournalRecord]:
        """The conversation's acknowledged records, oldest first, as its journal holds them
        (every message, status, note, checkpoint and typed record): what export copies."""

    @abstractmethod
    def restore(
        self,
        key: ConversationKey,
        records: Sequence[JournalRecord],
        traces: Mapping[str, Sequence[str]],
    ) -> ConversationMeta:
        """Create *key* from *records* (:func:`checked_journal`) and the turns' *traces*,
        exactly, all or nothing: what import writes. Fails if it exists."""

    def folder(self, key: ConversationKey) -> Path | None:
        """The conversation's folder on disk (where each turn's files go, ``calls.jsonl``
        traces included, see :mod:`agentkit.layout`); None for a store without files."""
        return None
