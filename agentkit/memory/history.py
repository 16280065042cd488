"""The chatHistory window: the recent raw messages of one conversation, in memory.

This module is the one chat window every part uses: the planner's prompt context and its
memory upkeep, a chat model's in-memory transcript (scenario B) and the compression lab.

:func:`chat_window` says which stored messages are in the window: those from where the
conversation's typed records (:mod:`agentkit.store.records`: a ``/clear``, a compression) say
it starts, without system messages (the older part lives on in TaskState, or was cleared).
:class:`ChatHistory` holds a window in memory, capped at ``max_turns * 2`` messages (a
turn is a user message and its reply). Neither is the source of truth: the conversation
store is, and :meth:`ChatHistory.rebuild` refills the window from it when a session is
restored.

Invariant: the window never starts with an orphan tool result. An assistant message that made
tool calls and the ``tool`` messages that follow it (its results) stay together; trimming and
compression cut only at a :func:`tool_safe_cut` boundary.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from agentkit.errors import UsageError
from agentkit.types import Message

__all__ = [
    "ChatHistory",
    "chat_window",
    "kept_from",
    "tool_safe_cut",
]


def chat_window(messages: Sequence[Message], start: int = 0) -> list[Message]:
    """The window of a stored history (oldest first): the messages from index *start* (where
    the conversation's records say it begins, :func:`agentkit.store.records.window_start`,
    made relative to *messages*), without system messages."""
    return [m for m in messages[max(0, start) :] if m.role != "system"]


def kept_from(messages: Sequence[Message], kept: int) -> int:
    """The index in *messages* of the first of its last *kept* non-system messages (where a
    window that keeps them starts; ``len(messages)`` when *kept* is 0)."""
    if kept <= 0:
        return len(messages)
    seen = 0
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role != "system":
            seen += 1
            if seen == kept:
                return index
    return 0


def tool_safe_cut(messages: Sequence[Message], cut: int) -> int:
    """Move *cut* (the index of the first kept message) so no tool result is separated from
    the assistant message that called it.

    The cut moves earlier, keeping the whole call/result group; if that reaches the start
    (a group that begins the sequence), it moves later, past the group's results instead, so
    what is kept never starts with a ``tool`` message.
    """
    count = len(messages)
    cut = max(0, min(cut, count))
    earlier = cut
    while 0 < earlier < count and messages[earlier].role == "tool":
        earlier -= 1
    if earlier > 0 or (cut == 0 and (count == 0 or messages[0].role != "tool")):
        return earlier
    return _skip_tool_results(messages, cut)


def _skip_tool_results(messages: Sequence[Message], index: int) -> int:
    while index < len(messages) and messages[index].role == "tool":
        index += 1
    return index


class ChatHistory:
    """The recent messages of one conversation, oldest first, at most ``max_turns * 2``."""

    def __init__(self, max_turns: int, messages: Iterable[Message] = ()) -> None:
        if max_turns < 1:
            raise UsageError(f"max_turns must be at least 1, not {max_turns}")
        self.max_turns = max_turns
        self._messages: list[Message] = []
        self.rebuild(messages)

    @classmethod
    def of(cls, stored: Sequence[Message], max_turns: int, start: int = 0) -> ChatHistory:
        """The window of a stored history from *start* (see :func:`chat_window`), capped."""
        return cls(max_turns, chat_window(stored, start))

    @property
    def max_messages(self) -> int:
        return self.max_turns * 2

    @property
    def messages(self) -> list[Message]:
        """A copy of the window (changing it does not change the history)."""
        return list(self._messages)

    def __len__(self) -> int:
        return len(self._messages)

    def _trim(self) -> None:
        # Over the cap, the oldest go; a tool result whose call went goes with it.
        cut = max(0, len(self._messages) - self.max_messages)
        del self._messages[: _skip_tool_results(self._messages, cut)]

    def add(self, message: Message) -> None:
        self._messages.append(message)
        self._trim()

    def extend(self, messages: Iterable[Message]) -> None:
        self._messages.extend(messages)
        self._trim()

    def replace(self, messages: Iterable[Message]) -> None:
        """Set the window to *messages* (e.g. what compression kept), capped."""
        self._messages = list(messages)
        self._trim()

    def rebuild(self, messages: Iterable[Message]) -> None:
        """Refill from the store's history (all of it, oldest first): the last ones are kept."""
        self.replace(messages)

    def clear(self) -> None:
        self._messages.clear()
