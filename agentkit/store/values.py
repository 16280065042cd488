"""The values the conversation store speaks in: which conversation, what ``verify()`` found,
the store's own errors, where a turn's call records go.

Shared by the one conversation layer (:mod:`agentkit.store.conversation_store`) and the
journal backends under it (:mod:`agentkit.store.backend`), so neither imports the other for
them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from agentkit.errors import StoreError, UsageError
from agentkit.ids import check_id
from agentkit.store._checkpoint import TurnCheckpoint
from agentkit.store._records import CreatedRecord, JournalRecord, Views, fold

__all__ = [
    "ConversationKey",
    "Prepare",
    "Problem",
    "ProblemKind",
    "StaleWriterError",
    "StoreUnavailableError",
    "CallRecordSink",
    "NOTE_KINDS",
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
    "earlier-format",
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


#: what ``verify`` reports without it being a problem: a view an earlier release wrote,
#: read by what it says and found to agree with the journal
NOTE_KINDS: frozenset[ProblemKind] = frozenset({"earlier-format"})


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """What ``verify`` found: *problems* (damage) and *notes* (kinds in :data:`NOTE_KINDS`:
    views in an earlier release's format that agree with the journal)."""

    conversations: int = 0
    problems: tuple[Problem, ...] = field(default_factory=tuple)
    notes: tuple[Problem, ...] = field(default_factory=tuple)

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


class CallRecordSink(ABC):
    """Where one turn's call records go, a JSON line at a time
    (:meth:`ConversationStore.open_call_records`)."""

    @abstractmethod
    def append(self, line: str) -> None:
        """Add one record (one JSON object, no newline). A reader sees whole records only."""

    def close(self) -> None:  # noqa: B027 - nothing to release for most sinks
        """The turn is over (a later :meth:`append` opens the call records again)."""
