"""The config store contract: every ConfigStore implementation must pass all of it."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from agentkit.errors import UsageError
from agentkit.store.kv import ConfigEntry, ConfigStore, InMemoryConfigStore, VersionConflictError
from agentkit.store.sqlite_kv import SqliteConfigStore
from pydantic import JsonValue

from tests._postgres import postgres_server, postgres_url  # noqa: F401 (fixtures)


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ConfigStore]:
    if request.param == "memory":
        yield InMemoryConfigStore()
    elif request.param == "postgres":
        from agentkit.store.postgres_kv import PostgresConfigStore

        with PostgresConfigStore(request.getfixturevalue("postgres_url")) as postgres:
            yield postgres
    else:
        sqlite_store = SqliteConfigStore(tmp_path / "agentkit.db")
        try:
            yield sqlite_store
        finally:
            sqlite_store.close()


# ------------------------------------------------------------------ get / set / versions


def test_get_missing_is_none(store: ConfigStore) -> None:
    assert store.get("task_state:a:c") is None
    assert store.keys() == []


def test_set_starts_at_version_1_and_counts_up(store: ConfigStore) -> None:
    first = store.set("task_state:a:c", {"step": 1})
    assert (first.key, first.value, first.version) == ("task_state:a:c", {"step": 1}, 1)
    assert first.updated_at.tzinfo is not None
    second = store.set("task_state:a:c", {"step": 2})
    assert (second.value, second.version) == ({"step": 2}, 2)
    assert second.updated_at >= first.updated_at
    assert store.get("task_state:a:c") == second
    third = store.set("task_state:a:c", "done")
    assert (third.value, third.version) == ("done", 3)
    assert store.get("task_state:a:c") == third


def test_versions_are_per_key(store: ConfigStore) -> None:
    store.set("a", 1)
    store.set("a", 2)
    assert store.set("b", 1).version == 1
    entry = store.get("a")
    assert entry is not None
    assert entry.version == 2


VALUES: list[Any] = [
    {"nested": {"list": [1, [2, [3, {"deep": True}]]], "empty": {}, "none": None}},
    '多行\n内容 ✓ émoji 🚀 "quoted" \\ back\\slash \u0000 nul',
    0,
    -1,
    2**70,
    -(2**63),
    3.5,
    -0.25,
    1e-300,
    1.7976931348623157e308,
    True,
    False,
    None,
    [],
    {},
    "",
    [None, True, 1, 1.5, "s", [], {}],
    {"ключ": "значение", "": "empty key", "1": 1},
]


@pytest.mark.parametrize("value", VALUES, ids=[f"value{n}" for n in range(len(VALUES))])
def test_values_round_trip(store: ConfigStore, value: Any) -> None:
    written = store.set("k", value)
    assert written.value == value
    read = store.get("k")
    assert read is not None
    assert read.value == value
    assert type(read.value) is type(value)
    assert read == written


def test_floats_keep_their_exact_value(store: ConfigStore) -> None:
    values: list[JsonValue] = [0.1, 1 / 3, 2.0, 1e16, 5e-324]
    store.set("floats", values)
    entry = store.get("floats")
    assert entry is not None
    assert entry.value == values
    assert isinstance(entry.value, list)
    assert all(isinstance(x, float) for x in entry.value)


def test_values_are_copies(store: ConfigStore) -> None:
    original: dict[str, Any] = {"items": [1, 2], "inner": {"x": 1}}
    written = store.set("k", original)
    original["items"].append(3)  # the caller's object is not the stored one
    original["inner"]["x"] = 99
    assert isinstance(written.value, dict)
    written.value["items"].append(4)  # type: ignore[union-attr]
    first = store.get("k")
    assert first is not None
    assert first.value == {"items": [1, 2], "inner": {"x": 1}}
    assert isinstance(first.value, dict)
    first.value["items"].append(5)  # type: ignore[union-attr]
    first.value["new"] = True
    second = store.get("k")
    assert second is not None
    assert second.value == {"items": [1, 2], "inner": {"x": 1}}


# ------------------------------------------------------------------ compare-and-swap


def test_cas_with_the_current_version_succeeds(store: ConfigStore) -> None:
    store.set("k", "v1")
    entry = store.set("k", "v2", expected_version=1)
    assert (entry.value, entry.version) == ("v2", 2)
    assert store.set("k", "v3", expected_version=2).version == 3


@pytest.mark.parametrize("stale", [1, 2, 4, 99, -1])
def test_cas_with_another_version_conflicts(store: ConfigStore, stale: int) -> None:
    store.set("k", "v1")
    store.set("k", "v2")
    store.set("k", "v3")
    with pytest.raises(VersionConflictError) as caught:
        store.set("k", "lost", expected_version=stale)
    error = caught.value
    assert (error.key, error.expected, error.actual) == ("k", stale, 3)
    assert "'k'" in str(error)
    entry = store.get("k")
    assert entry is not None
    assert (entry.value, entry.version) == ("v3", 3)


def test_cas_zero_creates_when_missing(store: ConfigStore) -> None:
    entry = store.set("fresh", {"a": 1}, expected_version=0)
    assert entry.version == 1
    assert store.get("fresh") == entry


def test_cas_zero_conflicts_when_present(store: ConfigStore) -> None:
    store.set("k", "first")
    with pytest.raises(VersionConflictError) as caught:
        store.set("k", "second", expected_version=0)
    assert (caught.value.key, caught.value.expected, caught.value.actual) == ("k", 0, 1)
    entry = store.get("k")
    assert entry is not None
    assert (entry.value, entry.version) == ("first", 1)


def test_cas_on_a_missing_key_with_a_version_conflicts(store: ConfigStore) -> None:
    with pytest.raises(VersionConflictError) as caught:
        store.set("missing", 1, expected_version=1)
    assert (caught.value.expected, caught.value.actual) == (1, None)
    assert store.get("missing") is None


# ------------------------------------------------------------------ delete


def test_delete(store: ConfigStore) -> None:
    store.set("k", 1)
    assert store.delete("k") is True
    assert store.get("k") is None
    assert store.keys() == []
    assert store.delete("k") is False


def test_delete_missing_is_false(store: ConfigStore) -> None:
    assert store.delete("never") is False
    assert store.delete("never", expected_version=0) is False


def test_delete_with_cas(store: ConfigStore) -> None:
    store.set("k", 1)
    store.set("k", 2)
    with pytest.raises(VersionConflictError) as caught:
        store.delete("k", expected_version=1)
    assert (caught.value.key, caught.value.expected, caught.value.actual) == ("k", 1, 2)
    with pytest.raises(VersionConflictError):
        store.delete("k", expected_version=0)
    entry = store.get("k")
    assert entry is not None
    assert entry.version == 2
    assert store.delete("k", expected_version=2) is True
    assert store.get("k") is None
    with pytest.raises(VersionConflictError) as caught:
        store.delete("k", expected_version=2)
    assert caught.value.actual is None


def test_a_deleted_key_starts_again_at_version_1(store: ConfigStore) -> None:
    store.set("k", 1)
    store.set("k", 2)
    store.delete("k")
    assert store.set("k", 3, expected_version=0).version == 1


# ------------------------------------------------------------------ keys


def test_keys_are_sorted_and_filtered_by_prefix(store: ConfigStore) -> None:
    names = ["task_state:b:1", "task_state:a:2", "exec:a", "task_state:a:1", "pref", "Zed"]
    for name in names:
        store.set(name, name)
    assert store.keys() == sorted(names)
    assert store.keys("task_state:a:") == ["task_state:a:1", "task_state:a:2"]
    assert store.keys("task_state:") == ["task_state:a:1", "task_state:a:2", "task_state:b:1"]
    assert store.keys("pref") == ["pref"]
    assert store.keys("nothing") == []
    assert store.keys("z") == []  # case-sensitive


def test_prefix_characters_are_literal(store: ConfigStore) -> None:
    """'_' and '%' are not wildcards, quotes are not SQL."""
    for name in ["a_b", "axb", "a%c", "abc", "it's", "x';DROP-TABLE-system_config;--"]:
        store.set(name, 1)
    assert store.keys("a_") == ["a_b"]
    assert store.keys("a%") == ["a%c"]
    assert store.keys("it'") == ["it's"]
    entry = store.get("x';DROP-TABLE-system_config;--")
    assert entry is not None
    assert entry.value == 1
    assert len(store.keys()) == 6


# ------------------------------------------------------------------ caller mistakes

BAD_KEYS = ["", " ", "a b", "tab\there", "new\nline", "nul\x00", "bell\x07", "del\x7f", "é", "键"]


@pytest.mark.parametrize("key", [*BAD_KEYS, "k" * 201], ids=lambda key: repr(key[:12]))
def test_invalid_keys_are_refused(store: ConfigStore, key: str) -> None:
    with pytest.raises(UsageError, match="invalid config key"):
        store.set(key, 1)
    with pytest.raises(UsageError):
        store.set(key, 1, expected_version=0)
    with pytest.raises(UsageError):
        store.get(key)
    with pytest.raises(UsageError):
        store.delete(key)
    assert store.keys() == []


def test_the_longest_key_is_accepted(store: ConfigStore) -> None:
    key = "k" * 200
    assert store.set(key, 1).key == key
    assert store.keys() == [key]


class _Opaque:
    pass


NOT_JSON: list[Any] = [
    {1, 2},
    math.nan,
    math.inf,
    -math.inf,
    _Opaque(),
    {"nested": [1, {"bad": {3}}]},
    {"nested": [math.nan]},
    b"bytes",
    {("tuple", "key"): 1},
]


@pytest.mark.parametrize("value", NOT_JSON, ids=[f"notjson{n}" for n in range(len(NOT_JSON))])
def test_non_json_values_are_refused_and_nothing_is_stored(store: ConfigStore, value: Any) -> None:
    with pytest.raises(UsageError, match="JSON"):
        store.set("k", value)
    assert store.get("k") is None
    store.set("k", "kept")
    with pytest.raises(UsageError, match="JSON"):
        store.set("k", value, expected_version=1)
    entry = store.get("k")
    assert entry is not None
    assert (entry.value, entry.version) == ("kept", 1)
    assert store.keys() == ["k"]


def test_restore_writes_an_entry_as_exported_and_cas_continues_from_its_version(
    store: ConfigStore,
) -> None:
    when = datetime(2026, 3, 14, 9, 30, tzinfo=UTC)
    store.set("task_state:a:c", {"old": True})
    store.restore(ConfigEntry("task_state:a:c", {"goal": "移动"}, 7, when))
    entry = store.get("task_state:a:c")
    assert entry is not None
    assert (entry.value, entry.version, entry.updated_at) == ({"goal": "移动"}, 7, when)
    with pytest.raises(VersionConflictError):
        store.set("task_state:a:c", {"goal": "x"}, expected_version=1)
    assert store.set("task_state:a:c", {"goal": "y"}, expected_version=7).version == 8
    store.restore(ConfigEntry("execution_state:a:c", None, 1, when))
    assert store.keys("execution_state:") == ["execution_state:a:c"]
    with pytest.raises(UsageError):
        store.restore(ConfigEntry("bad key", 1, 1, when))
    with pytest.raises(UsageError):
        store.restore(ConfigEntry("task_state:a:d", 1, 0, when))
    assert store.get("task_state:a:d") is None
