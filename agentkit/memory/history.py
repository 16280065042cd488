"""The chatHistory window: the recent raw messages of one conversation, in memory.

This module is the one chat window every part uses: the planner's prompt context and its
memory upkeep, a chat model's in-memory transcript (scenario B) and the compression lab.

:func:`chat_window` says which stored messages are in the window: those after the last
``/clear`` (the command and its reply included), without system messages, and when an earlier
compression cut the history (its marker, :func:`compression_marker`) only the messages it kept
(the older part lives on in TaskState). :class:`ChatHistory` holds a window in memory, capped
at ``max_turns * 2`` messages (a turn is a user message and its reply). Neither is the source
of truth: the conversation store's ``history.json`` is, and :meth:`ChatHistory.rebuild`
refills the window from it when a session is restored.

Invariant: the window never starts with an orphan tool result. An assistant message that made
tool calls and the ``tool`` messages that follow it (its results) stay together; trimming and
compression cut only at a :func:`tool_safe_cut` boundary.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from agentkit.errors import UsageError
from agentkit.types import Message

__all__ = [
    "ChatHistory",
    "chat_window",
    "compression_marker",
    "is_clear_command",
    "marker_kept",
    "tool_safe_cut",
]

_MARKER_PREFIX = "[compressed:"
_MARKER = re.compile(
    r"\[compressed: \d+ earlier messages summarised into TaskState; the last (\d+) kept\]"
)


def compression_marker(summarised: int, kept: int) -> str:
    """The system message a compression leaves in the history where it cut."""
    return (
        f"{_MARKER_PREFIX} {summarised} earlier messages summarised into TaskState; "
        f"the last {kept} kept]"
    )


def marker_kept(message: Message) -> int | None:
    """How many messages a compression marker kept, or None if *message* is not one."""
    if message.role != "system" or not message.content.startswith(_MARKER_PREFIX):
        return None
    found = _MARKER.fullmatch(message.content)
    return int(found.group(1)) if found else None


def is_clear_command(message: Message) -> bool:
    """A user's ``/clear``: the window starts after it (and its reply)."""
    return message.role == "user" and message.content.strip().lower() == "/clear"


def chat_window(messages: Sequence[Message], *, compressed: bool = True) -> list[Message]:
    """The window of a stored history (oldest first): after the last ``/clear``, without
    system messages, and for an earlier compression only the messages it kept. With
    *compressed* False a compression's cut is ignored (the whole dialogue since ``/clear``,
    what the compression lab sweeps)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if is_clear_command(message):
            return [m for m in messages[index + 2 :] if m.role != "system"]
        kept = marker_kept(message) if compressed else None
        if kept is not None:
            before = [m for m in messages[:index] if m.role != "system"]
            after = [m for m in messages[index + 1 :] if m.role != "system"]
            return before[len(before) - kept :] + after if kept else after
    return [m for m in messages if m.role != "system"]


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
    def of(cls, stored: Sequence[Message], max_turns: int) -> ChatHistory:
        """The window of a stored history (see :func:`chat_window`), capped."""
        return cls(max_turns, chat_window(stored))

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
