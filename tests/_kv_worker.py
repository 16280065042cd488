"""Writers for tests/test_kv_sqlite.py: they run in other processes than the test.

* ``python tests/_kv_worker.py increment DB KEY COUNT``: opens the store, prints ``READY``, waits
  for a line on stdin, then makes COUNT read-modify-write increments of the integer at KEY with
  compare-and-swap, retrying on VersionConflictError. Last line: a JSON object with the versions
  it wrote and the conflicts it met.
* ``python tests/_kv_worker.py churn DB KEY SEED``: see :func:`churn` (ACKs on stdout).
* :func:`churn` is also run in forked children, ACKing on a pipe.
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

from agentkit.store.kv import VersionConflictError
from agentkit.store.sqlite_kv import SqliteConfigStore
from pydantic import JsonValue

PAD_SIZES = (0, 10, 300, 5_000, 40_000)  # 40 KB spans ten 4 KB pages of one commit


def increment(db: Path, key: str, count: int) -> tuple[list[int], int]:
    """Add 1 to the integer at *key* *count* times; return the versions written, the conflicts."""
    written: list[int] = []
    conflicts = 0
    with SqliteConfigStore(db) as store:
        print("READY", flush=True)
        sys.stdin.readline()
        while len(written) < count:
            entry = store.get(key)
            version = entry.version if entry else 0
            current = entry.value if entry else 0
            assert isinstance(current, int)
            try:
                new = store.set(key, current + 1, expected_version=version)
            except VersionConflictError:
                conflicts += 1
                continue
            written.append(new.version)
    return written, conflicts


def churn(db: str, key: str, fd: int, seed: int) -> None:
    """Rewrite *key* with CAS forever; after each committed set, ``ACK <version>\\n`` to *fd*.

    The value names its own version (``{"version": n, "pad": …}``), so a reader can tell a value
    from one write apart from another's.
    """
    rng = random.Random(seed)
    store = SqliteConfigStore(Path(db))
    while True:
        entry = store.get(key)
        version = entry.version if entry else 0
        value: dict[str, JsonValue] = {"version": version + 1, "pad": "x" * rng.choice(PAD_SIZES)}
        new = store.set(key, value, expected_version=version)
        os.write(fd, f"ACK {new.version}\n".encode())  # one write: atomic on a pipe


def main(argv: list[str]) -> int:
    mode, db, key, number = argv
    if mode == "increment":
        written, conflicts = increment(Path(db), key, int(number))
        print(json.dumps({"written": written, "conflicts": conflicts}), flush=True)
    elif mode == "churn":
        churn(db, key, sys.stdout.fileno(), int(number))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
