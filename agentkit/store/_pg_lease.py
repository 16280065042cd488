"""The PostgreSQL store's writer lease: an advisory lock and the fencing epoch beside it.

Why (see README "Running N replicas"): one writer per conversation across processes and
replicas, and a writer that lost its lock without knowing can never write after another
took over.

* **A turn's lease** is a session-level advisory lock, keyed by the schema and the
  conversation, held by a connection taken out of the lock pool for as long as the turn
  holds the conversation. The server releases it the moment that session ends, so a replica
  killed mid-turn frees its conversations at once: no lease to expire, no heartbeat, no
  reaper. A second writer waits on the lock (``lock_timeout``), or gets
  :class:`~agentkit.errors.ConversationBusyError` at once with ``wait=0``.
* **The fencing epoch**: taking the lock adds one to the conversation's ``epoch``; every
  write of the holder is ``UPDATE … WHERE epoch = mine``. A holder whose session was ended
  under it (a dropped connection, a server restart, ``pg_terminate_backend``) has lost the
  lock without knowing; before its next write it takes the lock again on a new connection
  (:meth:`PostgresLeases.fenced`) and continues only if the epoch is still its own (every
  other writer bumps it). Otherwise the write is refused with
  :class:`~agentkit.store.values.StaleWriterError`.
* **A brief lease** serves one operation outside a turn (a write, a fork's read, verify): a
  transaction on a pooled connection under a transaction-level advisory lock (the same key,
  so it waits for a turn's lock and excludes it), committed when the lease is let go. Its
  write bumps the epoch (:data:`~agentkit.store.postgres.APPEND`), fencing out any holder
  that lost its lock meanwhile; a brief lease that wrote nothing rolls back and leaves no
  trace. It takes no connection from the lock pool, which is the running turns'.

Taking the lock and reading the conversation's row — at acquisition, at a take-back, for a
brief lease — is one function, :func:`take`.
"""

from __future__ import annotations

import threading
from contextlib import ExitStack, suppress
from typing import Final, LiteralString

from agentkit._extras import missing
from agentkit.errors import ConversationBusyError, ConversationNotFoundError, StoreError
from agentkit.store._pg import PostgresDatabase
from agentkit.store.backend import Lease
from agentkit.store.values import ConversationKey, StaleWriterError, StoreUnavailableError
from agentkit.types import ConversationMeta

try:
    import psycopg
except ImportError as error:  # pragma: no cover - the slim install
    raise missing("postgres", "the PostgreSQL store", error) from error

__all__ = ["Connection", "PostgresLease", "PostgresLeases", "meta_of", "take"]

Connection = psycopg.Connection[tuple[object, ...]]

#: how long a writer that lost its connection waits for its old session's lock to go
TAKE_BACK_WAIT: Final = 5.0

# Taking the lock without waiting, and the epoch with it, in one statement: NULL = no such
# conversation, false = busy, true = held (the lock is tried once, on the row found; the
# bump's commit need not wait for the WAL flush, see PostgresLeases.acquire).
_TRY_ACQUIRE = """
WITH settings AS (SELECT set_config('synchronous_commit', 'off', true)),
target AS (
    SELECT agent_id, conversation_id FROM conversations
    WHERE agent_id = %(agent)s AND conversation_id = %(conversation)s
),
locked AS (SELECT pg_try_advisory_lock(%(lock)s) AS ok FROM target),
bumped AS (
    UPDATE conversations c SET epoch = c.epoch + 1 FROM settings, locked, target t
    WHERE c.agent_id = t.agent_id AND c.conversation_id = t.conversation_id AND locked.ok
    RETURNING c.epoch, c.meta, c.records
)
SELECT (SELECT ok FROM locked), bumped.epoch, bumped.meta, bumped.records
FROM (SELECT 1) AS one LEFT JOIN bumped ON true
"""
_BUMP = (
    "UPDATE conversations SET epoch = epoch + 1 WHERE agent_id = %s AND conversation_id = %s "
    "RETURNING epoch, meta, records"
)
_READ = (
    "SELECT epoch, meta, records FROM conversations WHERE agent_id = %s AND conversation_id = %s"
)
_LOCKS: dict[tuple[bool, bool], LiteralString] = {
    (False, False): "SELECT pg_advisory_lock(%s)",
    (False, True): "SELECT pg_try_advisory_lock(%s)",
    (True, False): "SELECT pg_advisory_xact_lock(%s)",
    (True, True): "SELECT pg_try_advisory_xact_lock(%s)",
}


def meta_of(text: object) -> ConversationMeta:
    return ConversationMeta.model_validate_json(str(text))


