"""SqliteConfigStore beyond the contract: files, processes, threads, kills, damage.

* persistence across instances, the on-disk schema (WAL, user_version, canonical JSON);
* two processes x 300 CAS increments of one counter: 600, every version written exactly once;
* SIGKILL of a writer at random moments (forked children and fresh interpreters): after each
  kill ``PRAGMA integrity_check`` is ok, the last acknowledged write is there, versions only grow;
* a damaged or foreign file is a StoreError naming it, and is left untouched;
* four threads x 50 CAS increments through one store instance.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest
from agentkit.errors import StoreError, UsageError
from agentkit.store.kv import VersionConflictError
from agentkit.store.sqlite_kv import MIGRATIONS, SCHEMA_VERSION, SqliteConfigStore

from ._processes import fork_call, wait_exit

_HERE = Path(__file__).resolve().parent
_WORKER_PATH = _HERE / "_kv_worker.py"
_spec = importlib.util.spec_from_file_location("_agentkit_kv_worker", _WORKER_PATH)
assert _spec is not None
assert _spec.loader is not None
worker = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(worker)

KEY = "execution_state:agent-1:conv-1"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "data" / "agentkit.db"


@pytest.fixture
def store(db: Path) -> Iterator[SqliteConfigStore]:
    db.parent.mkdir(parents=True)
    with SqliteConfigStore(db) as opened:
        yield opened


@contextlib.contextmanager
def raw(db: Path) -> Iterator[sqlite3.Connection]:
    """A plain sqlite3 connection for looking at the file (always closed)."""
    with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as connection:
        yield connection


def _integrity(db: Path) -> list[str]:
    with raw(db) as connection:
        return [str(row[0]) for row in connection.execute("PRAGMA integrity_check")]


# ------------------------------------------------------------------ files and schema


def test_values_persist_across_instances(db: Path) -> None:
    db.parent.mkdir(parents=True)
    with SqliteConfigStore(db) as first:
        first.set("task_state:a:c", {"step": 3, "plan": ["a", "b"], "note": "déjà ✓"})
        written = first.set("pref:theme", "dark", expected_version=0)
        first.set("gone", 1)
        first.delete("gone")
    with SqliteConfigStore(db) as second:
        assert second.keys() == ["pref:theme", "task_state:a:c"]
        assert second.get("pref:theme") == written
        entry = second.get("task_state:a:c")
        assert entry is not None
        assert entry.value == {"step": 3, "plan": ["a", "b"], "note": "déjà ✓"}
        assert second.set("task_state:a:c", None, expected_version=1).version == 2
    with SqliteConfigStore(db) as third:
        entry = third.get("task_state:a:c")
        assert entry is not None
        assert (entry.value, entry.version) == (None, 2)


def test_on_disk_schema(store: SqliteConfigStore, db: Path) -> None:
    store.set("k", {"b": [1, 2.5], "a": "é"})
    with raw(db) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert connection.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        columns = [
            (row[1], row[2], row[3], row[5])
            for row in connection.execute("PRAGMA table_info(system_config)")
        ]
        assert columns == [
            ("key", "TEXT", 1, 1),
            ("value", "TEXT", 1, 0),
            ("version", "INTEGER", 1, 0),
            ("updated_at", "TEXT", 1, 0),
        ]
        value, version, updated_at = connection.execute(
            "SELECT value, version, updated_at FROM system_config WHERE key = 'k'"
        ).fetchone()
    assert value == '{"a":"é","b":[1,2.5]}'  # canonical JSON, never pickle
    assert version == 1
    assert updated_at.endswith("Z")
    assert len(updated_at) == len("2026-03-23T10:12:11.993Z")
    assert SCHEMA_VERSION == 1
    assert [name for name, _ in MIGRATIONS] == ["0001_create_system_config"]


def test_pragmas_of_each_connection(db: Path) -> None:
    db.parent.mkdir(parents=True)
    levels: list[tuple[Literal["FULL", "NORMAL"], int]] = [("FULL", 2), ("NORMAL", 1)]
    for synchronous, level in levels:
        with SqliteConfigStore(db, busy_timeout_ms=1234, synchronous=synchronous) as store:
            seen: list[tuple[int, int]] = []

            def look(store: SqliteConfigStore = store, seen: list[tuple[int, int]] = seen) -> None:
                connection = store._connection()
                seen.append(
                    (
                        connection.execute("PRAGMA synchronous").fetchone()[0],
                        connection.execute("PRAGMA busy_timeout").fetchone()[0],
                    )
                )

            look()
            thread = threading.Thread(target=look)
            thread.start()
            thread.join()
            assert seen == [(level, 1234), (level, 1234)]


def test_opening_a_newer_schema_is_refused(store: SqliteConfigStore, db: Path) -> None:
    store.set("k", 1)
    store.close()
    with raw(db) as connection:
        connection.execute("PRAGMA user_version = 7")
    with pytest.raises(StoreError, match="schema version 7") as caught:
        SqliteConfigStore(db)
    assert str(db) in str(caught.value)


def test_a_closed_store_refuses_work(db: Path) -> None:
    db.parent.mkdir(parents=True)
    store = SqliteConfigStore(db)
    store.set("k", 1)
    store.close()
    store.close()  # idempotent
    with pytest.raises(UsageError, match="closed"):
        store.get("k")
    with pytest.raises(UsageError, match="closed"):
        store.set("k", 2)


def test_bad_settings_are_refused(db: Path) -> None:
    with pytest.raises(UsageError, match="synchronous"):
        SqliteConfigStore(db, synchronous="OFF")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="busy_timeout_ms"):
        SqliteConfigStore(db, busy_timeout_ms=-1)
    assert not db.parent.exists()


def test_a_missing_directory_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "no-such-dir" / "agentkit.db"
    with pytest.raises(StoreError) as caught:
        SqliteConfigStore(path)
    assert str(path) in str(caught.value)


# ------------------------------------------------------------------ damaged files


def test_a_garbage_file_is_a_store_error_naming_it(db: Path) -> None:
    db.parent.mkdir(parents=True)
    garbage = bytes(random.Random(7).randrange(256) for _ in range(16_384))
    db.write_bytes(garbage)
    with pytest.raises(StoreError) as caught:
        SqliteConfigStore(db)
    assert str(db) in str(caught.value)
    assert db.read_bytes() == garbage  # left as it was, for a person to look at


def test_a_damaged_page_fails_quick_check(db: Path) -> None:
    db.parent.mkdir(parents=True)
    with SqliteConfigStore(db) as store:
        for index in range(300):
            store.set(f"key:{index:04d}", {"index": index, "text": "x" * 200})
    assert not db.with_name(db.name + "-wal").exists()  # checkpointed on the last close
    data = bytearray(db.read_bytes())
    assert len(data) > 8 * 4096
    data[4096:] = (b"\xde\xad\xbe\xef" * len(data))[: len(data) - 4096]  # keep page 1
    db.write_bytes(bytes(data))
    with pytest.raises(StoreError) as caught:
        SqliteConfigStore(db)
    message = str(caught.value)
    assert str(db) in message
    assert "quick_check" in message or "not a usable SQLite database" in message


# ------------------------------------------------------------------ threads


def test_threads_share_one_store_without_lost_updates(store: SqliteConfigStore) -> None:
    threads_count, per_thread = 4, 50
    barrier = threading.Barrier(threads_count)
    conflicts = Counter[str]()
    written: list[int] = []
    errors: list[BaseException] = []
    guard = threading.Lock()

    def work(name: str) -> None:
        try:
            barrier.wait()
            done = 0
            while done < per_thread:
                entry = store.get(KEY)
                version = entry.version if entry else 0
                current = entry.value if entry else 0
                assert isinstance(current, int)
                try:
                    new = store.set(KEY, current + 1, expected_version=version)
                except VersionConflictError:
                    conflicts[name] += 1
                    continue
                done += 1
                with guard:
                    written.append(new.version)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=work, args=(f"t{n}",)) for n in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    entry = store.get(KEY)
    assert entry is not None
    assert (entry.value, entry.version) == (200, 200)
    assert sorted(written) == list(range(1, 201))
    print(f"\nthreads: 4 x 50 CAS increments -> 200, {sum(conflicts.values())} conflicts retried")


# ------------------------------------------------------------------ two processes


@pytest.mark.slow
def test_two_processes_increment_one_counter_without_lost_updates(db: Path) -> None:
    db.parent.mkdir(parents=True)
    SqliteConfigStore(db).close()  # create the file and schema once, before the race
    command = [sys.executable, str(_WORKER_PATH), "increment", str(db), KEY, "300"]
    with (
        subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ) as first,
        subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ) as second,
    ):
        processes = [first, second]
        for process in processes:
            assert process.stdout is not None
            assert process.stdout.readline() == "READY\n", process.stderr
        for process in processes:  # both are open and waiting: start them together
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        results = []
        for process in processes:
            out, err = process.communicate(timeout=240)
            assert process.returncode == 0, err
            results.append(json.loads(out.splitlines()[-1]))
    written = [version for result in results for version in result["written"]]
    assert sorted(written) == list(range(1, 601)), "a version was written twice or skipped"
    with SqliteConfigStore(db) as store:
        entry = store.get(KEY)
    assert entry is not None
    assert (entry.value, entry.version) == (600, 600)
    assert _integrity(db) == ["ok"]
    conflicts = [result["conflicts"] for result in results]
    print(
        f"\ntwo processes: 2 x 300 CAS increments -> 600, 0 lost; "
        f"conflicts retried {conflicts[0]} + {conflicts[1]} = {sum(conflicts)}"
    )


# ------------------------------------------------------------------ SIGKILL


def _read_first_line(fd: int) -> bytes:
    data = b""
    while b"\n" not in data:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return data


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def _acks(output: bytes) -> list[int]:
    versions = []
    for line in output.decode().splitlines():
        word, version = line.split()
        assert word == "ACK"
        versions.append(int(version))
    return versions


def _check_after_kill(db: Path, acked: list[int], before: int, stats: Counter[str]) -> int:
    """Integrity, the last ACK kept, versions monotonic; return the version now stored."""
    assert acked, "the writer was killed before its first ACK"
    assert acked == list(range(before + 1, before + 1 + len(acked))), "ACKs not consecutive"
    stats["kills"] += 1
    stats["acked"] += len(acked)
    stats["wal left behind"] += db.with_name(db.name + "-wal").exists()
    assert _integrity(db) == ["ok"]
    with SqliteConfigStore(db) as store:  # runs quick_check and the migrations again
        entry = store.get(KEY)
    assert entry is not None
    assert isinstance(entry.value, dict)
    assert entry.value["version"] == entry.version
    assert entry.version >= before
    assert entry.version in (acked[-1], acked[-1] + 1), (
        f"last ACK {acked[-1]}, stored {entry.version}: a committed write was lost"
    )
    stats["in-flight write kept"] += entry.version == acked[-1] + 1
    return entry.version


FORK_KILLS = 40
INTERPRETER_KILLS = 5


@pytest.mark.slow
def test_sigkill_during_updates_loses_no_committed_write(db: Path) -> None:
    db.parent.mkdir(parents=True)
    rng = random.Random(20260301)
    stats: Counter[str] = Counter()
    version = 0
    for round_no in range(FORK_KILLS):
        read_fd, write_fd = os.pipe()
        pid = fork_call(worker.churn, str(db), KEY, write_fd, round_no)
        os.close(write_fd)
        first = _read_first_line(read_fd)  # the writer is in its loop
        time.sleep(rng.uniform(0.0, 0.03))
        os.kill(pid, signal.SIGKILL)
        code = wait_exit(pid)
        output = first + _read_all(read_fd)
        assert code == -signal.SIGKILL, f"round {round_no}: the writer ended by itself ({code})"
        version = _check_after_kill(db, _acks(output), version, stats)

    for round_no in range(INTERPRETER_KILLS):  # the same against fresh interpreters
        command = [sys.executable, str(_WORKER_PATH), "churn", str(db), KEY, str(1000 + round_no)]
        # bufsize=0: readline must not pull later ACKs into a buffer communicate() never sees
        with subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0
        ) as process:
            assert process.stdout is not None
            first = process.stdout.readline()
            time.sleep(rng.uniform(0.0, 0.03))
            process.send_signal(signal.SIGKILL)
            rest, err = process.communicate(timeout=60)
        assert process.returncode == -signal.SIGKILL, err.decode()
        version = _check_after_kill(db, _acks(first + rest), version, stats)

    with SqliteConfigStore(db) as store:  # still writable after all that
        assert store.set(KEY, {"version": version + 1}, expected_version=version).version == (
            version + 1
        )
    assert _integrity(db) == ["ok"]
    print(
        f"\nSIGKILL: {stats['kills']} kills ({FORK_KILLS} forked, {INTERPRETER_KILLS} fresh "
        f"interpreters), {stats['acked']} writes acked, 0 lost, final version {version}; "
        f"{stats['in-flight write kept']} unacked in-flight writes were committed; "
        f"{stats['wal left behind']} kills left a -wal file to recover"
    )
