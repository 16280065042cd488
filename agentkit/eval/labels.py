"""Human labels: a researcher's own verdict on a run, kept beside the results.

A :class:`Label` is a versioned value: which run (its id, ``{scenario}--p{point}[--r{repeat}]``
as :func:`~agentkit.eval.results.run_ids` gives it), the label (``pass``/``fail``, or a
score), a note, who and when. Labels live in a JSON-lines file beside the results table
(``runs.parquet`` → ``runs.labels.jsonl``: :func:`labels_path`), one label a line, appended;
the last line for a run is its label. A sweep that resumes the table (``--resume``) rewrites
the table, never this file, so labels survive it; :func:`with_labels` joins them to the table
(``label``, ``label_note``, ``label_who``, ``label_when``) for export.

A label for a run the table does not have is refused (a :class:`UsageError` naming it) and
nothing is written.
"""

from __future__ import annotations

import getpass
import math
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agentkit.errors import UsageError
from agentkit.eval.results import load_results, require_pandas, results_beside, run_ids

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "LABEL_COLUMNS",
    "Label",
    "LabelValue",
    "add_label",
    "copy_labels",
    "labels_path",
    "load_labels",
    "parse_label",
    "unlabelled",
    "with_labels",
]

#: a label: a verdict, or a score
LabelValue = Literal["pass", "fail"] | float
#: the columns :func:`with_labels` adds to a results table
LABEL_COLUMNS: tuple[str, ...] = ("label", "label_note", "label_who", "label_when")


class Label(BaseModel):
    """A person's label on one run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    v: Literal[1] = 1
    run: str = Field(min_length=1)
    label: LabelValue
    note: str = ""
    who: str = ""
    when: datetime

    @field_validator("label")
    @classmethod
    def _finite(cls, value: LabelValue) -> LabelValue:
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("a score is a finite number")
        return value

    @property
    def verdict(self) -> str:
        """The label as text: ``pass``, ``fail``, or the score (``3`` for 3.0)."""
        if isinstance(self.label, str):
            return self.label
        return f"{self.label:g}"


def parse_label(text: str) -> LabelValue:
    """``pass``/``fail`` (any case) or a number, from the command line or a widget."""
    word = text.strip().lower()
    if word in ("pass", "fail"):
        return "pass" if word == "pass" else "fail"
    try:
        score = float(word)
    except ValueError:
        raise UsageError(f"a label is pass, fail or a score, not {text!r}") from None
    if not math.isfinite(score):
        raise UsageError(f"a score is a finite number, not {text!r}")
    return score


def labels_path(results: Path | str) -> Path:
    """Where the labels of the results table *results* are kept."""
    return results_beside(results, "labels", ".jsonl")


def load_labels(results: Path | str) -> dict[str, Label]:
    """The labels kept beside *results*, by run id (the latest for each run); none when the
    file does not exist. A line that is not a label is a :class:`UsageError` naming it."""
    path = labels_path(results)
    if not path.is_file():
        return {}
    labels: dict[str, Label] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            label = Label.model_validate_json(line)
        except ValidationError as error:
            problem = error.errors()[0]
            where = ".".join(str(part) for part in problem["loc"]) or "(line)"
            raise UsageError(f"{path}:{number}: not a label ({where}: {problem['msg']})") from None
        labels[label.run] = label
    return labels


def add_label(
    results: Path | str,
    run: str,
    label: LabelValue | str,
    *,
    note: str = "",
    who: str | None = None,
    when: datetime | None = None,
    table: pd.DataFrame | None = None,
) -> Label:
    """Label the run *run* of the results table *results* and keep the label beside it.

    *label*: ``pass``, ``fail`` or a score; *who* defaults to ``$AGENTKIT_USER``, else the
    login name; *table*: the table, when already read (else it is read from *results*). A run
    the table does not have is a :class:`UsageError` and nothing is written."""
    value = parse_label(label) if isinstance(label, str) else parse_label(str(label))
    frame = table if table is not None else load_results(results)
    known = run_ids(frame)
    if run not in known:
        near = [name for name in known if run in name or name in run][:3]
        hint = f" (did you mean {', '.join(near)}?)" if near else f" ({len(known)} runs in it)"
        raise UsageError(f"no run {run!r} in {results}{hint}")
    made = Label(
        run=run,
        label=value,
        note=note,
        who=who if who is not None else _who(),
        when=when if when is not None else datetime.now(UTC),
    )
    path = labels_path(results)
    with path.open("a", encoding="utf-8") as file:
        file.write(made.model_dump_json() + "\n")
    return made


def copy_labels(results: Path | str, new: Path | str) -> Path | None:
    """Copy the labels kept beside *results* beside the table *new* (a re-scored or exported
    copy of it), replacing what was there; the path written, or None when *results* has no
    labels."""
    source, target = labels_path(results), labels_path(new)
    if not source.is_file():
        return None
    if source.resolve() != target.resolve():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.read_bytes())
    return target


def _who() -> str:
    name = os.environ.get("AGENTKIT_USER")
    if name:
        return name
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return ""


def unlabelled(runs: Sequence[str], labels: Mapping[str, Label]) -> list[str]:
    """The runs of *runs* without a label, in order."""
    return [run for run in runs if run not in labels]


def with_labels(results: pd.DataFrame, labels: Mapping[str, Label]) -> pd.DataFrame:
    """*results* with the label columns (:data:`LABEL_COLUMNS`; empty for an unlabelled run)."""
    require_pandas()
    table = results.copy()
    found = [labels.get(run) for run in run_ids(results)]
    table["label"] = [label.verdict if label else "" for label in found]
    table["label_note"] = [label.note if label else "" for label in found]
    table["label_who"] = [label.who if label else "" for label in found]
    table["label_when"] = [label.when.isoformat() if label else "" for label in found]
    return table
