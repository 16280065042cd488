"""The conversation store in PostgreSQL: what N ``agentkit serve`` replicas share.

The journal is the file store's, one row per record: ``conversation_records(agent_id,
conversation_id, seq, kind, turn_id, body)`` where ``body`` is the same versioned JSON a
``journal.log`` frame carries (:mod:`agentkit.store._records`), and ``conversations`` holds
each conversation's metadata (the fold of its records, what ``meta.json`` shows), the number
of its records and its writer *epoch*. Every write is one transaction that appends records and
moves the metadata along, so there is nothing to recover after a crash: a write committed
whole or not at all. A message is acknowledged once its transaction has committed
(``synchronous_commit`` on: flushed to the server's WAL); notes (``annotate``) and turn
checkpoints commit with ``synchronous_commit = off``, as the file store writes them without
an fsync.

One writer per conversation, across processes and replicas (see README "Running N replicas"):

* **The lock** is a session-level advisory lock, keyed by the schema and the conversation,
  held by the connection the turn takes out of the pool for as long as it holds the
  conversation (:meth:`PostgresConversationStore.hold`). The server releases it the moment
  that session ends, so a replica killed mid-turn frees its conversations at once: no lease
  to expire, no heartbeat, no reaper. A second writer waits on the lock (``lock_timeout``),
  or gets :class:`~agentkit.errors.ConversationBusyError` at once with ``timeout=0``.
* **The fencing epoch**: taking the lock adds one to the conversation's ``epoch`` and the
  holder remembers the value; every write it makes is ``UPDATE … WHERE epoch = mine``. A
  holder whose session was ended under it (a dropped connection, a server restart, an
  administrator's ``pg_terminate_backend``) has lost the lock without knowing; on its next
  write it takes the lock again on a new connection and continues only if the epoch is still
  its own (nobody wrote meanwhile: every other writer bumps it). Otherwise the write is
  refused with :class:`~agentkit.store.base.StaleWriterError`: a writer that lost its lock
  can never write after another took over. A write outside :meth:`hold` takes a
  transaction-level lock and bumps the epoch in the same transaction.
* A write whose connection failed is retried once after the lock is taken back; whether the
  first attempt had committed is read from the record count under the same epoch (only this
  writer can have moved it), so nothing is written twice.

Typed conversation records (compressions, resets) are journal rows of kind ``record``; a
turn's model-call trace (the file store's ``calls.jsonl``) is ``turn_traces``, a row per line,
committed on its own without waiting for the WAL flush (as the file store does not fsync it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

from agentkit._extras import missing
from agentkit.errors import (
    ConversationBusyError,
    ConversationNotFoundError,
    StoreError,
    UsageError,
)
from agentkit.ids import check_id
from agentkit.store._checkpoint import TurnCheckpoint
from agentkit.store._pg import PostgresDatabase
from agentkit.store._records import (
    AnnotationRecord,
    CheckpointRecord,
    CreatedRecord,
    JournalRecord,
    MessageRecord,
    RecordEntry,
    StatusRecord,
    Views,
    decode_record,
    decode_records,
    encode_record,
    fold,
    render_block,
    role_label,
)
from agentkit.store.base import (
    ConversationKey,
    ConversationStore,
    Prepare,
    Problem,
    StaleWriterError,
    StoreUnavailableError,
    TraceSink,
    VerifyReport,
    checked_journal,
)
from agentkit.store.forks import checkpoints_of, fork_records
from agentkit.store.records import ConversationRecord
from agentkit.types import ConversationMeta, ConversationStatus, Message, utc_now

try:
    import psycopg
except ImportError as error:  # pragma: no cover - the slim install
    raise missing("postgres", "the PostgreSQL store", error) from error

__all__ = ["PostgresConversationStore"]

Connection = psycopg.Connection[tuple[object, ...]]

#: how long a writer that lost its connection waits for its old session's lock to go
_TAKE_BACK_WAIT = 5.0

# A held writer's commit: one statement (its own transaction), fenced by the epoch; the
# commit waits for the WAL flush unless %(durable)s is false (set_config local to it).
_APPEND = """
WITH settings AS (
    SELECT set_config('synchronous_commit',
        CASE WHEN %(durable)s THEN current_setting('synchronous_commit') ELSE 'off' END, true)
), fenced AS (
    UPDATE conversations SET meta = %(meta)s, updated_at = %(updated)s, records = %(records)s
    WHERE agent_id = %(agent)s AND conversation_id = %(conversation)s
      AND epoch = %(epoch)s AND records = %(previous)s
    RETURNING agent_id, conversation_id
)
INSERT INTO conversation_records (agent_id, conversation_id, seq, kind, turn_id, body)
SELECT fenced.agent_id, fenced.conversation_id, r.seq, r.kind, r.turn_id, r.body
FROM settings, fenced,
     unnest(%(seqs)s::integer[], %(kinds)s::text[], %(turns)s::text[], %(bodies)s::text[])
     AS r(seq, kind, turn_id, body)
