"""A stateless ``ChatModel`` presented as a session: an in-memory transcript.

Scenario B extends the transcript; scenario C starts a new one whose system message carries
the summary of the earlier conversation (:meth:`TranscriptSession.restore`). The transcript
is capped at ``max_messages`` (plus the system prompt): the oldest turns fall out first.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from agentkit.models.base import (
    ChatMessage,
    ChatModel,
    Completion,
    ModelEvent,
    Purpose,
    SessionModel,
)

__all__ = ["TranscriptSession"]


class TranscriptSession(SessionModel):
    def __init__(self, model: ChatModel, system_prompt: str, *, max_messages: int = 40) -> None:
        self.model = model
        self.spec = model.spec
        self.max_messages = max_messages
        self.system = [ChatMessage(role="system", content=system_prompt)] if system_prompt else []
        self.messages: list[ChatMessage] = []
        self._closed = False
        self._cancelled = False

    def restore(self, summary: str) -> None:
        """Scenario C: the earlier conversation's summary joins the system prompt, so the
        model is sent system (prompt + summary), then the new message as the user's turn."""
        base = self.system[0].content + "\n\n" if self.system else ""
        self.system = [ChatMessage(role="system", content=base + summary)]

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
                self.messages += [
                    ChatMessage(role="user", content=text),
                    ChatMessage(role="assistant", content=event.text),
                ]
                del self.messages[: max(0, len(self.messages) - self.max_messages)]
            elif event.type == "text":
                pieces.append(event.text)
            yield event

    async def cancel(self) -> None:
        self._cancelled = True

    async def close(self) -> None:
        self._closed = True

    def is_alive(self) -> bool:
        return not self._closed
