"""A stateless ``ChatModel`` presented as a session: an in-memory transcript.

Scenario B extends the transcript; scenario C starts a new one whose system message carries
the summary of the earlier conversation (:meth:`TranscriptSession.restore`). The transcript is
the chat window (:class:`~agentkit.memory.ChatHistory`), capped at ``max_messages`` (plus the
system prompt): the oldest turns fall out first.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from agentkit.memory.history import ChatHistory
from agentkit.models.base import (
    ChatMessage,
    ChatModel,
    Completion,
    ModelEvent,
    Purpose,
    SessionModel,
)
from agentkit.types import Message

__all__ = ["TranscriptSession"]


class TranscriptSession(SessionModel):
    def __init__(self, model: ChatModel, system_prompt: str, *, max_messages: int = 40) -> None:
        self.model = model
        self.spec = model.spec
        self.max_messages = max_messages
        self.system = [ChatMessage(role="system", content=system_prompt)] if system_prompt else []
        self.history = ChatHistory(max_turns=max(1, max_messages // 2))
        self._closed = False
        self._cancelled = False

    def restore(self, summary: str) -> None:
        """Scenario C: the earlier conversation's summary joins the system prompt, so the
        model is sent system (prompt + summary), then the new message as the user's turn."""
        base = self.system[0].content + "\n\n" if self.system else ""
        self.system = [ChatMessage(role="system", content=base + summary)]

    @property
    def messages(self) -> list[ChatMessage]:
        """The transcript so far (without the system prompt), as the model is sent it."""
        return [ChatMessage(role=m.role, content=m.content) for m in self.history.messages]

    def context(self, text: str) -> list[ChatMessage]:
        """What the model is sent for the next message *text*."""
        return [*self.system, *self.messages, ChatMessage(role="user", content=text)]

    async def send(self, text: str, *, purpose: Purpose = "chat") -> AsyncIterator[ModelEvent]:
        self._cancelled = False
        sent = self.context(text)
        pieces: list[str] = []
        async for event in self.model.stream(sent, purpose=purpose):
            if self._cancelled:
                yield Completion(text="".join(pieces), stop_reason="cancelled")
                return
            if isinstance(event, Completion):
                asked = Message.user(text)
                reply = Message.assistant(event.text, message_id=asked.message_id)
                self.history.extend((asked, reply))
            elif event.type == "text":
                pieces.append(event.text)
            yield event

    async def cancel(self) -> None:
        self._cancelled = True

    async def close(self) -> None:
        self._closed = True

    def is_alive(self) -> bool:
        return not self._closed
