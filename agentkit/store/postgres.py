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

This module is the SQL of the PostgreSQL journal backend (:mod:`agentkit.store.backend`);
its writer lease — an advisory lock and a fencing epoch — is :mod:`agentkit.store._pg_lease`,
and everything above records (numbering, forks, checkpoints, turn logs, verify) is the one
conversation layer's (:mod:`agentkit.store.conversation_store`).

* A turn's write whose connection failed is retried once after the lock is taken back; whether
  the first attempt had committed is read from the record count under the same epoch (only
  this writer can have moved it), so nothing is written twice.
* Typed conversation records (compressions, resets) are journal rows of kind ``record``; a
  turn's model-call trace (the file store's ``calls.jsonl``) is ``turn_traces``, a row per
  line, committed on its own without waiting for the WAL flush (as the file store does not
  fsync it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import LiteralString

from agentkit._extras import missing
from agentkit.errors import ConversationNotFoundError, StoreError, UsageError
from agentkit.store._pg import PostgresDatabase
from agentkit.store._pg_lease import Connection, PostgresLease, PostgresLeases, meta_of
from agentkit.store._records import (
    JournalRecord,
    Views,
    decode_record,
    decode_records,
    encode_record,
    fold,
    turn_of,
)
from agentkit.store.backend import JournalBackend, Lease, LeaseMovedError, RecordKind, Scanned
from agentkit.store.conversation_store import ConversationStore
from agentkit.store.values import CallRecordSink, ConversationKey, Problem, StoreUnavailableError
from agentkit.types import ConversationMeta

try:
    import psycopg
    from psycopg import sql
except ImportError as error:  # pragma: no cover - the slim install
    raise missing("postgres", "the PostgreSQL store", error) from error

__all__ = ["APPEND", "PostgresConversationStore", "PostgresJournal"]

#: A held writer's commit: one statement, fenced by the epoch and the record count it knows;
#: the commit waits for the WAL flush unless %(durable)s is false (set_config local to its
#: transaction). A brief lease's write bumps the epoch (%(bump)s = 1), fencing out a turn
#: that lost its lock meanwhile; a turn's lease bumped it when it was taken.
APPEND = """
WITH settings AS (
    SELECT set_config('synchronous_commit',
        CASE WHEN %(durable)s THEN current_setting('synchronous_commit') ELSE 'off' END, true)
), fenced AS (
    UPDATE conversations SET meta = %(meta)s, updated_at = %(updated)s, records = %(records)s,
        epoch = epoch + %(bump)s
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
_INSERT_RECORDS = """
INSERT INTO conversation_records (agent_id, conversation_id, seq, kind, turn_id, body)
SELECT %(agent)s, %(conversation)s, r.seq, r.kind, r.turn_id, r.body
FROM unnest(%(seqs)s::integer[], %(kinds)s::text[], %(turns)s::text[], %(bodies)s::text[])
     AS r(seq, kind, turn_id, body)
"""
_INSERT_TRACE = (
    "INSERT INTO turn_traces (agent_id, conversation_id, message_id, line) VALUES (%s, %s, %s, %s)"
)


class _RowSink(CallRecordSink):
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
                    _INSERT_TRACE, (key.agent_id, key.conversation_id, self._message_id, line)
                )
            except psycopg.errors.ForeignKeyViolation:
                raise ConversationNotFoundError(key.agent_id, key.conversation_id) from None


def _columns(key: ConversationKey, records: Sequence[JournalRecord]) -> dict[str, object]:
    return {
        "agent": key.agent_id,
        "conversation": key.conversation_id,
        "seqs": [record.seq for record in records],
        "kinds": [record.kind for record in records],
        "turns": [turn_of(record) for record in records],
        "bodies": [encode_record(record).decode() for record in records],
    }


def _read_query(kinds: frozenset[RecordKind] | None, turn: bool, last: bool) -> sql.Composed:
    """The records of a conversation (of *kinds*, of a turn, the last N), and a row with a
    NULL body when it has none: no row at all means no such conversation. The kinds are
    literals in the text, so the partial indexes on messages and checkpoints serve it."""
    where: list[sql.Composable] = [
        sql.SQL("r.agent_id = c.agent_id AND r.conversation_id = c.conversation_id")
    ]
    if kinds is not None:
        where.append(
            sql.SQL("r.kind IN ({})").format(sql.SQL(", ").join(map(sql.Literal, sorted(kinds))))
        )
    if turn:
        where.append(sql.SQL("r.turn_id = %(turn)s"))
    return sql.SQL(
        "SELECT t.body FROM conversations c LEFT JOIN LATERAL ("
        " SELECT r.body, r.seq FROM conversation_records r WHERE {where}"
        " ORDER BY r.seq DESC{limit}) t ON true"
        " WHERE c.agent_id = %(agent)s AND c.conversation_id = %(conversation)s ORDER BY t.seq"
    ).format(
        where=sql.SQL(" AND ").join(where),
        limit=sql.SQL(" LIMIT %(last)s") if last else sql.SQL(""),
    )


class PostgresJournal(JournalBackend):
    """Conversations' records in the PostgreSQL database *db* (see the module docstring)."""

    remote = True

    def __init__(self, db: PostgresDatabase, *, lock_timeout: float = 10.0) -> None:
        self.db = db
        self.lock_timeout = lock_timeout
        self.leases = PostgresLeases(db)

    # ------------------------------------------------------------------ the writer lease

    def acquire(self, key: ConversationKey, wait: float, *, brief: bool = False) -> Lease:
        return self.leases.acquire(key, wait, brief=brief)

    def release(self, lease: Lease, *, failed: bool = False) -> None:
        self.leases.release(PostgresLease.own(lease), failed=failed)

    # ------------------------------------------------------------------ writes

    def append(
        self,
        lease: Lease,
        records: Sequence[JournalRecord],
        meta: ConversationMeta,
        *,
        durable: bool,
    ) -> None:
        own = PostgresLease.own(lease)
        key = own.key
        before = own.records
        for attempt in (1, 2):
            connection = self.leases.fenced(own, self.lock_timeout)
            if own.records != before:  # taken back: a write of ours reported lost had committed
                raise LeaseMovedError(f"{key} has {own.records} records, this writer knew {before}")
            try:
                self._append_fenced(connection, own, records, meta, durable=durable)
            except _FencedError:
                raise self.leases.stale(own) from None  # NotFound: deleted under us
            except psycopg.Error as error:
                lost = isinstance(error, psycopg.OperationalError)  # e.g. a server shutdown
                if own.brief or not (lost or connection.closed or connection.broken):
                    what = StoreUnavailableError if lost else StoreError
                    raise what(
                        f"could not write to {key}: {error}; nothing acknowledged"
                    ) from error
                self.leases.lose(own)
                try:
                    self.leases.fenced(own, self.lock_timeout)  # the lock back, and the count
                except StoreUnavailableError:
                    raise StoreUnavailableError(
                        f"could not write to {key}: the connection to PostgreSQL was lost "
                        f"({error}); nothing acknowledged"
                    ) from error
                if own.records == before + len(records):  # it had committed after all
                    own.records = before
                    break
                if own.records != before:
                    raise StoreError(
                        f"could not write to {key}: {error}; nothing acknowledged"
                    ) from error
                if attempt == 2:  # lost twice: the server is going away again
                    raise (StoreUnavailableError if lost else StoreError)(
                        f"could not write to {key}: {error}; nothing acknowledged"
                    ) from error
                continue  # it had not: write it again, under the same epoch
            break
        own.wrote = True
        own.moved(meta, len(records))

    def _append_fenced(
        self,
        connection: Connection,
        lease: PostgresLease,
        records: Sequence[JournalRecord],
        meta: ConversationMeta,
        *,
        durable: bool,
    ) -> None:
        params = {
            **_columns(lease.key, records),
            "meta": meta.model_dump_json(by_alias=True),
            "updated": meta.updated_at,
            "records": lease.records + len(records),
            "epoch": lease.epoch,
            "previous": lease.records,
            "durable": durable,
            "bump": 1 if lease.brief else 0,
        }
        cursor = connection.execute(APPEND, params)  # one statement (a turn's: its own transaction)
        if cursor.rowcount != len(records):
            raise _FencedError
        if lease.brief:
            lease.epoch += 1

    def create(
        self,
        key: ConversationKey,
        records: Sequence[JournalRecord],
        meta: ConversationMeta,
        traces: Mapping[str, Sequence[str]],
        prepare: Callable[[], None] | None = None,
    ) -> None:
        """The conversation, its records and traces in one transaction (``prepare`` runs
        last in it: before the conversation is visible)."""
        rows = [
            (key.agent_id, key.conversation_id, turn, line)
            for turn, lines in traces.items()
            for line in lines
        ]
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
                        meta.model_dump_json(by_alias=True),
                        meta.updated_at,
                        len(records),
                    ),
                )
            except psycopg.errors.UniqueViolation:
                raise UsageError(f"conversation {key} already exists") from None
            connection.execute(_INSERT_RECORDS, _columns(key, records))
            if rows:
                with connection.cursor() as cursor:
                    cursor.executemany(_INSERT_TRACE, rows)
            if prepare is not None:
                prepare()

    def delete(self, lease: Lease) -> None:
        own = PostgresLease.own(lease)
        key = own.key
        connection = self.leases.fenced(own, self.lock_timeout)
        with self.db.errors(f"deleting {key}"):
            row = connection.execute(
                "DELETE FROM conversations"
                " WHERE agent_id = %s AND conversation_id = %s AND epoch = %s RETURNING 1",
                (key.agent_id, key.conversation_id, own.epoch),
            ).fetchone()
        if row is None:
            raise self.leases.stale(own)
        own.wrote = True

    # ------------------------------------------------------------------ reads

    def _rows(
        self, query: LiteralString | sql.Composed, params: Sequence[object] | Mapping[str, object]
    ) -> list[tuple[object, ...]]:
        with self.db.connection() as connection:
            return connection.execute(query, params).fetchall()

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
                (key.agent_id, key.conversation_id),
            )
        )

    def meta(self, key: ConversationKey) -> ConversationMeta:
        rows = self._rows(
            "SELECT meta FROM conversations WHERE agent_id = %s AND conversation_id = %s",
            (key.agent_id, key.conversation_id),
        )
        if not rows:
            raise ConversationNotFoundError(key.agent_id, key.conversation_id)
        return meta_of(rows[0][0])

    def listing(self, agent_id: str) -> list[ConversationMeta]:
        rows = self._rows("SELECT meta FROM conversations WHERE agent_id = %s", (agent_id,))
        return [meta_of(meta) for (meta,) in rows]

    def keys(self, agent_id: str | None) -> list[ConversationKey]:
        rows = self._rows(
            "SELECT agent_id, conversation_id FROM conversations"
            " WHERE %s::text IS NULL OR agent_id = %s::text ORDER BY agent_id, conversation_id",
            (agent_id, agent_id),
        )
        return [ConversationKey(str(agent), str(conversation)) for agent, conversation in rows]

    def read(
        self,
        key: ConversationKey,
        kinds: frozenset[RecordKind] | None = None,
        *,
        turn: str | None = None,
        last: int | None = None,
    ) -> list[JournalRecord]:
        query = _read_query(kinds, turn is not None, last is not None)
        params = {
            "agent": key.agent_id,
            "conversation": key.conversation_id,
            "turn": turn,
            "last": last,
        }
        rows = self._rows(query, params)
        if not rows:
            raise ConversationNotFoundError(key.agent_id, key.conversation_id)
        return self._decode([body for (body,) in rows if body is not None])

    # ------------------------------------------------------------------ traces

    def open_call_records(self, key: ConversationKey, message_id: str) -> CallRecordSink:
        return _RowSink(self.db, key, message_id)

    def call_records(self, key: ConversationKey, message_id: str) -> list[str]:
        rows = self._rows(
            "SELECT t.line FROM conversations c LEFT JOIN turn_traces t"
            " ON t.agent_id = c.agent_id AND t.conversation_id = c.conversation_id"
            " AND t.message_id = %s WHERE c.agent_id = %s AND c.conversation_id = %s"
            " ORDER BY t.id",
            (message_id, key.agent_id, key.conversation_id),
        )
        if not rows:
            raise ConversationNotFoundError(key.agent_id, key.conversation_id)
        return [str(line) for (line,) in rows if line is not None]

    # ------------------------------------------------------------------ verify, recover

    def scan(self, key: ConversationKey) -> Scanned:
        rows = self._rows(
            "SELECT seq, body FROM conversation_records"
            " WHERE agent_id = %s AND conversation_id = %s ORDER BY seq",
            (key.agent_id, key.conversation_id),
        )
        problems: list[Problem] = []
        records: list[JournalRecord] = []
        for seq, body in rows:
            try:
                records.append(decode_record(str(body).encode()))
            except ValueError as error:
                detail = f"record {seq}: {error}"
                problems.append(
                    Problem(key.agent_id, key.conversation_id, "corrupt-record", detail)
                )
        return Scanned(None if problems else records, len(records), problems)

    def check(self, key: ConversationKey, views: Views, scanned: Scanned) -> list[Problem]:
        agent, name = key.agent_id, key.conversation_id
        rows = self._rows(
            "SELECT meta, records FROM conversations WHERE agent_id = %s AND conversation_id = %s",
            (agent, name),
        )
        if not rows:
            return []  # deleted meanwhile
        text, count = rows[0]
        problems: list[Problem] = []
        if views.records != count:
            detail = f"{count} records counted, {views.records} stored"
            problems.append(Problem(agent, name, "meta-mismatch", detail))
        try:
            stored = meta_of(text)
        except ValueError as error:
            return [*problems, Problem(agent, name, "meta-mismatch", str(error))]
        if stored != views.meta:
            problems.append(Problem(agent, name, "meta-mismatch", "metadata differs from records"))
        return problems

    def repair(self, lease: Lease, *, full: bool) -> bool:
        """Transactions leave nothing half-written: only ``full`` has something to do, the
        metadata rewritten when it is not the fold of the records (damage done by hand)."""
        own = PostgresLease.own(lease)
        if not full:
            return False
        key = own.key
        views = fold(self.read(key))
        if views.meta == own.meta and views.records == own.records:
            return False
        connection = self.leases.fenced(own, self.lock_timeout)
        with self.db.errors(f"repairing {key}"):
            connection.execute(
                "UPDATE conversations SET meta = %s, updated_at = %s, records = %s"
                " WHERE agent_id = %s AND conversation_id = %s AND epoch = %s",
                (
                    views.meta.model_dump_json(by_alias=True),
                    views.updated_at,
                    views.records,
                    key.agent_id,
                    key.conversation_id,
                    own.epoch,
                ),
            )
        own.wrote = True
        own.meta, own.records = views.meta, views.records
        return True


class _FencedError(Exception):
    """The fenced UPDATE matched no row (internal)."""


class PostgresConversationStore(ConversationStore):
    """The conversation store over :class:`PostgresJournal`, in the database at *database*
    (a URL or an open :class:`~agentkit.store._pg.PostgresDatabase`, shared with a config
    store).

    ``lock_timeout`` is how long a writer waits for a busy conversation. A store opened on a
    URL owns its pool: :meth:`close` it (or use ``with``).
    """

    backend: PostgresJournal

    def __init__(self, database: PostgresDatabase | str, *, lock_timeout: float = 10.0) -> None:
        self._owned = isinstance(database, str)
        db = PostgresDatabase(database) if isinstance(database, str) else database
        super().__init__(PostgresJournal(db, lock_timeout=lock_timeout))
        self.db = db

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

    def is_held(self, key: ConversationKey) -> bool:
        """Does a writer (a turn, of any process or replica) hold the conversation now?"""
        return self.backend.leases.is_held(key)
