"""The chatHistory window: the recent raw messages of one conversation, in memory.

The window is capped at ``max_turns * 2`` messages (a turn is a user message and its reply).
It is not the source of truth: the conversation store's ``history.json`` is, and
:meth:`ChatHistory.rebuild` refills the window from it when a session is restored.

Invariant: the window never starts with an orphan tool result. An assistant message that made
tool calls and the ``tool`` messages that follow it (its results) stay together; trimming and
compression cut only at a :func:`tool_safe_cut` boundary.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from agentkit.errors import UsageError
from agentkit.types import Message

__all__ = ["ChatHistory", "tool_safe_cut"]


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
