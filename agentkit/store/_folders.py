"""The seam between the file store and the work done over its folders (forks, recovery, verify).

Why: :mod:`agentkit.store.forks` and :mod:`agentkit.store._sweep` need more of a store than the
:class:`~agentkit.store.base.ConversationStore` interface gives (the journal itself, the
folder a conversation lives in, a repair), but they must not reach into the file store's
private state. This protocol is all they may use; the file store implements it.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

from agentkit.store._records import JournalRecord
from agentkit.store.base import ConversationKey

__all__ = ["Folders"]


class Folders(Protocol):
    """What forks and recovery use of a store whose conversations are journal folders."""

    @property
    def lock_timeout(self) -> float: ...

    def hold(
        self, key: ConversationKey, timeout: float | None = None
    ) -> AbstractContextManager[None]: ...

    def folder(self, key: ConversationKey) -> Path:
        """The conversation's folder (it may not exist)."""
        ...

    def conversations_dir(self, agent_id: str) -> Path:
        """The folder holding the agent's conversation folders (checked under the root)."""
        ...

    def conversation_dirs(self, agent_id: str | None) -> list[Path]:
        """The conversations folders of one agent, or of every agent, that exist."""
        ...

    def journal(self, key: ConversationKey) -> list[JournalRecord]:
        """The conversation's acknowledged journal records, oldest first (hold its lock)."""
        ...

    def settled(self, folder: Path) -> bool:
        """The folder's views match its journal (nothing for a recovery to do)."""
        ...

    def repair(self, key: ConversationKey, *, full: bool) -> None:
        """Recover the conversation's views from its journal (all of them when *full*;
        else only if a write was interrupted). Hold its lock."""
        ...
