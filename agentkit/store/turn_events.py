"""A running turn's events, stored with their sequence numbers: streams and cancels that
reach any process serving the conversation.

The HTTP API records every event of a turn it runs (:class:`TurnEvents.append`, numbered
from 1 as the chat stream's SSE ids ``{messageId}:{n}`` are) and serves them to any client
that asks later (``GET …/turns/{messageId}/events``, resuming after ``Last-Event-ID``):
:func:`follow` replays what is stored, then waits to be woken for more — by the process
that appends (:class:`InMemoryTurnEvents`: one process, the reference), by the other
processes serving the same data root (``agentkit.store.file_events``: the file store under
``agentkit serve --workers N``) or by PostgreSQL's ``LISTEN``/``NOTIFY``
(``agentkit.store.postgres_events``: every replica). A cancel asked of a process that does
not run the turn is published the same way (:meth:`TurnEvents.request_cancel`) and the
process that runs it stops it. Every implementation passes one contract
(``tests/test_turn_events_contract.py``).

Only the last turn of each conversation is kept: recording a turn's first event forgets the
conversation's earlier turns (their messages are in the history).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from agentkit.store.values import ConversationKey

log = logging.getLogger("agentkit.store")

__all__ = [
    "END",
    "InMemoryTurnEvents",
    "StoredEvent",
    "TurnEvents",
    "follow",
]

#: the type of the record that ends a turn's events when its last event is not ``result``
#: (the turn raised); never sent to a client
END = "_end"
#: the event type that ends a turn
RESULT = "result"

CancelHandler = Callable[[ConversationKey], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """Event *seq* of a turn: its ``type`` and its JSON (``event.to_json()``, made once)."""

    seq: int
    type: str
    data: str


class _Waiters:
    """Who waits for more events of which turn; woken from any thread."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._waiting: dict[
            tuple[str, str, str], list[tuple[asyncio.AbstractEventLoop, asyncio.Event]]
        ] = {}

    @contextmanager
    def waiter(self, key: ConversationKey, message_id: str) -> Iterator[asyncio.Event]:
        entry = (asyncio.get_running_loop(), asyncio.Event())
        turn = (key.agent_id, key.conversation_id, message_id)
        with self._guard:
            self._waiting.setdefault(turn, []).append(entry)
        try:
            yield entry[1]
        finally:
            with self._guard:
                entries = self._waiting.get(turn, [])
                if entry in entries:
                    entries.remove(entry)
                if not entries:
                    self._waiting.pop(turn, None)

    def wake(self, agent_id: str, conversation_id: str, message_id: str) -> None:
        with self._guard:
            entries = list(self._waiting.get((agent_id, conversation_id, message_id), ()))
        for loop, event in entries:
            loop.call_soon_threadsafe(event.set)

    def wake_all(self) -> None:
        """Wake every follower of every turn (each reads its turn again)."""
        with self._guard:
            entries = [entry for waiting in self._waiting.values() for entry in waiting]
        for loop, event in entries:
            loop.call_soon_threadsafe(event.set)


