"""The ``system_config`` store in SQLite: key → canonical JSON, with a version for CAS.

Why SQLite and how it is configured (reference/reliability.md, rule R8 and §2):

* ``journal_mode=WAL``: readers never block the writer and the writer never blocks readers;
  a commit is one append to the ``-wal`` file.
* Every read-modify-write (``set``, ``delete``) runs in ``BEGIN IMMEDIATE``: the write lock is
  taken *before* the read, so two writers queue on ``busy_timeout`` instead of both reading,
  then failing the lock upgrade with an ``SQLITE_BUSY`` the busy handler cannot absorb
  (measured: 0 errors with IMMEDIATE, 77,667 with deferred ``BEGIN``).
* The compare-and-swap happens inside that transaction: ``UPDATE … WHERE key=? AND version=?``
  and 0 rows changed is a :class:`~agentkit.store.kv.VersionConflictError`. No lost update, even
  across processes.
* ``synchronous=FULL`` (the default here; a write with ``durable=False`` commits with
  ``NORMAL`` and becomes durable with the next FULL commit, whose fsync of the WAL covers
  it). In WAL mode FULL fsyncs the WAL at every commit, so a write whose method has returned
  survives a power loss or an OS crash. With ``NORMAL`` the
  WAL is only fsynced at checkpoints: the database stays consistent, but the last commits before
  a power loss can roll back. For a CAS store that is worse than losing data: a version number
  would be handed out twice, and a writer still holding the lost version's number could then
  succeed against a different value. FULL costs one fsync per commit, and durable writes that
  arrive together share one (a group commit, :class:`_GroupCommit`: turns whose writes run
  side by side in store threads), so under load a write costs less than one fsync; alone,
  exactly one, with no added wait. (Both settings survive an application crash such as
  ``kill -9``: the page cache outlives the process.) ``NORMAL`` stays available for throwaway data.
* One connection per thread (``threading.local``), opened lazily; ``close()`` closes them all.
* On open: ``PRAGMA quick_check`` (a damaged file is a :class:`~agentkit.errors.StoreError`
  naming it, never a half-working store) and the schema migrations, tracked in
  ``PRAGMA user_version``.
* This module never ``open()``s the database, ``-wal`` or ``-shm`` files itself: on POSIX, closing
  *any* descriptor of a file drops every lock the process holds on it.

Values are JSON only (never pickle); keys are always bound as parameters.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Literal

from agentkit.errors import StoreError, UsageError
from agentkit.store._fsio import fsync_dir
from agentkit.store._process import pid
from agentkit.store.kv import (
    ConfigEntry,
    ConfigStore,
    VersionConflictError,
    check_key,
    decode_value,
    encode_value,
)
from agentkit.types import format_timestamp

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SqliteConfigStore"]

#: Named schema migrations, applied in order; ``PRAGMA user_version`` counts those applied.
#: Append new ones, never edit or reorder the old ones.
MIGRATIONS: tuple[tuple[str, str], ...] = (
    (
        "0001_create_system_config",
        """
        CREATE TABLE IF NOT EXISTS system_config (
            key        TEXT    PRIMARY KEY NOT NULL,
            value      TEXT    NOT NULL,
            version    INTEGER NOT NULL CHECK (version >= 1),
            updated_at TEXT    NOT NULL
        )
        """,
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)

Synchronous = Literal["FULL", "NORMAL"]


class _Write:
    """One durable compare-and-swap waiting for its group's commit, and what came of it."""

    __slots__ = ("done", "expected", "key", "outcome", "stamp", "text")

    def __init__(self, key: str, text: str, stamp: str, expected: int | None) -> None:
        self.key = key
        self.text = text
        self.stamp = stamp
        self.expected = expected
        self.outcome: ConfigEntry | int | StoreError | None = None
        self.done = threading.Event()


