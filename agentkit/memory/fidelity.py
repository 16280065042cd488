"""Fact retention: which known facts a TaskState (or a message window) still carries.

Compression is lossy by design: the older part of the chat window becomes a few TaskState
fields. This module answers one narrow question about that loss, the same way everywhere (the
compression lab, the threshold notebooks, the evaluation's fidelity probes): *does this known
fact still reach the next prompt?*

A fact is kept by a TaskState when it appears, case-insensitively and with runs of whitespace
treated as one space, as a substring of one of the fields that reach the next prompt as durable
memory (:data:`RETENTION_FIELDS`). Substring rather than equality because a summariser writes
facts inside longer sentences ("the user lives in Lisbon" keeps the fact "Lisbon"); the
price is that a short fact can be found by accident, so facts should be specific
("budget 3000 USDT", not "3000"). Nothing here calls a model: it is a plain, deterministic
check, so a probe that uses it can be trusted to fail when the fact is gone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from agentkit.errors import UsageError
from agentkit.memory.task_state import TaskState
from agentkit.memory.tokens import message_text
from agentkit.types import Message

__all__ = [
    "RETENTION_FIELDS",
    "FactRetention",
    "fact_location",
    "fact_retention",
    "facts_in_messages",
]

#: the TaskState fields searched, in this order (the first one holding the fact is reported)
RETENTION_FIELDS: tuple[str, ...] = (
    "pinned_facts",
    "important_facts",
    "current_goal",
    "open_loops",
)


def _folded(text: str) -> str:
    return " ".join(text.split()).casefold()


def _checked(facts: Iterable[str]) -> tuple[str, ...]:
    checked = tuple(facts)
    for index, fact in enumerate(checked):
        if not isinstance(fact, str) or not fact.strip():
            raise UsageError(f"fact {index} is empty: a known fact must be a non-empty string")
    return checked


def _field_texts(state: TaskState, name: str) -> tuple[str, ...]:
    value = getattr(state, name)
    return (value,) if isinstance(value, str) else tuple(value)


def fact_location(state: TaskState, fact: str) -> str | None:
    """The first of :data:`RETENTION_FIELDS` whose text contains *fact*, or None if none does."""
    needle = _folded(fact)
    if not needle:
        raise UsageError("a known fact must be a non-empty string")
    for name in RETENTION_FIELDS:
        if any(needle in _folded(text) for text in _field_texts(state, name)):
            return name
    return None


@dataclass(frozen=True, slots=True)
class FactRetention:
    """Which of the known facts a TaskState kept, and where it found each kept one."""

    kept: tuple[str, ...]
    lost: tuple[str, ...]
    #: fact → the TaskState field it was found in (kept facts only)
    where: tuple[tuple[str, str], ...] = ()

    @property
    def total(self) -> int:
        return len(self.kept) + len(self.lost)

    @property
    def ratio(self) -> float | None:
        """Kept / total, or None when there were no facts to look for."""
        return len(self.kept) / self.total if self.total else None


def fact_retention(state: TaskState, facts: Iterable[str]) -> FactRetention:
    """Check every known fact against *state* (see the module docstring for the rule).

    Raises :class:`~agentkit.errors.UsageError` for an empty fact (it would match anything).
    """
    kept: list[str] = []
    lost: list[str] = []
    where: list[tuple[str, str]] = []
    for fact in _checked(facts):
        location = fact_location(state, fact)
        if location is None:
            lost.append(fact)
        else:
            kept.append(fact)
            where.append((fact, location))
    return FactRetention(kept=tuple(kept), lost=tuple(lost), where=tuple(where))


def facts_in_messages(messages: Sequence[Message], facts: Iterable[str]) -> tuple[str, ...]:
    """The facts that appear (same rule) in the text of *messages*, e.g. the kept window."""
    texts = [_folded(message_text(message)) for message in messages]
    return tuple(fact for fact in _checked(facts) if any(_folded(fact) in text for text in texts))