class TurnEvents(ABC):
    """Where running turns' events are kept, and how other processes hear of them."""

    #: whether :meth:`append` and :meth:`read` block on I/O (call them in a thread)
    blocking: bool = False

    def __init__(self) -> None:
        self._waiters = _Waiters()
        self._cancel_handlers: list[CancelHandler] = []
        self._tasks: set[asyncio.Task[None]] = set()
        #: set while :meth:`run` receives other processes' wake-ups and cancels (tests wait)
        self.listening = asyncio.Event()

    @abstractmethod
    def append(self, key: ConversationKey, message_id: str, events: Sequence[StoredEvent]) -> None:
        """Store *events* of turn *message_id* (in order; seq 1 starts the turn, forgetting
        the conversation's earlier turns) and wake whoever follows it, in any process."""

    @abstractmethod
    def read(self, key: ConversationKey, message_id: str, after: int = 0) -> list[StoredEvent]:
        """The stored events of the turn numbered above *after*, in order."""

    @abstractmethod
    def request_cancel(self, key: ConversationKey) -> None:
        """Ask whichever process runs the conversation's turn to stop it."""

    @contextmanager
    def waiter(self, key: ConversationKey, message_id: str) -> Iterator[asyncio.Event]:
        """An event set whenever the turn may have new events (register before reading)."""
        with self._waiters.waiter(key, message_id) as event:
            yield event

    def turn_running(self, key: ConversationKey) -> bool:
        """Whether a turn of the conversation runs in another process, as far as this store
        can tell (this one cannot: it holds only this process's turns)."""
        return False

    def on_cancel(self, handler: CancelHandler) -> None:
        """Call *handler* (in :meth:`run`'s loop) for every cancel requested anywhere."""
        self._cancel_handlers.append(handler)

    async def _cancelled(self, key: ConversationKey) -> None:
        for handler in list(self._cancel_handlers):
            try:
                await handler(key)
            except Exception:  # one handler's failure must not stop the listener
                log.exception("cancelling the turn of %s failed", key)

    def _spawn(self, cancelled: Awaitable[None]) -> None:
        """Run *cancelled* (a :meth:`_cancelled`) as a task of the running loop, kept."""
        task = asyncio.ensure_future(cancelled)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def run(self) -> None:
        """Deliver other processes' wake-ups and cancels until cancelled (nothing to do for
        a store only this process writes)."""
        self.listening.set()
        try:
            await asyncio.Event().wait()
        finally:
            self.listening.clear()

    def close(self) -> None:  # noqa: B027 - most hold nothing of their own
        """Let go of what the events hold (sockets); the stores are closed apart."""


class InMemoryTurnEvents(TurnEvents):
    """This process's turns (what a server on the file store uses)."""

    def __init__(self) -> None:
        super().__init__()
        self._guard = threading.Lock()
        self._turns: dict[tuple[str, str], tuple[str, list[StoredEvent]]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def append(self, key: ConversationKey, message_id: str, events: Sequence[StoredEvent]) -> None:
        conversation = (key.agent_id, key.conversation_id)
        with self._guard:
            current = self._turns.get(conversation)
            if current is None or current[0] != message_id:
                current = self._turns[conversation] = (message_id, [])
            current[1].extend(events)
        self._waiters.wake(key.agent_id, key.conversation_id, message_id)

    def read(self, key: ConversationKey, message_id: str, after: int = 0) -> list[StoredEvent]:
        with self._guard:
            current = self._turns.get((key.agent_id, key.conversation_id))
            if current is None or current[0] != message_id:
                return []
            return [event for event in current[1] if event.seq > after]

    def request_cancel(self, key: ConversationKey) -> None:
        loop = self._loop
        if loop is not None:
            asyncio.run_coroutine_threadsafe(self._cancelled(key), loop)

    async def run(self) -> None:
        self._loop = asyncio.get_running_loop()
        try:
            await super().run()
        finally:
            self._loop = None


async def follow(
    events: TurnEvents,
    key: ConversationKey,
    message_id: str,
    after: int = 0,
    *,
    alive: Callable[[], Awaitable[bool]],
    idle: float = 5.0,
) -> AsyncIterator[StoredEvent]:
    """The turn's events numbered above *after*: the stored ones, then each as it is
    stored, until its ``result`` (or its end). Woken by :meth:`TurnEvents.append` wherever it
    ran; after *idle* seconds without a wake-up it reads again and asks *alive* whether the
    turn is still running anywhere (a replica killed mid-turn never ends its events)."""
    with events.waiter(key, message_id) as woken:
        while True:
            woken.clear()
            if events.blocking:
                found = await asyncio.to_thread(events.read, key, message_id, after)
            else:
                found = events.read(key, message_id, after)
            for event in found:
                if event.type == END:
                    return
                yield event
                after = event.seq
                if event.type == RESULT:
                    return
            if found:
                continue
            try:
                await asyncio.wait_for(woken.wait(), timeout=idle)
            except TimeoutError:
                if not await alive():
                    return
