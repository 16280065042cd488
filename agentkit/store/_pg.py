"""One PostgreSQL database for the stores: its connection pool, its schema, its errors.

:class:`PostgresDatabase` is what :class:`~agentkit.store.postgres.PostgresConversationStore`
and :class:`~agentkit.store.postgres_kv.PostgresConfigStore` share when they are opened on the
same URL (``agentkit.store.choice``): one ``psycopg_pool.ConnectionPool`` (autocommit
connections, session time zone UTC, each checked when it is handed out, so a server restart
costs the requests in flight and nothing else) and the schema.

The schema is versioned by named migrations (:data:`MIGRATIONS`), applied in order when a
database is opened (``agentkit db upgrade`` runs them alone) and recorded by name in
``agentkit_migrations``. They run in one transaction under an advisory lock, so replicas
starting together apply each one once. A database that records a migration this agentkit does
not know was upgraded by a newer agentkit: it is refused, never written.

The tables live in the connection's current schema (the first of ``search_path``): one
database can hold several agentkit installations in several schemas, and the writer locks
(advisory locks, database-wide) are keyed by that schema too.

Failures to reach the server are :class:`~agentkit.store.base.StoreUnavailableError` (HTTP 503,
"retry"), raised within the pool's timeout, never a hang.
"""

from __future__ import annotations

import hashlib
import select
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final, LiteralString

from agentkit._extras import missing
from agentkit.errors import StoreError, UsageError
from agentkit.store.values import StoreUnavailableError

try:
    import psycopg
    import psycopg_pool
except ImportError as error:  # pragma: no cover - the slim install
    raise missing("postgres", "the PostgreSQL store", error) from error

__all__ = [
    "MIGRATIONS",
    "PostgresDatabase",
    "is_postgres_url",
    "redact_url",
]

#: how long a request waits for a connection while the server was found unreachable moments
#: ago (instead of the pool's timeout): it fails fast, and holds no event loop for seconds
_UNREACHABLE_WAIT: Final = 0.1

#: URL schemes that name a PostgreSQL store (``--store``, ``$AGENTKIT_STORE``)
SCHEMES: Final = ("postgresql://", "postgres://")

#: Named schema migrations, applied in order. Append new ones; never edit or reorder old ones.
MIGRATIONS: tuple[tuple[str, LiteralString], ...] = (
    (
        "0001_conversations",
        """
        CREATE TABLE conversations (
            agent_id        text COLLATE "C" NOT NULL,
            conversation_id text COLLATE "C" NOT NULL,
            meta            text        NOT NULL,   -- ConversationMeta as JSON (meta.json's fields)
            updated_at      timestamptz NOT NULL,
            records         integer     NOT NULL CHECK (records >= 1),  -- seq of the last record
            epoch           bigint      NOT NULL DEFAULT 0,  -- fencing: bumped by every writer
            PRIMARY KEY (agent_id, conversation_id)
        );
        CREATE INDEX conversations_by_update
            ON conversations (agent_id, updated_at DESC, conversation_id DESC);
        -- The journal: one row per record, the same JSON payload as a journal.log frame.
        CREATE TABLE conversation_records (
            agent_id        text COLLATE "C" NOT NULL,
            conversation_id text COLLATE "C" NOT NULL,
            seq             integer NOT NULL CHECK (seq >= 1),
            kind            text    NOT NULL,
            turn_id         text COLLATE "C",        -- messages and annotations: their turn
            body            text    NOT NULL,
            PRIMARY KEY (agent_id, conversation_id, seq),
            FOREIGN KEY (agent_id, conversation_id)
                REFERENCES conversations (agent_id, conversation_id) ON DELETE CASCADE
        );
        CREATE INDEX conversation_records_turns
            ON conversation_records (agent_id, conversation_id, turn_id, seq)
            WHERE turn_id IS NOT NULL;
        CREATE INDEX conversation_records_messages
            ON conversation_records (agent_id, conversation_id, seq) WHERE kind = 'message';
        CREATE INDEX conversation_records_checkpoints
            ON conversation_records (agent_id, conversation_id, seq) WHERE kind = 'checkpoint';
        """,
    ),
    (
        "0002_system_config",
        """
        CREATE TABLE system_config (
            key        text COLLATE "C" PRIMARY KEY,
            value      text        NOT NULL,   -- canonical JSON, exactly as the SQLite store's
            version    integer     NOT NULL CHECK (version >= 1),
            updated_at timestamptz NOT NULL
        );
        """,
    ),
    (
        "0003_turn_events",
        """
        -- The events of each conversation's last turn (agentkit.store.turn_events).
        CREATE TABLE turn_events (
            agent_id        text COLLATE "C" NOT NULL,
            conversation_id text COLLATE "C" NOT NULL,
            message_id      text COLLATE "C" NOT NULL,
            seq             integer NOT NULL CHECK (seq >= 1),
            type            text    NOT NULL,
            body            text    NOT NULL,
            PRIMARY KEY (agent_id, conversation_id, message_id, seq),
            FOREIGN KEY (agent_id, conversation_id)
                REFERENCES conversations (agent_id, conversation_id) ON DELETE CASCADE
        );
        """,
    ),
    (
        "0004_turn_traces",
        """
        -- Each turn's model-call trace (calls.jsonl of the file store), a line per row.
        CREATE TABLE turn_traces (
            id              bigserial PRIMARY KEY,
            agent_id        text COLLATE "C" NOT NULL,
            conversation_id text COLLATE "C" NOT NULL,
            message_id      text COLLATE "C" NOT NULL,
            line            text    NOT NULL,
            FOREIGN KEY (agent_id, conversation_id)
                REFERENCES conversations (agent_id, conversation_id) ON DELETE CASCADE
        );
        CREATE INDEX turn_traces_by_turn ON turn_traces (agent_id, conversation_id, message_id, id);
        """,
    ),
)


