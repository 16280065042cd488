"""A chat model whose reply waits at a gate the test opens: a turn held mid-reply on demand.

It streams ``before``, then waits until the test thread calls :meth:`GatedModel.open_gate`
(the server's loop runs in another thread, so the gate is an ``asyncio.Event`` set through
``call_soon_threadsafe``; parked turns cost nothing while they wait), then streams ``after``
and ends. ``waiting`` counts the calls parked at the gate. No timing is involved: a test
decides when each turn may go on.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

from agentkit.models.base import (
    ChatMessage,
    ChatModel,
    Completion,
    JsonSchema,
    ModelEvent,
    Purpose,
    TextDelta,
)
from agentkit.types import Usage


class GatedModel(ChatModel):
    def __init__(self, before: str = "first ", after: tuple[str, ...] = ("second ", "third")):
        self.spec = "gated"
        self.before = before
        self.after = after
        self.waiting = 0
        self.calls = 0
        self._open = False
        self._event: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def open_gate(self) -> None:
        """Let every parked and every later call go on (callable from any thread)."""
        self._open = True
        if self._loop is not None and self._event is not None:
            self._loop.call_soon_threadsafe(self._event.set)

    @property
    def reply(self) -> str:
        return self.before + "".join(self.after)

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        purpose: Purpose,
        schema: JsonSchema | None = None,
    ) -> AsyncIterator[ModelEvent]:
        self.calls += 1
        yield TextDelta(text=self.before)
        if self._event is None:
            self._event = asyncio.Event()  # the event first: open_gate reads _loop after _open
            self._loop = asyncio.get_running_loop()
        self.waiting += 1
        try:
            if not self._open:
                await self._event.wait()
        finally:
            self.waiting -= 1
        for piece in self.after:
            yield TextDelta(text=piece)
        yield Completion(text=self.reply, usage=Usage(input_tokens=1, output_tokens=3))
