"""The desk's database: a simulated trading-desk configuration (no exchange is ever contacted).

One SQLite file, ``{agent}/workspace/desk.db``, holds model configs, exchange accounts,
traders and preferences. Invariants:

* Secrets (``api_key``, ``secret_key``) are stored raw here and nowhere else; every record
  leaving through a tool is masked by the registry, and :meth:`DeskDatabase.secret_values`
  gives the values to scrub from free text (logs, prompts).
* References hold: a trader's ``exchange_id``/``model_id`` name existing rows (checked inside
  the write transaction, and by foreign keys); trader names are unique (case-insensitive).
* Writes run in ``BEGIN IMMEDIATE`` transactions (WAL mode), so two processes never interleave
  a check and a write. Ids are never reused: ``model-N``, ``ex-N``, ``trader-N``.
* The file is opened on first use, not on construction: validating a call writes nothing.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Literal

from agentkit.errors import StoreError
from agentkit.tools import ToolFailedError
from agentkit.types import format_timestamp, utc_now
from pydantic import BaseModel, ConfigDict, Field, JsonValue

__all__ = [
    "DESK_FILE",
    "DeskDatabase",
    "DeskError",
    "ExchangeConfig",
    "ModelConfig",
    "Trader",
    "open_desk",
]

DESK_FILE = "desk.db"
SCHEMA_VERSION = 1
_PREFIXES: dict[str, str] = {"model": "model", "exchange": "ex", "trader": "trader"}
_LISTED_BY: dict[str, str] = {
    "model": "get_model_configs",
    "exchange": "get_exchange_configs",
    "trader": "list_traders",
}
_SCHEMA = """
CREATE TABLE IF NOT EXISTS model_configs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    api_key TEXT,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS exchange_configs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    exchange TEXT NOT NULL,
    account_name TEXT NOT NULL,
    api_key TEXT NOT NULL,
    secret_key TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS traders (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE COLLATE NOCASE,
    exchange_id INTEGER NOT NULL REFERENCES exchange_configs(id),
    model_id INTEGER NOT NULL REFERENCES model_configs(id),
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS preferences (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""

Kind = Literal["model", "exchange", "trader"]


class DeskError(ToolFailedError):
    """A desk request that cannot be done: a missing reference, a duplicate trader name."""


# -- records ---------------------------------------------------------------------------------


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelConfig(_Record):
    id: str
    provider: str
    model: str
    api_key: str | None = Field(default=None, repr=False)
    created_at: str


class ExchangeConfig(_Record):
    id: str
    exchange: str
    account_name: str
    api_key: str = Field(repr=False)
    secret_key: str = Field(repr=False)
    created_at: str


class Trader(_Record):
    id: str
    name: str
    exchange_id: str
    model_id: str
    created_at: str
    updated_at: str


# -- storage ---------------------------------------------------------------------------------


def _format_id(kind: Kind, number: int) -> str:
    return f"{_PREFIXES[kind]}-{number}"


def _parse_id(kind: Kind, value: str) -> int:
    match = re.fullmatch(rf"{_PREFIXES[kind]}-([1-9][0-9]{{0,17}})", value.strip())
    if match is None:
        raise _missing(kind, value)
    return int(match.group(1))


def _missing(kind: Kind, value: str) -> DeskError:
    label = {"model": "model config", "exchange": "exchange config", "trader": "trader"}[kind]
    return DeskError(
        f"no {label} with id {value!r} (ids look like '{_PREFIXES[kind]}-1'; "
        f"{_LISTED_BY[kind]} lists them)"
    )


class DeskDatabase:
    """The desk's SQLite file. Thread-safe (one connection behind a lock); close it when done,
    or use it as a context manager."""

    def __init__(self, path: Path, *, timeout: float = 5.0) -> None:
        self.path = Path(path)
        self._timeout = timeout
        self._lock = threading.RLock()
        self._connection: sqlite3.Connection | None = None
        self._closed = False
        #: the last secret_values() answer and the database version it was read at
        self._secrets: tuple[tuple[int, int], frozenset[str]] | None = None

    def __enter__(self) -> DeskDatabase:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (idempotent); later use is a :class:`StoreError`."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None
            self._closed = True

    # -- connection and transactions --

    def _connect(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreError(f"desk database {self.path} is closed")
        if self._connection is None:
            try:
                self._connection = self._open()
            except sqlite3.Error as error:
                raise StoreError(f"desk database {self.path}: {error}") from error
        return self._connection

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(
            self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False
        )
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA foreign_keys=ON")
            version = connection.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"desk database {self.path} has schema version {version}; "
                    f"this agentkit reads up to {SCHEMA_VERSION}"
                )
            connection.executescript(
                f"BEGIN IMMEDIATE;{_SCHEMA}PRAGMA user_version={SCHEMA_VERSION};COMMIT;"
            )
        except BaseException:
            connection.close()
            raise
        return connection

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            connection = self._connect()
            try:
                yield connection
            except sqlite3.Error as error:
                raise StoreError(f"desk database {self.path}: {error}") from error

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: committed when the body returns, rolled back
        when it raises (sqlite errors become :class:`StoreError`)."""
        with self._lock:
            connection = self._connect()
            try:
                connection.execute("BEGIN IMMEDIATE")
                yield connection
                connection.execute("COMMIT")
            except BaseException as error:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                if isinstance(error, sqlite3.Error):
                    raise StoreError(f"desk database {self.path}: {error}") from error
                raise

    @staticmethod
    def _exists(connection: sqlite3.Connection, table: str, number: int) -> bool:
        query = {
            "model_configs": "SELECT 1 FROM model_configs WHERE id = ?",
            "exchange_configs": "SELECT 1 FROM exchange_configs WHERE id = ?",
            "traders": "SELECT 1 FROM traders WHERE id = ?",
        }[table]
        return connection.execute(query, (number,)).fetchone() is not None

    # -- model configs --

    def model_configs(self) -> list[ModelConfig]:
        with self._read() as connection:
            rows = connection.execute(
                "SELECT id, provider, model, api_key, created_at FROM model_configs ORDER BY id"
            ).fetchall()
        return [_model_config(row) for row in rows]

    def add_model_config(self, provider: str, model: str, api_key: str | None) -> ModelConfig:
        with self._write() as connection:
            cursor = connection.execute(
                "INSERT INTO model_configs (provider, model, api_key, created_at) "
                "VALUES (?, ?, ?, ?)",
                (provider, model, api_key, _now()),
            )
            row = connection.execute(
                "SELECT id, provider, model, api_key, created_at FROM model_configs WHERE id = ?",
                (cursor.lastrowid,),
            ).fetchone()
        return _model_config(row)

    # -- exchange configs --

    def exchange_configs(self) -> list[ExchangeConfig]:
        with self._read() as connection:
            rows = connection.execute(
                "SELECT id, exchange, account_name, api_key, secret_key, created_at "
                "FROM exchange_configs ORDER BY id"
            ).fetchall()
        return [_exchange_config(row) for row in rows]

    def add_exchange_config(
        self, exchange: str, account_name: str, api_key: str, secret_key: str
    ) -> ExchangeConfig:
        with self._write() as connection:
            cursor = connection.execute(
                "INSERT INTO exchange_configs "
                "(exchange, account_name, api_key, secret_key, created_at) VALUES (?, ?, ?, ?, ?)",
                (exchange, account_name, api_key, secret_key, _now()),
            )
            row = connection.execute(
                "SELECT id, exchange, account_name, api_key, secret_key, created_at "
                "FROM exchange_configs WHERE id = ?",
                (cursor.lastrowid,),
            ).fetchone()
        return _exchange_config(row)

    # -- traders --

    def traders(self) -> list[Trader]:
        with self._read() as connection:
            rows = connection.execute(_TRADER_SELECT + " ORDER BY id").fetchall()
        return [_trader(row) for row in rows]

    def get_trader(self, trader_id: str) -> Trader:
        number = _parse_id("trader", trader_id)
        with self._read() as connection:
            row = connection.execute(_TRADER_SELECT + " WHERE id = ?", (number,)).fetchone()
        if row is None:
            raise _missing("trader", trader_id)
        return _trader(row)

    def add_trader(self, name: str, exchange_id: str, model_id: str) -> Trader:
        exchange = _parse_id("exchange", exchange_id)
        model = _parse_id("model", model_id)
        with self._write() as connection:
            self._check_refs(connection, exchange_id, model_id)
            now = _now()
            try:
                cursor = connection.execute(
                    "INSERT INTO traders (name, exchange_id, model_id, created_at, updated_at) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (name, exchange, model, now, now),
                )
            except sqlite3.IntegrityError:
                raise _duplicate(name) from None
            row = connection.execute(
                _TRADER_SELECT + " WHERE id = ?", (cursor.lastrowid,)
            ).fetchone()
        return _trader(row)

    def update_trader(
        self,
        trader_id: str,
        *,
        name: str | None = None,
        exchange_id: str | None = None,
        model_id: str | None = None,
    ) -> Trader:
        """Change the given fields; at least one must be given."""
        if name is None and exchange_id is None and model_id is None:
            raise DeskError("update_trader needs at least one of name, exchange_id, model_id")
        number = _parse_id("trader", trader_id)
        with self._write() as connection:
            row = connection.execute(_TRADER_SELECT + " WHERE id = ?", (number,)).fetchone()
            if row is None:
                raise _missing("trader", trader_id)
            current = _trader(row)
            self._check_refs(connection, exchange_id, model_id)
            new_exchange = _parse_id("exchange", exchange_id or current.exchange_id)
            new_model = _parse_id("model", model_id or current.model_id)
            try:
                connection.execute(
                    "UPDATE traders SET name = ?, exchange_id = ?, model_id = ?, updated_at = ? "
                    "WHERE id = ?",
                    (
                        name if name is not None else current.name,
                        new_exchange,
                        new_model,
                        _now(),
                        number,
                    ),
                )
            except sqlite3.IntegrityError:
                raise _duplicate(name if name is not None else current.name) from None
            row = connection.execute(_TRADER_SELECT + " WHERE id = ?", (number,)).fetchone()
        return _trader(row)

    def delete_trader(self, trader_id: str) -> Trader:
        """Delete a trader; returns the record as it was."""
        number = _parse_id("trader", trader_id)
        with self._write() as connection:
            row = connection.execute(_TRADER_SELECT + " WHERE id = ?", (number,)).fetchone()
            if row is None:
                raise _missing("trader", trader_id)
            connection.execute("DELETE FROM traders WHERE id = ?", (number,))
        return _trader(row)

    def _check_refs(
        self, connection: sqlite3.Connection, exchange_id: str | None, model_id: str | None
    ) -> None:
        if exchange_id is not None and not self._exists(
            connection, "exchange_configs", _parse_id("exchange", exchange_id)
        ):
            raise _missing("exchange", exchange_id)
        if model_id is not None and not self._exists(
            connection, "model_configs", _parse_id("model", model_id)
        ):
            raise _missing("model", model_id)

    # -- preferences --

    def preferences(self) -> dict[str, JsonValue]:
        with self._read() as connection:
            rows = connection.execute("SELECT key, value FROM preferences ORDER BY key").fetchall()
        return {str(key): json.loads(value) for key, value in rows}

    def set_preference(self, key: str, value: JsonValue) -> None:
        encoded = json.dumps(value, ensure_ascii=False, sort_keys=True)
        with self._write() as connection:
            connection.execute(
                "INSERT INTO preferences (key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (key, encoded),
            )

    # -- secrets --

    def secret_values(self) -> frozenset[str]:
        """Every stored secret (to scrub from logs and prompts with ``scrub_text``).

        Asked for on every model call: the answer is kept while the database is unchanged
        (``PRAGMA data_version`` moves with other connections' commits, ``total_changes``
        with this one's)."""
        with self._read() as connection:
            (data_version,) = connection.execute("PRAGMA data_version").fetchone()
            version = (int(data_version), connection.total_changes)
            if self._secrets is not None and self._secrets[0] == version:
                return self._secrets[1]
            rows = connection.execute(
                "SELECT api_key FROM model_configs WHERE api_key IS NOT NULL "
                "UNION SELECT api_key FROM exchange_configs "
                "UNION SELECT secret_key FROM exchange_configs"
            ).fetchall()
            found = frozenset(str(value) for (value,) in rows if value)
            self._secrets = (version, found)
        return found


_TRADER_SELECT = "SELECT id, name, exchange_id, model_id, created_at, updated_at FROM traders"


def _now() -> str:
    return format_timestamp(utc_now())


def _duplicate(name: str) -> DeskError:
    return DeskError(f"a trader named {name!r} already exists (names are unique)")


def _model_config(row: tuple[object, ...]) -> ModelConfig:
    number, provider, model, api_key, created_at = row
    assert isinstance(number, int)
    return ModelConfig(
        id=_format_id("model", number),
        provider=str(provider),
        model=str(model),
        api_key=None if api_key is None else str(api_key),
        created_at=str(created_at),
    )


def _exchange_config(row: tuple[object, ...]) -> ExchangeConfig:
    number, exchange, account_name, api_key, secret_key, created_at = row
    assert isinstance(number, int)
    return ExchangeConfig(
        id=_format_id("exchange", number),
        exchange=str(exchange),
        account_name=str(account_name),
        api_key=str(api_key),
        secret_key=str(secret_key),
        created_at=str(created_at),
    )


def _trader(row: tuple[object, ...]) -> Trader:
    number, name, exchange_id, model_id, created_at, updated_at = row
    assert isinstance(number, int)
    assert isinstance(exchange_id, int)
    assert isinstance(model_id, int)
    return Trader(
        id=_format_id("trader", number),
        name=str(name),
        exchange_id=_format_id("exchange", exchange_id),
        model_id=_format_id("model", model_id),
        created_at=str(created_at),
        updated_at=str(updated_at),
    )


def open_desk(workspace: Path) -> DeskDatabase:
    """The desk database of an agent workspace: ``workspace / "desk.db"``."""
    return DeskDatabase(Path(workspace) / DESK_FILE)