class PostgresLease(Lease):
    """A held conversation: its lock's connection (None: lost; taken back, fenced, before
    the next write), the lock's id, and for a brief lease the transaction it runs in."""

    __slots__ = ("brief", "connection", "lock_id", "stack", "wrote")
    remote = True

    def __init__(
        self,
        key: ConversationKey,
        row: tuple[int, ConversationMeta, int],
        lock_id: int,
        connection: Connection,
        stack: ExitStack | None = None,
    ) -> None:
        epoch, meta, records = row
        super().__init__(key, meta, records, epoch)
        self.lock_id = lock_id
        self.connection: Connection | None = connection
        self.stack = stack
        self.brief = stack is not None
        #: a brief lease's transaction holds a write: committed when it is let go
        self.wrote = False


def _lock(connection: Connection, lock_id: int, wait: float, *, xact: bool) -> bool:
    """Take the advisory lock *lock_id* (session-level, or *xact*: until the transaction
    ends), waiting at most *wait* seconds (0: one try); False when another session holds it.
    Call it inside a transaction (the wait is that transaction's ``lock_timeout``)."""
    if wait <= 0:
        row = connection.execute(_LOCKS[xact, True], (lock_id,)).fetchone()
        return bool(row and row[0])
    connection.execute("SELECT set_config('lock_timeout', %s, true)", (f"{int(wait * 1000)}ms",))
    try:
        connection.execute(_LOCKS[xact, False], (lock_id,))
    except psycopg.errors.LockNotAvailable:
        return False
    return True


def take(
    connection: Connection,
    key: ConversationKey,
    lock_id: int,
    wait: float,
    *,
    xact: bool = False,
    bump: bool = True,
) -> tuple[int, ConversationMeta, int] | None:
    """Take *key*'s writer lock on *connection* (inside a transaction the caller opened)
    and read its row, the epoch bumped with *bump*: ``(epoch, meta, records)``; None when
    another writer holds the lock past *wait*. Raises ConversationNotFoundError."""
    if not _lock(connection, lock_id, wait, xact=xact):
        return None
    row = connection.execute(_BUMP if bump else _READ, (key.agent_id, key.conversation_id))
    found = row.fetchone()
    if found is None:
        raise ConversationNotFoundError(key.agent_id, key.conversation_id)
    return _row(connection, key, found)


def _row(
    connection: Connection, key: ConversationKey, found: tuple[object, ...]
) -> tuple[int, ConversationMeta, int]:
    epoch, meta, records = found
    assert isinstance(epoch, int)
    assert isinstance(records, int)
    try:
        return epoch, meta_of(meta), records
    except ValueError as error:  # edited by hand: repairable (recover(full=True)), not usable
        raise StoreError(f"the stored metadata of {key} does not validate: {error}") from None


def _moved_on(lease: PostgresLease, current: int) -> StoreError:
    """Why a lost lease cannot be taken back: another writer's higher epoch (stale), or an
    epoch lower than the lease's — the bump that took it was committed without a flush and a
    server crash lost it. Nobody took the conversation then, but the lease is gone with the
    bump: unavailable (retry), not a stale writer."""
    if current < lease.epoch:
        return StoreUnavailableError(
            f"PostgreSQL restarted and lost the writer lease of {lease.key} (its epoch went "
            f"back from {lease.epoch} to {current}); nothing acknowledged, retry"
        )
    return lease.stale(current)


