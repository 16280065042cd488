"""Running turns' events and cancels in PostgreSQL: what every replica can stream or stop.

Events are rows of ``turn_events`` (the last turn of each conversation), appended in batches
by the replica running the turn; each batch's transaction also ``NOTIFY``s a channel of the
schema with the turn's name, so followers on every replica are woken the moment it commits
(one ``LISTEN`` connection per process, :meth:`PostgresTurnEvents.run`), never by polling.
A cancel is a ``NOTIFY`` on a second channel: the replica that runs the turn stops it.

Notifications are not stored: while the listening connection is down (a server restart) a
follower falls back to reading again every few seconds, and a cancel asked meanwhile is
lost (ask again). Events are not a durability point (``synchronous_commit = off``): the
history holds what a turn acknowledged; the events are how it got there.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from agentkit._extras import missing
from agentkit.store._pg import PostgresDatabase
from agentkit.store.turn_events import StoredEvent, TurnEvents
from agentkit.store.values import ConversationKey

try:
    import psycopg
    from psycopg import sql
except ImportError as error:  # pragma: no cover - the slim install
    raise missing("postgres", "the PostgreSQL store", error) from error

__all__ = ["PostgresTurnEvents"]

log = logging.getLogger("agentkit.store")

_INSERT = """
INSERT INTO turn_events (agent_id, conversation_id, message_id, seq, type, body)
SELECT %(agent)s, %(conversation)s, %(message)s, e.seq, e.type, e.body
FROM unnest(%(seqs)s::integer[], %(types)s::text[], %(bodies)s::text[]) AS e(seq, type, body)
"""
#: seconds between attempts to listen again after the connection was lost
_RECONNECT = (0.5, 1.0, 2.0, 5.0)


class PostgresTurnEvents(TurnEvents):
    """Turn events and cancels in the database *database* (shared with the stores)."""

    blocking = True

    def __init__(self, database: PostgresDatabase) -> None:
        super().__init__()
        self.db = database
        self.events_channel = database.channel("events")
        self.cancels_channel = database.channel("cancels")

    def append(self, key: ConversationKey, message_id: str, events: Sequence[StoredEvent]) -> None:
        if not events:
            return
        params = {
            "agent": key.agent_id,
            "conversation": key.conversation_id,
            "message": message_id,
            "seqs": [event.seq for event in events],
            "types": [event.type for event in events],
            "bodies": [event.data for event in events],
        }
        with (
            self.db.connection() as connection,
            self.db.errors(f"recording events of {key}"),
            connection.transaction(),
        ):
            connection.execute("SET LOCAL synchronous_commit = off")
            if events[0].seq == 1:  # a new turn: forget the conversation's earlier ones
                connection.execute(
                    "DELETE FROM turn_events WHERE agent_id = %s AND conversation_id = %s"
                    " AND message_id <> %s",
                    (key.agent_id, key.conversation_id, message_id),
                )
            connection.execute(_INSERT, params)
            connection.execute(
                "SELECT pg_notify(%s, %s)",
                (self.events_channel, f"{key.agent_id}/{key.conversation_id}/{message_id}"),
            )

    def read(self, key: ConversationKey, message_id: str, after: int = 0) -> list[StoredEvent]:
        with self.db.connection() as connection:
            rows = connection.execute(
                "SELECT seq, type, body FROM turn_events WHERE agent_id = %s"
                " AND conversation_id = %s AND message_id = %s AND seq > %s ORDER BY seq",
                (key.agent_id, key.conversation_id, message_id, after),
            ).fetchall()
        return [StoredEvent(int(str(seq)), str(kind), str(body)) for seq, kind, body in rows]

    def request_cancel(self, key: ConversationKey) -> None:
        with self.db.connection() as connection:
            connection.execute(
                "SELECT pg_notify(%s, %s)",
                (self.cancels_channel, f"{key.agent_id}/{key.conversation_id}"),
            )

    def turn_running(self, key: ConversationKey) -> bool:
        """Does a writer (a turn, on any replica) hold the conversation now?"""
        return self.db.is_locked(self.db.writer_lock_id(key.agent_id, key.conversation_id))

    async def run(self) -> None:
        """Listen for wake-ups and cancels until cancelled; reconnect when the connection
        is lost (a server restart), backing off."""
        failures = 0
        while True:
            try:
                await self._listen()
            except (psycopg.Error, OSError) as error:
                self.listening.clear()
                pause = _RECONNECT[min(failures, len(_RECONNECT) - 1)]
                failures += 1
                log.warning(
                    "listening to %s failed (%s); again in %.1fs", self.db.shown, error, pause
                )
                await asyncio.sleep(pause)
            else:
                failures = 0

    async def _listen(self) -> None:
        connection = await psycopg.AsyncConnection.connect(
            self.db.url, autocommit=True, connect_timeout=max(1, round(self.db.timeout))
        )
        async with connection:
            for channel in (self.events_channel, self.cancels_channel):
                await connection.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
            self.listening.set()
            try:
                async for notify in connection.notifies():
                    self._dispatch(notify.channel, notify.payload)
            finally:
                self.listening.clear()

    def _dispatch(self, channel: str, payload: str) -> None:
        parts = payload.split("/")
        if channel == self.events_channel and len(parts) == 3:
            self._waiters.wake(*parts)
        elif channel == self.cancels_channel and len(parts) == 2:
            self._spawn(self._cancelled(ConversationKey(*parts)))