class _GroupCommit:
    """Durable writes that arrive together are committed together (one fsync).

    The first writer to find nobody committing becomes the leader: it takes every write
    queued so far, commits them in one transaction (*commit*), wakes their writers, and goes
    on while more arrived meanwhile; the others wait for their write's turn. Alone, a writer
    commits its own write at once (no added wait); under load, the writes that queue during
    one fsync share the next. Each write returns only once its commit's fsync is done:
    durability is exactly one FULL commit's.
    """

    def __init__(self, commit: Callable[[list[_Write]], None]) -> None:
        self._commit = commit
        self._guard = threading.Lock()
        self._queue: list[_Write] = []
        self._leading = False
        #: commits made and writes they carried (figures for the bench)
        self.commits = 0
        self.writes = 0

    def write(self, write: _Write) -> ConfigEntry | int:
        with self._guard:
            self._queue.append(write)
            lead = not self._leading
            if lead:
                self._leading = True
        if lead:
            self._lead()
        else:
            write.done.wait()
        outcome = write.outcome
        if isinstance(outcome, StoreError):
            raise outcome
        assert outcome is not None
        return outcome

    def _lead(self) -> None:
        while True:
            with self._guard:
                batch, self._queue = self._queue, []
                if not batch:
                    self._leading = False
                    return
            try:
                self._commit(batch)
            except BaseException as error:  # never leave a follower waiting
                failed = StoreError(f"the group commit failed: {error}")
                for write in batch:
                    if write.outcome is None:
                        write.outcome = failed
                with self._guard:
                    waiting, self._queue = self._queue, []
                    self._leading = False
                for write in [*batch, *waiting]:
                    if write.outcome is None:
                        write.outcome = failed
                    write.done.set()
                raise
            self.commits += 1
            self.writes += len(batch)
            for write in batch:
                write.done.set()


def _entry(key: str, value: str, version: int, updated_at: str) -> ConfigEntry:
    return ConfigEntry(key, decode_value(value), version, datetime.fromisoformat(updated_at))


