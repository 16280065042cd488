"""Which turns are running: the one registry of running turns.

A turn is *admitted* here before it writes anything: one turn at a time per conversation in
this process (the registry), and across processes (the conversation store's writer lock, held
for the whole turn). A second turn on a busy conversation gets
:class:`~agentkit.errors.ConversationBusyError` (HTTP 409), never an interleaving.

The registry is what everything asks: the session pool (a busy session is never evicted or
reaped), ``Agent.cancel`` (the running turn's :class:`RunningTurn` knows how to stop it: each
engine says so with :meth:`RunningTurn.on_cancel`) and the HTTP API (busy, cancel, health).
One registry belongs to one :class:`~agentkit.sessions.SessionPool`, so agents that share a
pool (a server's) share it too.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field

from agentkit.errors import ConversationBusyError

__all__ = ["RunningTurn", "TurnRegistry"]

Canceller = Callable[[], Awaitable[None] | None]


@dataclass(eq=False)
class RunningTurn:
    """One admitted turn: whose it is, since when, and how to stop it."""

    agent_id: str
    conversation_id: str
    started: float = field(default_factory=time.monotonic)
    cancel_requested: bool = False
    _canceller: Canceller | None = None

    async def on_cancel(self, canceller: Canceller) -> None:
        """Set how this turn is stopped (the engine knows); a cancel asked for before it was
        set is passed on now."""
        self._canceller = canceller
        if self.cancel_requested:
            await _call(canceller)

    async def cancel(self) -> None:
        """Ask the turn to stop (it ends with status cancelled at its next safe point)."""
        self.cancel_requested = True
        if self._canceller is not None:
            await _call(self._canceller)


async def _call(canceller: Canceller) -> None:
    result = canceller()
    if inspect.isawaitable(result):
        await result


class TurnRegistry:
    """The running turns of one session pool, by ``(agent_id, conversation_id)``."""

    def __init__(self) -> None:
        self._running: dict[tuple[str, str], RunningTurn] = {}

    def __len__(self) -> int:
        return len(self._running)

    def running(self, agent_id: str, conversation_id: str) -> RunningTurn | None:
        """The turn of this conversation running in this process, if there is one."""
        return self._running.get((agent_id, conversation_id))

    def is_running(self, agent_id: str, conversation_id: str) -> bool:
        return (agent_id, conversation_id) in self._running

    @contextmanager
    def admit(
        self,
        agent_id: str,
        conversation_id: str,
        writer_lock: AbstractContextManager[object] | None = None,
    ) -> Iterator[RunningTurn]:
        """Admit one turn for its duration: refused with ``ConversationBusyError`` when the
        conversation is mid-turn here or (*writer_lock*, the store's lock taken without
        waiting) in another process."""
        key = (agent_id, conversation_id)
        if key in self._running:
            raise ConversationBusyError(agent_id, conversation_id, 0.0)
        turn = RunningTurn(agent_id, conversation_id)
        self._running[key] = turn
        try:
            if writer_lock is None:
                yield turn
            else:
                with writer_lock:
                    yield turn
        finally:
            if self._running.get(key) is turn:
                del self._running[key]