def is_postgres_url(spec: str) -> bool:
    return spec.startswith(SCHEMES)


def redact_url(url: str) -> str:
    """*url* without its password (for messages)."""
    scheme, sep, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not at or ":" not in credentials:
        return url
    return f"{scheme}{sep}{credentials.split(':', 1)[0]}:***@{host}"


def _configure(connection: psycopg.Connection[tuple[object, ...]]) -> None:
    connection.execute("SET TIME ZONE 'UTC'")


def _check(connection: psycopg.Connection[tuple[object, ...]]) -> None:
    """Is a pooled connection still usable? Checked as it is handed out, without a round
    trip: an idle connection has nothing to read unless the server ended its session (a
    restart, ``pg_terminate_backend``: a FATAL message, then EOF); only then is it asked,
    and one that fails is replaced by the pool."""
    if connection.closed or connection.broken:
        raise psycopg.OperationalError("the connection is closed")
    readable, _, _ = select.select([connection.fileno()], [], [], 0)
    if readable:
        psycopg_pool.ConnectionPool.check_connection(connection)


class PostgresDatabase:
    """Two connection pools on *url* and the schema there, migrated when opened.

    ``max_size`` connections serve reads and short writes; ``max_turns`` more are the writer
    locks' (:mod:`agentkit.store.postgres`): each running turn holds one for its duration.
    A short operation that finds no connection within ``timeout`` seconds (or no server) is
    a :class:`~agentkit.store.base.StoreUnavailableError`; so is a turn beyond ``max_turns``
    at once, without waiting (turns run on an event loop: waiting there for a connection
    that only a turn of the same loop can give back would stall them all).
    """

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 16,
        max_turns: int = 64,
        timeout: float = 5.0,
        migrate: bool = True,
    ) -> None:
        if not is_postgres_url(url):
            raise UsageError(f"not a PostgreSQL URL (postgresql://…): {redact_url(url)!r}")
        self.url = url
        self.shown = redact_url(url)
        self.timeout = timeout
        self.max_turns = max_turns
        self.pool = self._pool(min_size, max_size, "agentkit")
        self.lock_pool = self._pool(min(min_size, max_turns), max_turns, "agentkit-locks")
        self._taken = 0
        self._taken_guard = threading.Lock()
        #: until when a wait for a connection is short (the server was found unreachable)
        self._unreachable_until = 0.0
        try:
            with self.connection() as connection:
                row = connection.execute("SELECT current_database(), current_schema()").fetchone()
            if row is None or row[1] is None:
                raise StoreError(
                    f"{self.shown}: no current schema (is search_path empty, or does its first "
                    "schema not exist?)"
                )
            #: ``database.schema``: what the tables' advisory locks are keyed by
            self.namespace = f"{row[0]}.{row[1]}"
            if migrate:
                self.upgrade()
        except BaseException:
            self.close()
            raise

    def _pool(
        self, min_size: int, max_size: int, name: str
    ) -> psycopg_pool.ConnectionPool[psycopg.Connection[tuple[object, ...]]]:
        pool: psycopg_pool.ConnectionPool[psycopg.Connection[tuple[object, ...]]] = (
            psycopg_pool.ConnectionPool(
                self.url,
                min_size=min_size,
                max_size=max_size,
                timeout=self.timeout,
                kwargs={"autocommit": True, "connect_timeout": max(1, round(self.timeout))},
                configure=_configure,
                check=_check,
                open=False,
                name=name,
            )
        )
        pool.open(wait=False)
        return pool

    # ------------------------------------------------------------------ connections

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
        """A pooled connection (autocommit) for the block; errors become StoreErrors."""
        with self.errors(), self.pool.connection(timeout=self._wait()) as connection:
            self._unreachable_until = 0.0
            yield connection

    def _wait(self) -> float:
        """The pool's timeout; a fraction of a second after a wait for a connection timed out,
        until one is had again (the pools reconnect in the background meanwhile): while the
        server is down every request fails at once (HTTP 503), and the first waits."""
        return _UNREACHABLE_WAIT if time.monotonic() < self._unreachable_until else self.timeout

    def take(self) -> psycopg.Connection[tuple[object, ...]]:
        """A writer lock's connection, until :meth:`give_back`; none left is an error now."""
        with self._taken_guard:
            if self._taken >= self.max_turns:
                raise StoreUnavailableError(
                    f"PostgreSQL at {self.shown}: this process already runs {self.max_turns} "
                    "turns (max_turns), each holding a connection; retry shortly"
                )
            self._taken += 1
        try:
            with self.errors():
                connection = self.lock_pool.getconn(timeout=self._wait())
            self._unreachable_until = 0.0
            return connection
        except BaseException:
            with self._taken_guard:
                self._taken -= 1
            raise

    def give_back(self, connection: psycopg.Connection[tuple[object, ...]]) -> None:
        """Return a connection :meth:`take` gave (a closed one is dropped by the pool)."""
        with self._taken_guard:
            self._taken -= 1
        self.lock_pool.putconn(connection)

    @contextmanager
    def errors(self, what: str = "") -> Iterator[None]:
        """Turn psycopg's and the pool's errors into agentkit's."""
        doing = f" ({what})" if what else ""
        try:
            yield
        except psycopg_pool.PoolTimeout as error:
            self._unreachable_until = time.monotonic() + max(1.0, self.timeout)
            raise StoreUnavailableError(
                f"PostgreSQL at {self.shown} gave no connection within {self.timeout:.0f}s"
                f"{doing}: is the server up? ({error})"
            ) from error
        except psycopg.OperationalError as error:
            raise StoreUnavailableError(
                f"PostgreSQL at {self.shown} failed{doing}: {error}".strip()
            ) from error
        except psycopg.Error as error:
            raise StoreError(f"PostgreSQL at {self.shown} failed{doing}: {error}") from error

    def lock_id(self, *parts: str) -> int:
        """A 64-bit advisory lock id for *parts* in this database and schema."""
        text = "\x1f".join((self.namespace, *parts)).encode()
        return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big", signed=True)

    def writer_lock_id(self, agent_id: str, conversation_id: str) -> int:
        """The advisory lock a conversation's writer holds (agentkit.store.postgres)."""
        return self.lock_id("conversation", agent_id, conversation_id)

    def is_locked(self, lock_id: int) -> bool:
        """Does any session (of any process) hold the advisory lock *lock_id* now?"""
        unsigned = lock_id & 0xFFFF_FFFF_FFFF_FFFF
        with self.connection() as connection:
            row = connection.execute(
                "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
                " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
                " AND classid = %s::bigint::oid AND objid = %s::bigint::oid AND objsubid = 1)",
                (unsigned >> 32, unsigned & 0xFFFF_FFFF),
            ).fetchone()
        return bool(row and row[0])

    def channel(self, name: str) -> str:
        """A ``LISTEN``/``NOTIFY`` channel of this database and schema."""
        return f"agentkit_{name}_{self.lock_id('channel', name) & 0xFFFF_FFFF:08x}"

    # ------------------------------------------------------------------ schema

    def applied(self) -> list[str]:
        """The names of the migrations applied here, in order."""
        with self.connection() as connection:
            exists = connection.execute(
                "SELECT to_regclass('agentkit_migrations') IS NOT NULL"
            ).fetchone()
            if not exists or not exists[0]:
                return []
            rows = connection.execute(
                "SELECT name FROM agentkit_migrations ORDER BY name"
            ).fetchall()
        return [str(name) for (name,) in rows]

    def upgrade(self) -> list[str]:
        """Apply the migrations this database lacks (in one transaction); their names."""
        known = [name for name, _ in MIGRATIONS]
        done: list[str] = []
        with self.connection() as connection, self.errors("migrating"), connection.transaction():
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (self.lock_id("migrations"),))
            connection.execute(
                "CREATE TABLE IF NOT EXISTS agentkit_migrations ("
                " name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            rows = connection.execute("SELECT name FROM agentkit_migrations").fetchall()
            applied = {str(name) for (name,) in rows}
            unknown = sorted(applied - set(known))
            if unknown:
                raise StoreError(
                    f"{self.shown} has migrations this agentkit does not know "
                    f"({', '.join(unknown)}): it was upgraded by a newer agentkit"
                )
            for name, statement in MIGRATIONS:
                if name in applied:
                    continue
                connection.execute(statement)
                connection.execute("INSERT INTO agentkit_migrations (name) VALUES (%s)", (name,))
                done.append(name)
        return done

    def close(self) -> None:
        """Close the pools (and every connection). Idempotent."""
        self.pool.close()
        self.lock_pool.close()

    def __enter__(self) -> PostgresDatabase:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