class PostgresLeases:
    """The writer leases of one database's conversations (see the module docstring)."""

    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db
        self._guard = threading.Lock()

    def lock_id(self, key: ConversationKey) -> int:
        return self.db.writer_lock_id(key.agent_id, key.conversation_id)

    def is_held(self, key: ConversationKey) -> bool:
        """Does a writer (a turn, of any process or replica) hold the conversation now?"""
        return self.db.is_locked(self.lock_id(key))

    # -- acquiring ---------------------------------------------------------------------------

    def acquire(self, key: ConversationKey, wait: float, *, brief: bool) -> PostgresLease:
        return self._brief(key, wait) if brief else self._session(key, wait)

    def _session(self, key: ConversationKey, wait: float) -> PostgresLease:
        """A turn's lease: the lock on a connection of its own and the epoch bumped (one
        transaction)."""
        lock_id = self.lock_id(key)
        connection = self.db.take()
        locked = False
        try:
            if wait <= 0:  # the common case (a turn): one round trip
                with self.db.errors("taking the writer lock"):
                    found = connection.execute(
                        _TRY_ACQUIRE,
                        {
                            "agent": key.agent_id,
                            "conversation": key.conversation_id,
                            "lock": lock_id,
                        },
                    ).fetchone()
                assert found is not None
                locked = found[0] is True
                if found[0] is None:
                    raise ConversationNotFoundError(key.agent_id, key.conversation_id)
                if not locked:
                    raise ConversationBusyError(key.agent_id, key.conversation_id, wait)
                return PostgresLease(key, _row(connection, key, found[1:]), lock_id, connection)
            with self.db.errors("taking the writer lock"), connection.transaction():
                # The bump need not be flushed: a later durable commit of this writer flushes
                # it with its own (the WAL is ordered), and a bump lost with nothing after it
                # fenced nothing.
                connection.execute("SET LOCAL synchronous_commit = off")
                row = take(connection, key, lock_id, wait)
                if row is None:
                    raise ConversationBusyError(key.agent_id, key.conversation_id, wait)
                locked = True
            return PostgresLease(key, row, lock_id, connection)
        except BaseException:
            self._let_go(connection, lock_id if locked else None)
            raise

    def _brief(self, key: ConversationKey, wait: float) -> PostgresLease:
        """One operation's lease: a transaction on a pooled connection under the
        transaction-level lock, the row read (its epoch bumped by a write, not here)."""
        lock_id = self.lock_id(key)
        stack = ExitStack()
        connection = stack.enter_context(self.db.connection())
        try:
            with self.db.errors(f"taking the writer lock of {key}"):
                connection.execute("BEGIN")
                row = take(connection, key, lock_id, wait, xact=True, bump=False)
            if row is None:
                raise ConversationBusyError(key.agent_id, key.conversation_id, wait)
        except BaseException:
            with suppress(psycopg.Error):
                connection.execute("ROLLBACK")
            stack.close()
            raise
        return PostgresLease(key, row, lock_id, connection, stack)

    # -- letting go --------------------------------------------------------------------------

    def release(self, lease: PostgresLease, *, failed: bool) -> None:
        """Let go of *lease*; a brief lease's transaction commits (durably, unless its
        writes said otherwise) if it wrote and nothing *failed*, else rolls back."""
        if not lease.held:
            return
        lease.held = False
        if lease.stack is None:
            connection, lease.connection = lease.connection, None
            if connection is not None:
                self._let_go(connection, lease.lock_id)
            return
        connection, lease.connection = lease.connection, None
        try:
            if connection is not None and lease.wrote and not failed:
                with self.db.errors(f"committing to {lease.key}"):
                    connection.execute("COMMIT")
            elif connection is not None:
                with suppress(psycopg.Error):
                    connection.execute("ROLLBACK")
        finally:
            lease.stack.close()

    def _let_go(self, connection: Connection, lock_id: int | None) -> None:
        """Unlock (when *lock_id*) and return *connection* to the lock pool; a connection
        that may still hold the lock is closed instead (its session's locks go with it)."""
        clean = not connection.closed and not connection.broken
        if clean and lock_id is not None:
            try:
                row = connection.execute("SELECT pg_advisory_unlock(%s)", (lock_id,)).fetchone()
                clean = bool(row and row[0])
            except psycopg.Error:
                clean = False
        if not clean:
            connection.close()
        self.db.give_back(connection)

    def lose(self, lease: PostgresLease) -> None:
        """The held connection failed: close it (its lock goes with it)."""
        connection, lease.connection = lease.connection, None
        if connection is not None and lease.stack is None:
            connection.close()
            self.db.give_back(connection)

    # -- fencing -----------------------------------------------------------------------------

    def current_epoch(self, key: ConversationKey) -> int:
        with self.db.connection() as connection:
            row = connection.execute(
                "SELECT epoch FROM conversations WHERE agent_id = %s AND conversation_id = %s",
                (key.agent_id, key.conversation_id),
            ).fetchone()
        if row is None:
            raise ConversationNotFoundError(key.agent_id, key.conversation_id)
        epoch = row[0]
        assert isinstance(epoch, int)
        return epoch

    def stale(self, lease: PostgresLease) -> StaleWriterError:
        return lease.stale(self.current_epoch(lease.key))

    def fenced(self, lease: PostgresLease, wait: float) -> Connection:
        """The lease's connection; after a lost one (a turn's lease), the lock taken back on
        a new connection if and only if nobody took the conversation meanwhile (its epoch is
        still the lease's). Raises StaleWriterError."""
        connection = lease.connection
        if not lease.held:
            raise self.stale(lease)
        if connection is not None and not (connection.closed or connection.broken):
            return connection
        if lease.stack is not None:  # a brief lease's transaction is gone with its connection
            reason = f"the connection writing to {lease.key} was lost; nothing acknowledged"
            raise StoreUnavailableError(reason)
        self.lose(lease)
        key = lease.key
        current = self.current_epoch(key)
        if current != lease.epoch:  # another writer took it: refused without waiting
            raise _moved_on(lease, current)
        connection = self.db.take()
        locked = False
        try:
            with self.db.errors("taking the writer lock back"):
                # The lost session may not have ended on the server yet (it notices a dropped
                # client asynchronously) and still holds the lock: wait for it, a while.
                with connection.transaction():
                    row = take(
                        connection, key, lease.lock_id, min(wait, TAKE_BACK_WAIT), bump=False
                    )
                if row is None:  # another writer holds it
                    raise self.stale(lease)
                locked = True
            epoch, meta, records = row
            if epoch != lease.epoch:
                raise _moved_on(lease, epoch)
        except BaseException:
            self._let_go(connection, lease.lock_id if locked else None)
            raise
        lease.connection, lease.meta, lease.records = connection, meta, records
        return connection
