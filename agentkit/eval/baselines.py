"""Named baselines: results tables kept under the data root, for the gate to compare against.

``agentkit baseline pin RESULTS NAME`` copies a results table to
``{data root}/baselines/NAME.parquet`` with a small record beside it (``NAME.json``: where it
came from, when, how many runs); ``agentkit eval … --baseline NAME`` runs, then gates the new
table against it (:func:`~agentkit.eval.gate.gate`). A name is checked like every id
(:data:`~agentkit.ids.ID_PATTERN`) before a path is built from it; a table is written to a
temporary file and moved into place, so a baseline is either the old table or the new one.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from agentkit.errors import UsageError
from agentkit.eval.results import load_results, save_results
from agentkit.ids import is_valid_id

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "BASELINES_DIR",
    "Baseline",
    "baseline_path",
    "list_baselines",
    "load_baseline",
    "pin_baseline",
    "remove_baseline",
]

#: the folder of the data root that holds the baselines
BASELINES_DIR = "baselines"


@dataclass(frozen=True, slots=True)
class Baseline:
    """A pinned baseline: its name, where it was pinned from, when, and its runs."""

    name: str
    source: str
    pinned_at: str
    runs: int
    path: Path


def baseline_path(data_dir: Path, name: str) -> Path:
    """The table of baseline *name* (a bad name is a :class:`UsageError`)."""
    if not is_valid_id(name):
        raise UsageError(
            f"a baseline name is letters, digits, '-' and '_' (at most 64), not {name!r}"
        )
    return data_dir / BASELINES_DIR / f"{name}.parquet"


def pin_baseline(results: Path | str, name: str, data_dir: Path) -> Baseline:
    """Keep the results table *results* as baseline *name* (an existing one is replaced)."""
    target = baseline_path(data_dir, name)
    frame = load_results(results)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{name}.pinning.parquet")
    save_results(frame, temporary)
    os.replace(temporary, target)
    record = {
        "name": name,
        "source": str(Path(results).absolute()),
        "pinned_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "runs": len(frame),
    }
    meta = target.with_suffix(".json")
    meta.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return _baseline(target)


def load_baseline(name: str, data_dir: Path) -> pd.DataFrame:
    """The table of baseline *name* (one never pinned is a :class:`UsageError` listing those
    that are)."""
    path = baseline_path(data_dir, name)
    if not path.is_file():
        known = ", ".join(item.name for item in list_baselines(data_dir)) or "none"
        raise UsageError(f"no baseline {name!r} under {data_dir} (pinned: {known})")
    return load_results(path)


def list_baselines(data_dir: Path) -> list[Baseline]:
    """The pinned baselines, by name."""
    folder = data_dir / BASELINES_DIR
    if not folder.is_dir():
        return []
    return [_baseline(path) for path in sorted(folder.glob("*.parquet")) if is_valid_id(path.stem)]


def remove_baseline(name: str, data_dir: Path) -> None:
    """Forget baseline *name* (one never pinned is a :class:`UsageError`)."""
    path = baseline_path(data_dir, name)
    if not path.is_file():
        raise UsageError(f"no baseline {name!r} under {data_dir}")
    path.unlink()
    path.with_suffix(".json").unlink(missing_ok=True)


def _baseline(path: Path) -> Baseline:
    meta = path.with_suffix(".json")
    record: dict[str, object] = {}
    if meta.is_file():
        try:
            loaded = json.loads(meta.read_text(encoding="utf-8"))
        except ValueError:
            loaded = {}
        record = loaded if isinstance(loaded, dict) else {}
    runs = record.get("runs")
    return Baseline(
        name=path.stem,
        source=str(record.get("source", "")),
        pinned_at=str(record.get("pinned_at", "")),
        runs=runs if isinstance(runs, int) else -1,
        path=path,
    )
