"""The session pool (seed 16.3): one live session per ``{agentId}:{conversationId}``.

Invariants: one turn at a time per key (a second is refused with ``ConversationBusyError``;
which turns run is the pool's :class:`~agentkit.sessions.turns.TurnRegistry`, ``pool.turns``);
a dead session is dropped when it is next looked up, remembering its backend session id so the
next one can try to resume it; idle entries are closed after ``idle_timeout`` seconds; beyond
``max_size`` entries the least recently used idle one is closed. Closing a session ends its
process (the backends terminate, kill and reap).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager, asynccontextmanager
from dataclasses import dataclass, field

from agentkit.models.base import SessionModel
from agentkit.sessions.turns import RunningTurn, TurnRegistry

__all__ = ["PoolEntry", "SessionPool"]


@dataclass
class PoolEntry:
    agent_id: str
    conversation_id: str
    session: SessionModel
    message_count: int = 0
    last_used: float = field(default_factory=time.monotonic)
    #: the conversation's stored message count after this session's last turn (None: before
    #: it): a store with more at the next turn was written by another process (a replica),
    #: so the session missed those turns and is not current (agentkit.chat, scenario C)
    store_messages: int | None = None

    @property
    def key(self) -> str:
        return f"{self.agent_id}:{self.conversation_id}"


class SessionPool:
    def __init__(
        self,
        *,
        max_size: int = 32,
        idle_timeout: float = 900.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_size = max_size
        self.idle_timeout = idle_timeout
        self._clock = clock
        self._entries: dict[str, PoolEntry] = {}
        #: the running turns (of every agent that shares this pool)
        self.turns = TurnRegistry()
        self._resume_ids: dict[str, str] = {}

    @staticmethod
    def key(agent_id: str, conversation_id: str) -> str:
        return f"{agent_id}:{conversation_id}"

    def __len__(self) -> int:
        return len(self._entries)

    def keys(self) -> list[str]:
        return list(self._entries)

    def resume_id(self, agent_id: str, conversation_id: str) -> str | None:
        """The backend session id of the last session of this key, if it had one."""
        return self._resume_ids.get(self.key(agent_id, conversation_id))

    async def get(self, agent_id: str, conversation_id: str) -> PoolEntry | None:
        """The live entry of this key; a dead one is dropped (and its process reaped)."""
        key = self.key(agent_id, conversation_id)
        entry = self._entries.get(key)
        if entry is None:
            return None
        if not entry.session.is_alive():
            await self._close(key)
            return None
        return entry

    def peek(self, agent_id: str, conversation_id: str) -> PoolEntry | None:
        """The entry of this key as it is (no liveness check, nothing closed)."""
        return self._entries.get(self.key(agent_id, conversation_id))

    async def put(self, agent_id: str, conversation_id: str, session: SessionModel) -> PoolEntry:
        """Register a new session for the key, replacing (and closing) any previous one."""
        key = self.key(agent_id, conversation_id)
        if key in self._entries:
            await self._close(key)
        entry = PoolEntry(agent_id, conversation_id, session, last_used=self._clock())
        self._entries[key] = entry
        await self._evict_beyond_size(keep=key)
        return entry

    async def drop(self, agent_id: str, conversation_id: str) -> None:
        await self._close(self.key(agent_id, conversation_id))

    @asynccontextmanager
    async def turn(
        self,
        agent_id: str,
        conversation_id: str,
        writer_lock: AbstractContextManager[object] | None = None,
    ) -> AsyncIterator[RunningTurn]:
        """Admit one turn of the key (see :meth:`TurnRegistry.admit`); a concurrent turn gets
        ``ConversationBusyError``. Idle and dead sessions are reaped first."""
        with self.turns.admit(agent_id, conversation_id, writer_lock) as running:
            try:
                await self.reap()
                yield running
            finally:
                entry = self._entries.get(self.key(agent_id, conversation_id))
                if entry is not None:
                    entry.last_used = self._clock()

    def _busy(self, entry: PoolEntry) -> bool:
        return self.turns.is_running(entry.agent_id, entry.conversation_id)

    async def reap(self) -> list[str]:
        """Close entries idle for longer than ``idle_timeout``, and dead ones."""
        now = self._clock()
        stale = [
            key
            for key, entry in self._entries.items()
            if not self._busy(entry)
            and (now - entry.last_used > self.idle_timeout or not entry.session.is_alive())
        ]
        for key in stale:
            await self._close(key)
        return stale

    async def close_all(self) -> None:
        for key in list(self._entries):
            await self._close(key)

    async def _evict_beyond_size(self, keep: str) -> None:
        while len(self._entries) > self.max_size:
            idle = [
                (entry.last_used, key)
                for key, entry in self._entries.items()
                if not self._busy(entry) and key != keep
            ]
            if not idle:
                return
            await self._close(min(idle)[1])

    async def _close(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return
        if entry.session.session_id:
            self._resume_ids[key] = entry.session.session_id
        await entry.session.close()
