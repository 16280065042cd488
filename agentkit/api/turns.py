"""Turns that outlive their HTTP response.

A turn runs in its own asyncio task, which consumes ``agent.run_turn`` (a message, or a
decision on an approval: one typed input) to the end and so persists the reply whatever
happens to the client. The SSE response only *observes* the
turn through a buffer; when the client goes away the observer stops and the task carries on.
(Persisting inside the response generator loses the reply on disconnect: 0 of 20 turns
survived in the reliability study, 20 of 20 with a detached task.)

:class:`TurnTasks` keeps a strong reference to every turn task (an unreferenced task can be
garbage-collected mid-turn) and awaits them at shutdown. Which conversations are mid-turn is
not tracked here: that is the served agents' session pool's registry of running turns
(:class:`agentkit.sessions.TurnRegistry`), the one every part of agentkit asks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator

from agentkit.agent import Agent
from agentkit.api.errors import status_for
from agentkit.events import AgentEvent, AgentOutputEvent, ErrorEvent, SessionEvent, ThinkingEvent
from agentkit.planning.state import TurnInput

__all__ = ["TurnTask", "TurnTasks"]

log = logging.getLogger("agentkit.api")

#: deltas (agent_output, thinking) beyond this many unread events are dropped for a slow
#: reader; every other event is always kept, and the full reply is in the result event
MAX_BUFFERED_DELTAS = 2048


class TurnTask:
    """One turn: its task, and a buffer of events for one observer."""

    def __init__(self, agent: Agent, conversation_id: str | None) -> None:
        self.agent = agent
        self.conversation_id = conversation_id
        self._events: deque[AgentEvent] = deque()
        self._changed = asyncio.Event()
        self._finished = False
        self._error: BaseException | None = None
        self._started = False
        self.detached = False
        self.dropped = 0
        self.task: asyncio.Task[None] | None = None

    def start(self, events: AsyncIterator[AgentEvent]) -> None:
        """Run the turn whose events are *events* (``agent.run_turn``'s)."""
        self.task = asyncio.create_task(self._run(events), name=f"turn {self.agent.id}")

    async def _run(self, events: AsyncIterator[AgentEvent]) -> None:
        try:
            async for event in events:
                if isinstance(event, SessionEvent):
                    self.conversation_id = event.conversation_id
                self._push(event)
                self._started = True
        except Exception as error:  # the observer reports it; nothing may escape a task
            if self._started:  # the stream is open: say so in it
                _status, code = status_for(error)
                log.error(
                    "turn of %s/%s failed: %s",
                    self.agent.id,
                    self.conversation_id,
                    error,
                    exc_info=error if code == "internal_error" else None,
                )
                detail = str(error) if code != "internal_error" else "see the server log"
                self._push(ErrorEvent(message=f"the turn stopped: {detail}", code=code))
            self._error = error
        finally:
            self._finished = True
            self._changed.set()

    def _push(self, event: AgentEvent) -> None:
        if self.detached:
            return
        if isinstance(event, AgentOutputEvent | ThinkingEvent) and (
            len(self._events) >= MAX_BUFFERED_DELTAS
        ):
            self.dropped += 1
            return
        self._events.append(event)
        self._changed.set()

    async def first_event(self) -> AgentEvent:
        """Wait for the first event; re-raise what the turn raised before it had one.

        This is how a busy conversation becomes a 409 (and an unknown one a 404) before the
        streaming response has started.
        """
        while not self._events:
            if self._finished:
                if self._error is not None:
                    raise self._error
                raise RuntimeError("the turn ended without a single event")
            self._changed.clear()
            await self._changed.wait()
        return self._events.popleft()

    def drain(self) -> list[AgentEvent]:
        """The events buffered now, taken (an observer that writes them in one piece)."""
        events = list(self._events)
        self._events.clear()
        return events

    async def observe(self) -> AsyncGenerator[AgentEvent, None]:
        """The remaining events, as they come; stops early only if the observer is closed."""
        try:
            while True:
                while self._events:
                    yield self._events.popleft()
                if self._finished:
                    return
                self._changed.clear()
                if not self._events and not self._finished:
                    await self._changed.wait()
        finally:
            # The client left (or the response ended): stop buffering; the task goes on.
            self.detached = True
            self._events.clear()


class TurnTasks:
    """Every turn task of one app: strong references, and shutdown."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, agent: Agent, conversation_id: str | None, input: TurnInput) -> TurnTask:
        """A turn task of *agent* on *input*: a message
        (:class:`~agentkit.planning.state.UserMessage`) or a decision on an approval
        (:class:`~agentkit.planning.approvals.Decision`), through ``agent.run_turn``."""
        turn = TurnTask(agent, conversation_id)
        turn.start(self.relay(agent, agent.run_turn(conversation_id, input)))
        assert turn.task is not None
        self._tasks.add(turn.task)
        turn.task.add_done_callback(self._tasks.discard)
        return turn

    def relay(self, agent: Agent, source: AsyncIterator[AgentEvent]) -> AsyncIterator[AgentEvent]:
        """What the turn task reads: the turn's events, passed on (a subclass records them)."""
        return source

    def __len__(self) -> int:
        return len(self._tasks)

    async def wait_all(self, timeout: float) -> int:
        """Let running turns finish (they persist their replies); cancel what is left after
        *timeout* seconds (a cancelled chat turn still persists its partial reply).
        Returns how many had to be cancelled."""
        pending = set(self._tasks)
        if not pending:
            return 0
        _done, late = await asyncio.wait(pending, timeout=timeout)
        for task in late:
            task.cancel()
        for task in late:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        return len(late)
