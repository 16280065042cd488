"""The ``system_config`` store in PostgreSQL: key → canonical JSON, with a version for CAS.

The same table and the same meaning as :mod:`agentkit.store.sqlite_kv`, shared by every
replica: ``system_config(key, value, version, updated_at)``.

* Values are stored as the SQLite store's canonical JSON text, not ``jsonb``: ``jsonb`` would
  turn ``1e16`` into an integer, reorder keys and refuse ``\\u0000``, and a value must come
  back exactly as it was written.
* Each operation is one statement, atomic by itself: a compare-and-swap is
  ``UPDATE … WHERE key = %s AND version = %s`` (or ``INSERT … ON CONFLICT DO NOTHING`` for
  version 0), and no row changed is a :class:`~agentkit.store.kv.VersionConflictError`; a
  plain write is an upsert that adds one to the version. No lost update across replicas.
* ``durable=False`` commits with ``synchronous_commit = off``: it survives the process being
  killed, and becomes durable with the next durable commit (the WAL is flushed in order),
  as the SQLite store's ``NORMAL`` commits do.
"""

from __future__ import annotations

from datetime import UTC, datetime

from agentkit.errors import UsageError
from agentkit.store._pg import PostgresDatabase
from agentkit.store.kv import (
    ConfigEntry,
    ConfigStore,
    VersionConflictError,
    check_key,
    decode_value,
    encode_value,
)

__all__ = ["PostgresConfigStore"]

_INSERT = (
    "INSERT INTO system_config (key, value, version, updated_at) VALUES (%s, %s, 1, %s) "
    "ON CONFLICT (key) DO NOTHING RETURNING version"
)
_SWAP = (
    "UPDATE system_config SET value = %s, version = version + 1, updated_at = %s "
    "WHERE key = %s AND version = %s RETURNING version"
)
_UPSERT = (
    "INSERT INTO system_config (key, value, version, updated_at) VALUES (%s, %s, 1, %s) "
    "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, "
    "version = system_config.version + 1, updated_at = EXCLUDED.updated_at RETURNING version"
)


def _entry(key: str, value: object, version: object, updated_at: object) -> ConfigEntry:
    assert isinstance(version, int)
    assert isinstance(updated_at, datetime)
    return ConfigEntry(key, decode_value(str(value)), version, updated_at.astimezone(UTC))


class PostgresConfigStore(ConfigStore):
    """:class:`~agentkit.store.kv.ConfigStore` in PostgreSQL (*database*: a URL or an open
    :class:`~agentkit.store._pg.PostgresDatabase`, shared with a conversation store).

    A store opened on a URL owns its pool: :meth:`close` it (or use ``with``).
    """

    def __init__(self, database: PostgresDatabase | str) -> None:
        self._owned = isinstance(database, str)
        self.db = PostgresDatabase(database) if isinstance(database, str) else database

    def close(self) -> None:
        if self._owned:
            self.db.close()

    def __enter__(self) -> PostgresConfigStore:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PostgresConfigStore({self.db.shown!r})"

    def _one(self, query: str, *params: object, durable: bool = True) -> tuple[object, ...] | None:
        with self.db.connection() as connection:
            if durable:
                return connection.execute(query, params).fetchone()
            with connection.transaction():
                connection.execute("SET LOCAL synchronous_commit = off")
                return connection.execute(query, params).fetchone()

    def _version(self, key: str) -> int:
        row = self._one("SELECT version FROM system_config WHERE key = %s", key)
        if row is None:
            return 0
        version = row[0]
        assert isinstance(version, int)
        return version

    def restore(self, entry: ConfigEntry) -> None:
        check_key(entry.key)
        if entry.version < 1:
            raise UsageError(f"a config entry's version is at least 1, not {entry.version}")
        self._one(
            "INSERT INTO system_config (key, value, version, updated_at) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, version = EXCLUDED.version,"
            " updated_at = EXCLUDED.updated_at RETURNING version",
            entry.key,
            encode_value(entry.value),
            entry.version,
            entry.updated_at,
        )

    def get(self, key: str) -> ConfigEntry | None:
        check_key(key)
        row = self._one(
            "SELECT key, value, version, updated_at FROM system_config WHERE key = %s", key
        )
        return None if row is None else _entry(key, *row[1:])

    def _put(
        self, key: str, text: str, expected: int | None, durable: bool, at: datetime
    ) -> ConfigEntry | int:
        if expected is None:
            row = self._one(_UPSERT, key, text, at, durable=durable)
        elif expected == 0:
            row = self._one(_INSERT, key, text, at, durable=durable)
        else:
            row = self._one(_SWAP, text, at, key, expected, durable=durable)
        return self._version(key) if row is None else _entry(key, text, row[0], at)

    def delete(self, key: str, *, expected_version: int | None = None) -> bool:
        check_key(key)
        if expected_version is None:
            row = self._one("DELETE FROM system_config WHERE key = %s RETURNING 1", key)
            return row is not None
        if expected_version == 0:  # "must not exist": nothing to delete, or a conflict
            actual = self._version(key)
            if actual:
                raise VersionConflictError(key, 0, actual)
            return False
        row = self._one(
            "DELETE FROM system_config WHERE key = %s AND version = %s RETURNING 1",
            key,
            expected_version,
        )
        if row is None:
            raise VersionConflictError(key, expected_version, self._version(key) or None)
        return True

    def keys(self, prefix: str = "") -> list[str]:
        with self.db.connection() as connection:
            # starts_with, not LIKE: '_' and '%' in a prefix are ordinary characters
            rows = connection.execute(
                "SELECT key FROM system_config WHERE starts_with(key, %s)", (prefix,)
            ).fetchall()
        return sorted(str(key) for (key,) in rows)