class SqliteConfigStore(ConfigStore):
    """:class:`~agentkit.store.kv.ConfigStore` in the SQLite file *path* (``agentkit.db``).

    Safe to share between threads (each gets its own connection) and between processes (SQLite
    locks the file). Do not carry an open store across ``fork()``: open a new one in the child.
    Call :meth:`close` (or use ``with``) when done; it must not race with calls still running in
    other threads.
    """

    def __init__(
        self,
        path: Path,
        *,
        busy_timeout_ms: int = 10_000,
        synchronous: Synchronous = "FULL",
    ) -> None:
        if synchronous not in ("FULL", "NORMAL"):
            raise UsageError(f"synchronous must be 'FULL' or 'NORMAL', not {synchronous!r}")
        if busy_timeout_ms < 0:
            raise UsageError(f"busy_timeout_ms must be >= 0, not {busy_timeout_ms}")
        self.path = Path(path)
        self.busy_timeout_ms = busy_timeout_ms
        self.synchronous: Synchronous = synchronous
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._pid = os.getpid()
        self._closed = False
        self._commits = _GroupCommit(self._commit_group)
        created = not self.path.exists()
        connection = self._connect()
        try:
            self._check(connection)
            self._migrate(connection)
        except BaseException:
            connection.close()
            raise
        if created:  # make the new file's directory entry durable too
            fsync_dir(self.path.parent)
        self._adopt(connection)

    # ------------------------------------------------------------------ connections

    def _connect(self) -> sqlite3.Connection:
        try:
            # isolation_level=None: no implicit transactions, every BEGIN is ours.
            # check_same_thread=False only so close() can close other threads' connections;
            # each connection is used by the thread that opened it.
            connection = sqlite3.connect(
                self.path,
                timeout=self.busy_timeout_ms / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as error:
            raise StoreError(f"cannot open the config database {self.path}: {error}") from error
        try:
            connection.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
            mode = connection.execute("PRAGMA journal_mode = WAL").fetchone()
            if mode is None or str(mode[0]).lower() != "wal":
                raise StoreError(f"{self.path}: could not switch to WAL mode (got {mode!r})")
            connection.execute(f"PRAGMA synchronous = {self.synchronous}")
            connection.execute("PRAGMA trusted_schema = OFF")
        except sqlite3.Error as error:
            connection.close()
            problem = f"not a usable SQLite database (corrupt, or not a database?): {error}"
            raise StoreError(f"{self.path}: {problem}") from error
        except BaseException:
            connection.close()
            raise
        return connection

    def _check(self, connection: sqlite3.Connection) -> None:
        try:
            rows = connection.execute("PRAGMA quick_check").fetchall()
        except sqlite3.Error as error:
            raise StoreError(f"{self.path} failed PRAGMA quick_check: {error}") from error
        problems = [str(row[0]) for row in rows]
        if problems != ["ok"]:
            raise StoreError(
                f"{self.path} failed PRAGMA quick_check (the database is damaged; restore a "
                f"backup): {'; '.join(problems[:5])}"
            )

    def _migrate(self, connection: sqlite3.Connection) -> None:
        try:
            with self._transaction(connection):
                row = connection.execute("PRAGMA user_version").fetchone()
                current = int(row[0]) if row else 0
                if current > SCHEMA_VERSION:
                    raise StoreError(
                        f"{self.path} has schema version {current}; this agentkit knows up to "
                        f"{SCHEMA_VERSION} (it was written by a newer agentkit)"
                    )
                for _name, statement in MIGRATIONS[current:]:
                    connection.execute(statement)
                if current < SCHEMA_VERSION:
                    connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except sqlite3.Error as error:
            raise StoreError(f"cannot migrate the config database {self.path}: {error}") from error

    def _adopt(self, connection: sqlite3.Connection) -> None:
        """Make *connection* this thread's; close those of threads that have ended."""
        with self._lock:
            alive = []
            for thread, other in self._connections:
                if thread.is_alive():
                    alive.append((thread, other))
                else:
                    other.close()
            alive.append((threading.current_thread(), connection))
            self._connections = alive
        self._local.connection = connection

    def _connection(self) -> sqlite3.Connection:
        if self._closed:
            raise UsageError(f"the config store {self.path} is closed")
        if pid() != self._pid:
            raise UsageError(
                f"the config store {self.path} was opened before fork(); open a new one here"
            )
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._connect()
            self._adopt(connection)
        return connection

    def _sync_level(self, connection: sqlite3.Connection, level: str) -> None:
        """Set ``PRAGMA synchronous`` for the next commit (only when it changes). In WAL mode a
        FULL commit fsyncs the WAL, and with it every NORMAL commit before it."""
        if getattr(self._local, "level", self.synchronous) != level:
            connection.execute(f"PRAGMA synchronous = {level}")
            self._local.level = level

    @contextlib.contextmanager
    def _transaction(self, connection: sqlite3.Connection) -> Iterator[None]:
        """``BEGIN IMMEDIATE`` … ``COMMIT``; ``ROLLBACK`` on any exception."""
        try:
            connection.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as error:
            raise StoreError(
                f"{self.path}: could not start a write transaction (busy_timeout "
                f"{self.busy_timeout_ms} ms): {error}"
            ) from error
        try:
            yield
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    connection.execute("ROLLBACK")
            raise

    def close(self) -> None:
        """Close every connection this store opened (in any thread). Idempotent."""
        with self._lock:
            self._closed = True
            connections, self._connections = self._connections, []
        for _thread, connection in connections:
            connection.close()

    def __enter__(self) -> SqliteConfigStore:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # ------------------------------------------------------------------ the store

    def get(self, key: str) -> ConfigEntry | None:
        check_key(key)
        connection = self._connection()
        try:
            row = connection.execute(
                "SELECT key, value, version, updated_at FROM system_config WHERE key = ?", (key,)
            ).fetchone()
        except sqlite3.Error as error:
            raise StoreError(f"{self.path}: reading {key!r} failed: {error}") from error
        return None if row is None else _entry(*row)

    def _put(
        self, key: str, text: str, expected: int | None, durable: bool, at: datetime
    ) -> ConfigEntry | int:
        stamp = format_timestamp(at)
        if durable and self.synchronous == "FULL":
            return self._commits.write(_Write(key, text, stamp, expected))
        connection = self._connection()
        try:
            self._sync_level(connection, self.synchronous if durable else "NORMAL")
            if expected is not None:  # the hot path: one statement, atomic by itself
                return self._swap(connection, key, text, stamp, expected)
            with self._transaction(connection):  # any version: read it, then swap from it
                return self._swap(connection, key, text, stamp, self._version(connection, key))
        except sqlite3.Error as error:
            raise StoreError(f"{self.path}: writing {key!r} failed: {error}") from error

    def _commit_group(self, writes: list[_Write]) -> None:
        """*writes* in one ``BEGIN IMMEDIATE`` … ``COMMIT`` with ``synchronous=FULL``: one
        fsync of the WAL makes all of them durable. Each gets its own outcome (an entry, or
        the version found instead); a failure of the transaction is every one's."""
        connection = self._connection()
        try:
            self._sync_level(connection, "FULL")
            with self._transaction(connection):
                for write in writes:
                    expected = write.expected
                    if expected is None:  # any version: the one found, in this transaction
                        expected = self._version(connection, write.key)
                    write.outcome = self._swap(
                        connection, write.key, write.text, write.stamp, expected
                    )
        except sqlite3.Error as error:
            keys = ", ".join(repr(write.key) for write in writes)
            failed = StoreError(f"{self.path}: writing {keys} failed: {error}")
            for write in writes:
                write.outcome = failed
        except StoreError as error:  # BEGIN IMMEDIATE timed out
            for write in writes:
                write.outcome = error

    def restore(self, entry: ConfigEntry) -> None:
        check_key(entry.key)
        if entry.version < 1:
            raise UsageError(f"a config entry's version is at least 1, not {entry.version}")
        text = encode_value(entry.value)
        connection = self._connection()
        try:
            self._sync_level(connection, self.synchronous)
            connection.execute(
                "INSERT INTO system_config (key, value, version, updated_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value, "
                "version = excluded.version, updated_at = excluded.updated_at",
                (entry.key, text, entry.version, format_timestamp(entry.updated_at)),
            )
        except sqlite3.Error as error:
            raise StoreError(f"{self.path}: restoring {entry.key!r} failed: {error}") from error

    def _swap(
        self, connection: sqlite3.Connection, key: str, text: str, stamp: str, expected: int
    ) -> ConfigEntry | int:
        """Compare-and-swap in one statement (its own transaction in autocommit mode): insert
        when *expected* is 0, else update the row only while it is at version *expected*;
        on a mismatch, the version found."""
        if expected == 0:
            changed = connection.execute(
                "INSERT INTO system_config (key, value, version, updated_at) VALUES (?, ?, 1, ?) "
                "ON CONFLICT (key) DO NOTHING",
                (key, text, stamp),
            ).rowcount
        else:
            changed = connection.execute(
                "UPDATE system_config SET value = ?, version = version + 1, updated_at = ? "
                "WHERE key = ? AND version = ?",
                (text, stamp, key, expected),
            ).rowcount
        if changed != 1:
            return self._version(connection, key)
        return _entry(key, text, expected + 1, stamp)

    def delete(self, key: str, *, expected_version: int | None = None) -> bool:
        check_key(key)
        connection = self._connection()
        try:
            with self._transaction(connection):
                actual = self._version(connection, key)
                if expected_version is not None and expected_version != actual:
                    raise VersionConflictError(key, expected_version, actual or None)
                if actual == 0:
                    return False
                changed = connection.execute(
                    "DELETE FROM system_config WHERE key = ? AND version = ?", (key, actual)
                ).rowcount
                if changed != 1:  # cannot happen under BEGIN IMMEDIATE; never ignore it
                    raise VersionConflictError(key, actual, self._version(connection, key) or None)
        except sqlite3.Error as error:
            raise StoreError(f"{self.path}: deleting {key!r} failed: {error}") from error
        return True

    def keys(self, prefix: str = "") -> list[str]:
        connection = self._connection()
        try:
            # substr, not LIKE: '_' and '%' in a prefix are ordinary characters.
            rows = connection.execute(
                "SELECT key FROM system_config WHERE substr(key, 1, ?) = ? ORDER BY key",
                (len(prefix), prefix),
            ).fetchall()
        except sqlite3.Error as error:
            raise StoreError(f"{self.path}: listing keys failed: {error}") from error
        return sorted(str(row[0]) for row in rows)

    @staticmethod
    def _version(connection: sqlite3.Connection, key: str) -> int:
        row = connection.execute(
            "SELECT version FROM system_config WHERE key = ?", (key,)
        ).fetchone()
        return int(row[0]) if row else 0
