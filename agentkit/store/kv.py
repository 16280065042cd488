"""The ``system_config`` store: key → JSON value, with a version for compare-and-swap.

TaskState, ExecutionState and preferences live here (seed 002 keeps them in a
``system_config`` table). Every value carries a ``version`` that starts at 1 and grows by one
with each write; a write that names the version it read (``expected_version``) fails with
:class:`VersionConflictError` when someone else wrote in between, so two writers never
silently overwrite each other. Values are JSON only, never pickle.

Implementations: :class:`InMemoryConfigStore` here (the reference) and the SQLite store in
``agentkit.store.sqlite_kv``; both pass tests/test_kv_contract.py.
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime

from pydantic import JsonValue

from agentkit.errors import AgentkitError, UsageError
from agentkit.types import utc_now

__all__ = [
    "MAX_KEY_LENGTH",
    "ConfigEntry",
    "ConfigStore",
    "InMemoryConfigStore",
    "VersionConflictError",
    "check_key",
    "decode_value",
    "encode_value",
]

MAX_KEY_LENGTH = 200


class VersionConflictError(AgentkitError):
    """A compare-and-swap write found another version than the one it expected."""

    def __init__(self, key: str, expected: int | None, actual: int | None) -> None:
        self.key = key
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"{key!r} changed meanwhile: expected version {expected}, found {actual}; "
            "reload it and apply the change again"
        )


def check_key(key: str) -> str:
    """Keys are printable ASCII without spaces, 1-200 characters (e.g. ``task_state:a:c``)."""
    if not (0 < len(key) <= MAX_KEY_LENGTH and key.isascii() and key.isprintable()) or " " in key:
        raise UsageError(
            f"invalid config key {key!r}: 1-{MAX_KEY_LENGTH} printable ASCII, no spaces"
        )
    return key


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    key: str
    value: JsonValue
    version: int
    updated_at: datetime


def encode_value(value: JsonValue) -> str:
    """Canonical JSON: sorted keys, no spaces, UTF-8 text, no NaN/Infinity (what every store
    keeps, so a value comes back exactly as it was written)."""
    try:
        return json.dumps(
            value, ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":")
        )
    except (TypeError, ValueError) as error:
        raise UsageError(f"a config value must be JSON: {error}") from None


def decode_value(text: str) -> JsonValue:
    result: JsonValue = json.loads(text)
    return result


class ConfigStore(ABC):
    """Key → JSON value with versions. Writes are durable when the method returns.

    A store implements :meth:`_put` (one compare-and-swap of canonical JSON text);
    :meth:`set`, the key and value checks and the conflict error are written here once."""

    @abstractmethod
    def get(self, key: str) -> ConfigEntry | None: ...

    def set(
        self,
        key: str,
        value: JsonValue,
        *,
        expected_version: int | None = None,
        durable: bool = True,
    ) -> ConfigEntry:
        """Write *value*. With ``expected_version`` (0 = "must not exist yet") the write is a
        compare-and-swap and raises :class:`VersionConflictError` on a mismatch.

        ``durable=False`` returns before the write is on disk: it survives the process being
        killed, and becomes durable with the next durable write (a group commit); only a power
        loss before that can roll it back. The planner uses it between durability points."""
        text = encode_value(value)
        written = self._put(check_key(key), text, expected_version, durable, utc_now())
        if isinstance(written, int):
            raise VersionConflictError(key, expected_version, written or None)
        return written

    @abstractmethod
    def _put(
        self, key: str, text: str, expected: int | None, durable: bool, at: datetime
    ) -> ConfigEntry | int:
        """Store *text* (canonical JSON) at *key*, stamped *at*, one version up, when it is
        at version *expected* (0: absent; None: any): the entry written; else the version
        found instead (0: absent), and nothing written."""

    @abstractmethod
    def delete(self, key: str, *, expected_version: int | None = None) -> bool:
        """Remove *key*; True if it existed."""

    @abstractmethod
    def keys(self, prefix: str = "") -> list[str]:
        """Keys starting with *prefix*, sorted."""

    @abstractmethod
    def restore(self, entry: ConfigEntry) -> None:
        """Write *entry* exactly as given (its version and time), replacing what is there:
        how ``agentkit import`` moves memory between stores with its CAS versions intact."""


class InMemoryConfigStore(ConfigStore):
    """The reference: entries kept as their canonical JSON text, decoded on every read (so
    no caller holds the stored value)."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[str, int, datetime]] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> ConfigEntry | None:
        with self._lock:
            found = self._entries.get(check_key(key))
        if found is None:
            return None
        text, version, at = found
        return ConfigEntry(key, decode_value(text), version, at)

    def _put(
        self, key: str, text: str, expected: int | None, durable: bool, at: datetime
    ) -> ConfigEntry | int:
        with self._lock:
            current = self._entries.get(key)
            actual = current[1] if current else 0
            if expected is not None and expected != actual:
                return actual
            self._entries[key] = (text, actual + 1, at)
        return ConfigEntry(key, decode_value(text), actual + 1, at)

    def delete(self, key: str, *, expected_version: int | None = None) -> bool:
        with self._lock:
            current = self._entries.get(check_key(key))
            actual = current[1] if current else 0
            if expected_version is not None and expected_version != actual:
                raise VersionConflictError(key, expected_version, actual or None)
            return self._entries.pop(key, None) is not None

    def keys(self, prefix: str = "") -> list[str]:
        with self._lock:
            return sorted(key for key in self._entries if key.startswith(prefix))

    def restore(self, entry: ConfigEntry) -> None:
        check_key(entry.key)
        if entry.version < 1:
            raise UsageError(f"a config entry's version is at least 1, not {entry.version}")
        text = encode_value(entry.value)
        with self._lock:
            self._entries[entry.key] = (text, entry.version, entry.updated_at)
