"""Recording a served turn's events, numbered, for followers on any replica.

:class:`RecordingTurnTasks` is the server's :class:`~agentkit.api.turns.TurnTasks`: every
turn it starts passes its events through a :class:`TurnRecorder` on their way to the turn's
observer. It also keeps a live session honest when other processes (replicas) share the
store: it remembers how many messages a conversation had after this server's last turn there,
and a live session of a conversation that has more (or fewer) by the next turn missed turns
made elsewhere, so it is closed first and that turn restores the context (scenario C).

:class:`TurnRecorder` numbers every event of a turn from 1 (the ``session`` event), as the
chat stream's SSE ids ``{messageId}:{n}`` do, and appends them to the server's
:class:`~agentkit.store.turn_events.TurnEvents` in batches: one batch is being written while
the next collects, so the turn never waits for the store (a store that blocks is written in a
thread). A failure to record is logged and the turn goes on: the events are how a turn is
watched, the history is what it leaves.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator

from agentkit.agent import Agent
from agentkit.api.turns import TurnTask, TurnTasks
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
        data = json.dumps(event.to_json_dict(), ensure_ascii=False)
        self._pending.append(StoredEvent(self.seq, event.type, data))
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
        #: (agent, conversation) → its message count after this server's last turn there
        self._seen: dict[tuple[str, str], int] = {}

    def start(
        self,
        agent: Agent,
        conversation_id: str | None,
        text: str,
        events: AsyncIterator[AgentEvent] | None = None,
    ) -> TurnTask:
        source = events if events is not None else agent.send_message(conversation_id, text)
        recorded = self._recorded(agent, conversation_id, source)
        return super().start(agent, conversation_id, text, recorded)

    async def _recorded(
        self, agent: Agent, conversation_id: str | None, source: AsyncIterator[AgentEvent]
    ) -> AsyncIterator[AgentEvent]:
        await self.check_before(agent, conversation_id)  # before the turn picks its session
        recorder = TurnRecorder(self.events, agent.id)
        try:
            async for event in source:
                recorder.record(event)
                yield event
                if isinstance(event, ResultEvent) and recorder.key is not None:
                    await self._remember(agent, recorder.key)
        finally:
            await recorder.close()

    async def check_before(self, agent: Agent, conversation_id: str | None) -> None:
        """Close the conversation's live session when turns were made elsewhere since this
        server's last turn there (its context is not current)."""
        if conversation_id is None:
            return
        seen = self._seen.get((agent.id, conversation_id))
        if seen is None or agent.pool.turns.is_running(agent.id, conversation_id):
            return
        if await agent.pool.get(agent.id, conversation_id) is None:
            return
        key = ConversationKey(agent.id, conversation_id)
        try:
            meta = await asyncio.to_thread(agent.store.meta, key)
        except Exception:  # the turn reports a missing conversation or a store failure
            return
        stale = meta.stats.message_count != seen
        if stale and not agent.pool.turns.is_running(agent.id, conversation_id):
            await agent.pool.drop(agent.id, conversation_id)

    async def _remember(self, agent: Agent, key: ConversationKey) -> None:
        try:
            meta = await asyncio.to_thread(agent.store.meta, key)
        except Exception as error:
            log.warning("could not read %s after its turn: %s", key, error)
            self._seen.pop((key.agent_id, key.conversation_id), None)
            return
        if len(self._seen) > 10_000:
            self._seen.clear()
        self._seen[(key.agent_id, key.conversation_id)] = meta.stats.message_count