"""
# Taking the lock without waiting, and the epoch with it, in one statement: NULL = no such
# conversation, false = busy, true = held (the lock is tried once, on the row found; the
# bump's commit need not wait for the WAL flush, see _acquire).
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
_INSERT_RECORDS = """
INSERT INTO conversation_records (agent_id, conversation_id, seq, kind, turn_id, body)
SELECT %(agent)s, %(conversation)s, r.seq, r.kind, r.turn_id, r.body
FROM unnest(%(seqs)s::integer[], %(kinds)s::text[], %(turns)s::text[], %(bodies)s::text[])
     AS r(seq, kind, turn_id, body)
"""
# every record (of a kind) of a conversation, and a row with a NULL body when it has none
_RECORDS = """
SELECT r.body FROM conversations c LEFT JOIN conversation_records r
    ON r.agent_id = c.agent_id AND r.conversation_id = c.conversation_id
WHERE c.agent_id = %s AND c.conversation_id = %s ORDER BY r.seq
"""
_RECORDS_OF_KIND = """
SELECT r.body FROM conversations c LEFT JOIN conversation_records r
    ON r.agent_id = c.agent_id AND r.conversation_id = c.conversation_id AND r.kind = %s
WHERE c.agent_id = %s AND c.conversation_id = %s ORDER BY r.seq
"""


_COPY_TRACES = """
INSERT INTO turn_traces (agent_id, conversation_id, message_id, line)
SELECT agent_id, %s, message_id, line FROM turn_traces
WHERE agent_id = %s AND conversation_id = %s AND message_id = ANY(%s::text[]) ORDER BY id
"""


class _RowSink(TraceSink):
    """A turn's trace in ``turn_traces``: a row per line, each committed on its own."""

    def __init__(self, db: PostgresDatabase, key: ConversationKey, message_id: str) -> None:
        self._db, self._key, self._message_id = db, key, message_id

    def append(self, line: str) -> None:
        if "\n" in line:
            raise ValueError("a trace line must not contain a newline")
        key = self._key
        with (
            self._db.connection() as connection,
            self._db.errors(f"tracing a turn of {key}"),
            connection.transaction(),
        ):
            connection.execute("SET LOCAL synchronous_commit = off")
            try:
                connection.execute(
                    "INSERT INTO turn_traces (agent_id, conversation_id, message_id, line)"
                    " VALUES (%s, %s, %s, %s)",
                    (key.agent_id, key.conversation_id, self._message_id, line),
                )
            except psycopg.errors.ForeignKeyViolation:
                raise ConversationNotFoundError(key.agent_id, key.conversation_id) from None


def _meta_json(meta: ConversationMeta) -> str:
    return meta.model_dump_json(by_alias=True)


def _meta(text: object) -> ConversationMeta:
    return ConversationMeta.model_validate_json(str(text))


def _turn_id(record: JournalRecord) -> str | None:
    if isinstance(record, MessageRecord):
        return record.message.message_id
    if isinstance(record, AnnotationRecord):
        return record.message_id
    return None


def _columns(key: ConversationKey, records: Sequence[JournalRecord]) -> dict[str, object]:
    return {
        "agent": key.agent_id,
        "conversation": key.conversation_id,
        "seqs": [record.seq for record in records],
        "kinds": [record.kind for record in records],
        "turns": [_turn_id(record) for record in records],
        "bodies": [encode_record(record).decode() for record in records],
    }


def _sequence(
    views: Views, records: Sequence[JournalRecord], checkpoint: TurnCheckpoint | None
) -> list[JournalRecord]:
    """*records* numbered after *views* and applied to them; then the checkpoint, filled in
    as the conversation stands after them (as the file store does)."""
    done: list[JournalRecord] = []
    for record in records:
        numbered = record.model_copy(update={"seq": views.records + 1})
        views.apply(numbered)
        done.append(numbered)
    if checkpoint is not None:
        filled = checkpoint.model_copy(
            update={"messages": views.message_count, "status": views.status}
        )
        mark = CheckpointRecord(seq=views.records + 1, checkpoint=filled)
        views.apply(mark)
        done.append(mark)
    return done


