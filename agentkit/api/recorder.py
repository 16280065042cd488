"""Recording a served turn's events, numbered, for followers on any replica.

:class:`RecordingTurnTasks` is the server's :class:`~agentkit.api.turns.TurnTasks`: every
turn it starts passes its events through a :class:`TurnRecorder` on their way to the turn's
observer. (A live session that missed turns made by another replica is not used as current:
the chat turn checks that under the writer lock, :mod:`agentkit.chat`, scenario C.)

:class:`TurnRecorder` numbers every event of a turn from 1 (the ``session`` event), as the
chat stream's SSE ids ``{messageId}:{n}`` do, and appends them to the server's
:class:`~agentkit.store.turn_events.TurnEvents` in batches: one batch is being written while
the next collects, so the turn never waits for the store (a store that blocks is written in a
thread). A failure to record is logged and the turn goes on: the events are how a turn is
watched, the history is what it leaves.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from agentkit.agent import Agent
from agentkit.api.turns import TurnTasks
from agentkit.events import AgentEvent, ResultEvent, SessionEvent
from agentkit.store import ConversationKey
from agentkit.store.turn_events import END, StoredEvent, TurnEvents

__all__ = ["RecordingTurnTasks", "TurnRecorder"]

log = logging.getLogger("agentkit.api")


class TurnRecorder:
    """The events of one turn, on their way into *events*."""

    def __init__(self, events: TurnEvents, agent_id: str) -> None:
        self.events = events
        self.agent_id = agent_id
        self.key: ConversationKey | None = None
        self.message_id = ""
        self.seq = 0
        self._ended = False
        self._pending: list[StoredEvent] = []
        self._writer: asyncio.Task[None] | None = None

    def record(self, event: AgentEvent) -> None:
        """Number *event* and queue it (events before ``session`` have no turn: skipped)."""
        if isinstance(event, SessionEvent):
            self.key = ConversationKey(self.agent_id, event.conversation_id)
            self.message_id = event.message_id
        if self.key is None:
            return
        self.seq += 1
        self._pending.append(StoredEvent(self.seq, event.type, event.to_json()))
        self._ended = isinstance(event, ResultEvent)
        self._kick()

    def _kick(self) -> None:
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write(), name="turn events")

    async def _write(self) -> None:
        while self._pending and self.key is not None:
            batch, self._pending = self._pending, []
            try:
                if self.events.blocking:
                    await asyncio.to_thread(self.events.append, self.key, self.message_id, batch)
                else:
                    self.events.append(self.key, self.message_id, batch)
            except Exception as error:  # the turn goes on; its history is what counts
                log.warning("could not record events of %s: %s", self.key, error)

    async def close(self) -> None:
        """Mark the end (when the last event was not ``result``) and wait for the writes."""
        if self.key is not None and not self._ended:
            self.seq += 1
            self._pending.append(StoredEvent(self.seq, END, "{}"))
            self._ended = True
            self._kick()
        writer = self._writer
        if writer is not None:
            await asyncio.shield(writer)


class RecordingTurnTasks(TurnTasks):
    """Turn tasks whose events are recorded in *events* as they pass."""

    def __init__(self, events: TurnEvents) -> None:
        super().__init__()
        self.events = events

    async def relay(
        self, agent: Agent, source: AsyncIterator[AgentEvent]
    ) -> AsyncIterator[AgentEvent]:
        recorder = TurnRecorder(self.events, agent.id)
        try:
            async for event in source:
                recorder.record(event)
                yield event
        finally:
            await recorder.close()