def _lock(connection: Connection, lock_id: int, wait: float) -> bool:
    """Take the session-level advisory lock *lock_id*, waiting at most *wait* seconds (0: one
    try); False when another session holds it. Call it inside a transaction (the wait is
    that transaction's ``lock_timeout``; the lock outlives it)."""
    if wait <= 0:
        row = connection.execute("SELECT pg_try_advisory_lock(%s)", (lock_id,)).fetchone()
        return bool(row and row[0])
    connection.execute("SELECT set_config('lock_timeout', %s, true)", (f"{int(wait * 1000)}ms",))
    try:
        connection.execute("SELECT pg_advisory_lock(%s)", (lock_id,))
    except psycopg.errors.LockNotAvailable:
        return False
    return True


@dataclass
class _Held:
    """A conversation this thread holds: its lock's connection, epoch and known state."""

    key: ConversationKey
    lock_id: int
    connection: Connection | None  # None: lost; taken back (fenced) before the next write
    epoch: int
    meta: ConversationMeta
    records: int
    depth: int = 1
    pending: list[JournalRecord] = field(default_factory=list)  # notes for the next commit


class _FencedError(Exception):
    """The fenced UPDATE matched no row (internal)."""


class PostgresConversationStore(ConversationStore):
    """Conversations in the PostgreSQL database at *database* (a URL or an open
    :class:`~agentkit.store._pg.PostgresDatabase`, shared with a config store).

    ``lock_timeout`` is how long a writer waits for a busy conversation. A store opened on a
    URL owns its pool: :meth:`close` it (or use ``with``).
    """

    def __init__(self, database: PostgresDatabase | str, *, lock_timeout: float = 10.0) -> None:
        self._owned = isinstance(database, str)
        self.db = PostgresDatabase(database) if isinstance(database, str) else database
        self.lock_timeout = lock_timeout
        self._local = threading.local()

    def close(self) -> None:
        """Close the pool if this store opened it (a shared database is its opener's)."""
        if self._owned:
            self.db.close()

    def __enter__(self) -> PostgresConversationStore:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PostgresConversationStore({self.db.shown!r})"

    # ------------------------------------------------------------------ locking

    def _holds(self) -> dict[ConversationKey, _Held]:
        holds: dict[ConversationKey, _Held] | None = getattr(self._local, "holds", None)
        if holds is None:
            holds = self._local.holds = {}
        return holds

    def _lock_id(self, key: ConversationKey) -> int:
        return self.db.writer_lock_id(key.agent_id, key.conversation_id)

    def is_held(self, key: ConversationKey) -> bool:
        """Does a writer (a turn, of any process or replica) hold the conversation now?"""
        return self.db.is_locked(self._lock_id(key))

    @contextmanager
    def hold(self, key: ConversationKey, timeout: float | None = None) -> Iterator[None]:
        holds = self._holds()
        held = holds.get(key)
        if held is not None:  # this thread holds it already (a write inside a turn)
            held.depth += 1
            try:
                yield
            finally:
                held.depth -= 1
            return
        wait = self.lock_timeout if timeout is None else timeout
        held = self._acquire(key, wait)
        holds[key] = held
        try:
            yield
        finally:
            try:
                if held.pending:  # notes made under the lock, not yet written
                    with suppress(StoreError, ConversationNotFoundError):
                        self._commit(key, [], durable=False)
            finally:
                holds.pop(key, None)
                self._release(held)

    def _acquire(self, key: ConversationKey, wait: float) -> _Held:
        """Take the lock on a connection of its own and bump the epoch (one transaction)."""
        lock_id = self._lock_id(key)
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
                epoch, meta, records = found[1:]
                assert isinstance(epoch, int)
                assert isinstance(records, int)
                return _Held(key, lock_id, connection, epoch, _meta(meta), records)
            with self.db.errors("taking the writer lock"), connection.transaction():
                # The bump need not be flushed: a later durable commit of this writer flushes
                # it with its own (the WAL is ordered), and a bump lost with nothing after it
                # fenced nothing.
                connection.execute("SET LOCAL synchronous_commit = off")
                locked = _lock(connection, lock_id, wait)
                if not locked:
                    raise ConversationBusyError(key.agent_id, key.conversation_id, wait)
                row = connection.execute(
                    "UPDATE conversations SET epoch = epoch + 1"
                    " WHERE agent_id = %s AND conversation_id = %s "
                    "RETURNING epoch, meta, records",
                    (key.agent_id, key.conversation_id),
                ).fetchone()
                if row is None:
                    raise ConversationNotFoundError(key.agent_id, key.conversation_id)
            epoch, meta, records = row
            assert isinstance(epoch, int)
            assert isinstance(records, int)
            return _Held(key, lock_id, connection, epoch, _meta(meta), records)
        except BaseException:
            self._let_go(connection, lock_id if locked else None)
            raise

    def _let_go(self, connection: Connection, lock_id: int | None) -> None:
        """Unlock (when *lock_id*) and return *connection* to the pool; a connection that
        may still hold the lock is closed instead (its session's locks go with it)."""
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

    def _release(self, held: _Held) -> None:
        connection, held.connection = held.connection, None
        if connection is not None:
            self._let_go(connection, held.lock_id)

    def _lose(self, held: _Held) -> None:
        """The held connection failed: close it (its lock goes with it)."""
        connection, held.connection = held.connection, None
        if connection is not None:
            connection.close()
            self.db.give_back(connection)

    def _current_epoch(self, key: ConversationKey) -> int:
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

    def _fenced(self, held: _Held) -> Connection:
        """The held connection; after a lost one, the lock taken back on a new connection,
        if and only if nobody took the conversation meanwhile (its epoch is still ours)."""
        if held.connection is not None and not (held.connection.closed or held.connection.broken):
            return held.connection
        self._lose(held)
        key = held.key
        current = self._current_epoch(key)
        if current != held.epoch:  # another writer took it: refused without waiting
            raise StaleWriterError(key.agent_id, key.conversation_id, held.epoch, current)
        connection = self.db.take()
        locked = False
        try:
            with self.db.errors("taking the writer lock back"):
                # The lost session may not have ended on the server yet (it notices a dropped
                # client asynchronously) and still holds the lock: wait for it, a while.
                with connection.transaction():
                    wait = min(self.lock_timeout, _TAKE_BACK_WAIT)
                    locked = _lock(connection, held.lock_id, wait)
                if not locked:  # another writer holds it
                    raise StaleWriterError(
                        key.agent_id, key.conversation_id, held.epoch, self._current_epoch(key)
                    )
                row = connection.execute(
                    "SELECT epoch, meta, records FROM conversations"
                    " WHERE agent_id = %s AND conversation_id = %s",
                    (key.agent_id, key.conversation_id),
                ).fetchone()
            if row is None:
                raise ConversationNotFoundError(key.agent_id, key.conversation_id)
            epoch, meta, records = row
            assert isinstance(epoch, int)
            assert isinstance(records, int)
            if epoch != held.epoch:
                raise StaleWriterError(key.agent_id, key.conversation_id, held.epoch, epoch)
        except BaseException:
            self._let_go(connection, held.lock_id if locked else None)
            raise
        held.connection, held.meta, held.records = connection, _meta(meta), records
        return connection

    # ------------------------------------------------------------------ writes

    def _commit(
        self,
        key: ConversationKey,
        records: Sequence[JournalRecord],
        *,
        durable: bool = True,
        checkpoint: TurnCheckpoint | None = None,
    ) -> ConversationMeta:
        """Append *records* (numbered here) and the *checkpoint* in one transaction."""
        held = self._holds().get(key)
        if held is None:
            return self._commit_alone(key, records, durable=durable, checkpoint=checkpoint)
        records = [*held.pending, *records]
        for attempt in (1, 2):
            connection = self._fenced(held)
            views = Views.resume(held.meta, held.records)
            numbered = _sequence(views, records, checkpoint)
            if not numbered:
                return held.meta
            try:
                self._append_fenced(connection, held, views, numbered, durable=durable)
            except _FencedError:
                current = self._current_epoch(key)  # NotFound: deleted under us
                raise StaleWriterError(
                    key.agent_id, key.conversation_id, held.epoch, current
                ) from None
            except psycopg.Error as error:
                lost = isinstance(error, psycopg.OperationalError)  # e.g. a server shutdown
                if not (lost or connection.closed or connection.broken):
                    raise StoreError(f"could not write to {key}: {error}") from error
                before = held.records
                self._lose(held)
                try:
                    self._fenced(held)  # the lock back, and the record count as committed
                except StoreUnavailableError:
                    raise StoreUnavailableError(
                        f"could not write to {key}: the connection to PostgreSQL was lost "
                        f"({error}); nothing acknowledged"
                    ) from error
                if held.records == before + len(numbered):  # it had committed after all
                    break
                if held.records != before or attempt == 2:
                    raise StoreError(
                        f"could not write to {key}: {error}; nothing acknowledged"
                    ) from error
                continue  # it had not: write it again, under the same epoch
            held.meta, held.records = views.meta, views.records
            break
        held.pending.clear()
        return held.meta

    def _append_fenced(
        self,
        connection: Connection,
        held: _Held,
        views: Views,
        numbered: list[JournalRecord],
        *,
        durable: bool,
    ) -> None:
        params = {
            **_columns(held.key, numbered),
            "meta": _meta_json(views.meta),
            "updated": views.updated_at,
            "records": views.records,
            "epoch": held.epoch,
            "previous": held.records,
            "durable": durable,
        }
        cursor = connection.execute(_APPEND, params)  # one statement: its own transaction
        if cursor.rowcount != len(numbered):
            raise _FencedError

    def _commit_alone(
        self,
        key: ConversationKey,
        records: Sequence[JournalRecord],
        *,
        durable: bool,
        checkpoint: TurnCheckpoint | None,
    ) -> ConversationMeta:
        """A write outside :meth:`hold`: one transaction under a transaction-level lock."""
        with (
            self.db.connection() as connection,
            self.db.errors(f"writing to {key}"),
            connection.transaction(),
        ):
            if not durable:
                connection.execute("SET LOCAL synchronous_commit = off")
            connection.execute(
                "SELECT set_config('lock_timeout', %s, true)",
                (f"{int(self.lock_timeout * 1000)}ms",),
            )
            try:
                connection.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_id(key),))
            except psycopg.errors.LockNotAvailable:
                raise ConversationBusyError(
                    key.agent_id, key.conversation_id, self.lock_timeout
                ) from None
            row = connection.execute(
                "SELECT meta, records FROM conversations"
                " WHERE agent_id = %s AND conversation_id = %s FOR UPDATE",
                (key.agent_id, key.conversation_id),
            ).fetchone()
            if row is None:
                raise ConversationNotFoundError(key.agent_id, key.conversation_id)
            meta, count = row
            assert isinstance(count, int)
            views = Views.resume(_meta(meta), count)
            numbered = _sequence(views, records, checkpoint)
            connection.execute(
                "UPDATE conversations SET meta = %s, updated_at = %s, records = %s, "
                "epoch = epoch + 1 WHERE agent_id = %s AND conversation_id = %s",
                (
                    _meta_json(views.meta),
                    views.updated_at,
                    views.records,
                    key.agent_id,
                    key.conversation_id,
                ),
            )
            connection.execute(_INSERT_RECORDS, _columns(key, numbered))
        return views.meta

    def create(self, key: ConversationKey, title: str) -> ConversationMeta:
        record = CreatedRecord(
            seq=1,
            conversation_id=key.conversation_id,
            agent_id=key.agent_id,
            title=title,
            at=utc_now(),
        )
        views = fold([record])
        self._insert(key, views, [record])
        return views.meta

    def _insert(
        self,
        key: ConversationKey,
        views: Views,
        records: Sequence[JournalRecord],
        prepare: Prepare | None = None,
        checkpoint: TurnCheckpoint | None = None,
        *,
        also: Callable[[Connection], None] | None = None,
    ) -> None:
        """A new conversation with its records, in one transaction (``prepare`` runs last
        in it: before the conversation is visible)."""
        with (
            self.db.connection() as connection,
            self.db.errors(f"creating {key}"),
            connection.transaction(),
        ):
            try:
                connection.execute(
                    "INSERT INTO conversations "
                    "(agent_id, conversation_id, meta, updated_at, records) "
                    "VALUES (%s, %s, %s, %s, %s)",
                    (
                        key.agent_id,
                        key.conversation_id,
                        _meta_json(views.meta),
                        views.updated_at,
                        views.records,
                    ),
                )
            except psycopg.errors.UniqueViolation:
                raise UsageError(f"conversation {key} already exists") from None
            connection.execute(_INSERT_RECORDS, _columns(key, records))
            if also is not None:
                also(connection)
            if prepare is not None:
                prepare(checkpoint)

    def append(
        self,
        key: ConversationKey,
        message: Message,
        *,
        status: ConversationStatus | None = None,
        checkpoint: TurnCheckpoint | None = None,
    ) -> ConversationMeta:
        records: list[JournalRecord] = [MessageRecord(seq=1, message=message)]
        if status is not None:
            records.append(StatusRecord(seq=1, status=status, at=utc_now()))
        return self._commit(key, records, checkpoint=checkpoint)

    def set_status(
        self,
        key: ConversationKey,
        status: ConversationStatus,
        *,
        checkpoint: TurnCheckpoint | None = None,
    ) -> ConversationMeta:
        record = StatusRecord(seq=1, status=status, at=utc_now())
        return self._commit(key, [record], checkpoint=checkpoint)

    def annotate(self, key: ConversationKey, message_id: str, label: str, text: str) -> None:
        """A note in the turn log. Inside a turn (this thread holds the lock) it is written
        with the turn's next commit, or when the turn lets go; otherwise at once (without
        waiting for the WAL flush)."""
        check_id(message_id, "message")
        record = AnnotationRecord(
            seq=1, message_id=message_id, label=label, text=text, at=utc_now()
        )
        held = self._holds().get(key)
        if held is not None:
            held.pending.append(record)
        else:
            self._commit(key, [record], durable=False)

    def record_checkpoint(self, key: ConversationKey, checkpoint: TurnCheckpoint) -> None:
        # like the file store: not a durability point, flushed with the next durable commit
        self._commit(key, [], durable=False, checkpoint=checkpoint)

    def delete(self, key: ConversationKey) -> None:
        with self.hold(key):
            held = self._holds()[key]
            held.pending.clear()
            connection = self._fenced(held)
            with self.db.errors(f"deleting {key}"):
                row = connection.execute(
                    "DELETE FROM conversations"
                    " WHERE agent_id = %s AND conversation_id = %s AND epoch = %s RETURNING 1",
                    (key.agent_id, key.conversation_id, held.epoch),
                ).fetchone()
            if row is None:
                raise StaleWriterError(
                    key.agent_id, key.conversation_id, held.epoch, self._current_epoch(key)
                )

    def fork(
        self,
        source: ConversationKey,
        target: ConversationKey,
        *,
        title: str,
        at: str | None,
        prepare: Prepare | None = None,
    ) -> ConversationMeta:
        with self.hold(source, timeout=0):
            records, checkpoint = fork_records(
                self._records(source), source, target, title=title, at=at
            )
            if self.exists(target):
                raise UsageError(f"conversation {target} already exists")
            views = fold(records)
            turns = list(views.turns)

            def copy_traces(connection: Connection) -> None:
                connection.execute(
                    _COPY_TRACES,
                    (target.conversation_id, source.agent_id, source.conversation_id, turns),
                )

            self._insert(target, views, records, prepare, checkpoint, also=copy_traces)
            return views.meta

    # ------------------------------------------------------------------ records, traces

    def add_record(self, key: ConversationKey, record: ConversationRecord) -> None:
        with self.hold(key):
            count = self._holds()[key].meta.stats.message_count
            if record.start > count:
                raise UsageError(
                    f"a record of {key} starts at message {record.start}; it has {count}"
                )
            self._commit(key, [RecordEntry(seq=1, record=record)])

    def records(self, key: ConversationKey) -> list[ConversationRecord]:
        return [r.record for r in self._records(key, "record") if isinstance(r, RecordEntry)]

    def journal(self, key: ConversationKey) -> list[JournalRecord]:
        return self._records(key)

    def restore(
        self,
        key: ConversationKey,
        records: Sequence[JournalRecord],
        traces: Mapping[str, Sequence[str]],
    ) -> ConversationMeta:
        views = checked_journal(key, records)
        rows = [
            (key.agent_id, key.conversation_id, check_id(turn, "message"), line)
            for turn, lines in traces.items()
            for line in lines
        ]

        def insert_traces(connection: Connection) -> None:
            if rows:
                with connection.cursor() as cursor:
                    cursor.executemany(
                        "INSERT INTO turn_traces (agent_id, conversation_id, message_id, line)"
                        " VALUES (%s, %s, %s, %s)",
                        rows,
                    )

        self._insert(key, views, records, also=insert_traces)
        return views.meta

    def open_trace(self, key: ConversationKey, message_id: str) -> TraceSink:
        check_id(message_id, "message")
        return _RowSink(self.db, key, message_id)

    def trace(self, key: ConversationKey, message_id: str) -> list[str]:
        check_id(message_id, "message")
        rows = self._rows(
            "SELECT t.line FROM conversations c LEFT JOIN turn_traces t"
            " ON t.agent_id = c.agent_id AND t.conversation_id = c.conversation_id"
            " AND t.message_id = %s WHERE c.agent_id = %s AND c.conversation_id = %s"
            " ORDER BY t.id",
            message_id,
            key.agent_id,
            key.conversation_id,
        )
        if not rows:
            raise ConversationNotFoundError(key.agent_id, key.conversation_id)
        return [str(line) for (line,) in rows if line is not None]

    # ------------------------------------------------------------------ reads

    def _rows(self, query: str, *params: object) -> list[tuple[object, ...]]:
        with self.db.connection() as connection:
            return connection.execute(query, params).fetchall()

    def _records(self, key: ConversationKey, kind: str | None = None) -> list[JournalRecord]:
        """The conversation's records (of one *kind*), oldest first."""
        rows = self._rows(
            _RECORDS if kind is None else _RECORDS_OF_KIND,
            *(() if kind is None else (kind,)),
            key.agent_id,
            key.conversation_id,
        )
        if not rows:
            raise ConversationNotFoundError(key.agent_id, key.conversation_id)
        return self._decode([body for (body,) in rows if body is not None])

    def _tail(self, key: ConversationKey, kind: str, limit: int) -> list[JournalRecord]:
        """The last *limit* records of *kind*, oldest first."""
        rows = self._rows(
            "SELECT t.body FROM conversations c LEFT JOIN LATERAL ("
            " SELECT r.body, r.seq FROM conversation_records r"
            " WHERE r.agent_id = c.agent_id AND r.conversation_id = c.conversation_id"
            " AND r.kind = %s ORDER BY r.seq DESC LIMIT %s) t ON true"
            " WHERE c.agent_id = %s AND c.conversation_id = %s ORDER BY t.seq",
            kind,
            limit,
            key.agent_id,
            key.conversation_id,
        )
        if not rows:
            raise ConversationNotFoundError(key.agent_id, key.conversation_id)
        return self._decode([body for (body,) in rows if body is not None])

    @staticmethod
    def _decode(bodies: list[object]) -> list[JournalRecord]:
        try:
            return decode_records([str(body).encode() for body in bodies])
        except ValueError as error:
            raise StoreError(f"a stored record does not validate: {error}") from error

    def exists(self, key: ConversationKey) -> bool:
        return bool(
            self._rows(
                "SELECT 1 FROM conversations WHERE agent_id = %s AND conversation_id = %s",
                key.agent_id,
                key.conversation_id,
            )
        )

    def conversations(self, agent_id: str) -> list[ConversationMeta]:
        check_id(agent_id, "agent")
        rows = self._rows("SELECT meta FROM conversations WHERE agent_id = %s", agent_id)
        metas = [_meta(meta) for (meta,) in rows]
        return sorted(metas, key=lambda m: (m.updated_at, m.conversation_id), reverse=True)

    def meta(self, key: ConversationKey) -> ConversationMeta:
        rows = self._rows(
            "SELECT meta FROM conversations WHERE agent_id = %s AND conversation_id = %s",
            key.agent_id,
            key.conversation_id,
        )
        if not rows:
            raise ConversationNotFoundError(key.agent_id, key.conversation_id)
        return _meta(rows[0][0])

    def messages(self, key: ConversationKey) -> Sequence[Message]:
        return [r.message for r in self._records(key, "message") if isinstance(r, MessageRecord)]

    def recent(self, key: ConversationKey, limit: int) -> list[Message]:
        if limit < 0:
            raise UsageError("limit must be >= 0")
        if limit == 0:
            self.meta(key)  # a missing conversation is still an error
            return []
        records = self._tail(key, "message", limit)
        return [r.message for r in records if isinstance(r, MessageRecord)]

    def checkpoints(self, key: ConversationKey) -> list[TurnCheckpoint]:
        return checkpoints_of(self._records(key, "checkpoint"))

    def last_checkpoint(self, key: ConversationKey) -> TurnCheckpoint | None:
        found = checkpoints_of(self._tail(key, "checkpoint", 1))
        return found[-1] if found else None

    def turn_log(self, key: ConversationKey, message_id: str) -> str:
        check_id(message_id, "message")
        held = self._holds().get(key)
        if held is not None and held.pending:
            self._commit(key, [], durable=False)  # this thread's notes, not yet written
        rows = self._rows(
            "SELECT body FROM conversation_records WHERE agent_id = %s AND conversation_id = %s"
            " AND turn_id = %s ORDER BY seq",
            key.agent_id,
            key.conversation_id,
            message_id,
        )
        if not rows:
            self.meta(key)  # not found, or no such turn
            raise UsageError(f"conversation {key} has no turn {message_id!r}")
        blocks: list[str] = []
        for record in self._decode([body for (body,) in rows]):
            if isinstance(record, MessageRecord):
                message = record.message
                blocks.append(
                    render_block(role_label(message.role), message.timestamp, message.content)
                )
            elif isinstance(record, AnnotationRecord):
                blocks.append(render_block(record.label, record.at, record.text))
        return "".join(blocks)

    # ------------------------------------------------------------------ verify, recover

    def _keys(self, agent_id: str | None) -> list[ConversationKey]:
        if agent_id is not None:
            check_id(agent_id, "agent")
        rows = self._rows(
            "SELECT agent_id, conversation_id FROM conversations"
            " WHERE %s::text IS NULL OR agent_id = %s::text ORDER BY agent_id, conversation_id",
            agent_id,
            agent_id,
        )
        return [ConversationKey(str(agent), str(conversation)) for agent, conversation in rows]

    def _check(self, key: ConversationKey) -> tuple[list[Problem], Views | None]:
        """What is wrong with one conversation (read in one snapshot), and its fold."""
        agent, name = key.agent_id, key.conversation_id
        with (
            self.db.connection() as connection,
            self.db.errors(f"verifying {key}"),
            connection.transaction(),
        ):
            connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            row = connection.execute(
                "SELECT meta, records FROM conversations"
                " WHERE agent_id = %s AND conversation_id = %s",
                (agent, name),
            ).fetchone()
            bodies = connection.execute(
                "SELECT seq, body FROM conversation_records"
                " WHERE agent_id = %s AND conversation_id = %s ORDER BY seq",
                (agent, name),
            ).fetchall()
        if row is None:
            return [], None  # deleted meanwhile
        problems: list[Problem] = []
        records: list[JournalRecord] = []
        for seq, body in bodies:
            try:
                records.append(decode_record(str(body).encode()))
            except ValueError as error:
                problems.append(Problem(agent, name, "corrupt-record", f"record {seq}: {error}"))
        if problems:
            return problems, None
        try:
            views = fold(records)
        except ValueError as error:
            return [Problem(agent, name, "corrupt-record", str(error))], None
        if views.records != row[1]:
            detail = f"{row[1]} records counted, {views.records} stored"
            problems.append(Problem(agent, name, "meta-mismatch", detail))
        try:
            stored = _meta(row[0])
        except ValueError as error:
            return [*problems, Problem(agent, name, "meta-mismatch", str(error))], views
        if stored != views.meta:
            problems.append(Problem(agent, name, "meta-mismatch", "metadata differs from records"))
        return problems, views

    def verify(self, agent_id: str | None = None) -> VerifyReport:
        """Check every conversation (of one agent, or all): each record validates, the
        records are numbered 1…n, and the stored metadata is their fold. Reads only."""
        keys = self._keys(agent_id)
        problems = [problem for key in keys for problem in self._check(key)[0]]
        return VerifyReport(conversations=len(keys), problems=tuple(problems))

    def recover(self, agent_id: str | None = None, *, full: bool = False) -> list[ConversationKey]:
        """Transactions leave nothing half-written, so by default there is nothing to do.

        ``full=True`` rewrites the metadata of every conversation whose stored metadata is
        not the fold of its records (damage done by hand); busy ones are left alone."""
        if not full:
            if agent_id is not None:
                check_id(agent_id, "agent")
            return []
        repaired: list[ConversationKey] = []
        for key in self._keys(agent_id):
            problems, _ = self._check(key)
            if not problems:
                continue
            with (
                suppress(ConversationBusyError, ConversationNotFoundError, StoreError),
                self.hold(key, timeout=0),
            ):
                _, views = self._check(key)
                held = self._holds()[key]
                connection = self._fenced(held)
                if views is None:
                    continue  # a damaged record: left for a person (verify reports it)
                with self.db.errors(f"repairing {key}"):
                    connection.execute(
                        "UPDATE conversations SET meta = %s, updated_at = %s, records = %s"
                        " WHERE agent_id = %s AND conversation_id = %s AND epoch = %s",
                        (
                            _meta_json(views.meta),
                            views.updated_at,
                            views.records,
                            key.agent_id,
                            key.conversation_id,
                            held.epoch,
                        ),
                    )
                held.meta, held.records = views.meta, views.records
                repaired.append(key)
        return repaired
