"""The results table: one row per run (a scenario at a parameter point), as a pandas DataFrame.

Columns, in order:

* ``scenario``, ``title``, ``language``, ``agent``, ``tags``, ``point`` — which run;
* one column per swept or set parameter, named by its dotted key
  (``compression.token_threshold``), then ``model`` (the spec the run used);
* ``passed`` (every check passed and the run finished) and one nullable boolean column per
  expectation kind, ``exp_<kind>`` (NA where the scenario does not check it; a kind checked at
  several turns passes when all of them do); ``checks``, ``checks_failed``, ``failures`` (what
  failed, where, expected vs seen) and ``error`` (a run that could not finish);
* figures: ``turns``, ``steps``, ``tool_calls``, ``tools``, ``questions``, ``consents``,
  ``model_calls``, ``input_tokens``, ``output_tokens``, ``compressions`` and the last
  compression's ``messages_before/after``, ``tokens_before/after``; the fidelity probe
  ``facts_total``, ``facts_kept``, ``fact_retention`` (of the scenario's known ``facts``, the
  share TaskState still carries at the end); ``final_status``, ``result_status``, ``answer``,
  ``errors`` (error events), ``attempts`` (1, or more when ``--retries`` re-ran an error);
* timings last: ``latency_ms`` (the turns' own figures), ``wall_ms`` (the whole run), then
  the run's trace: ``trace_id`` (the sweep's trace, which holds the run's span and its turns'
  spans) and ``span_id`` (the run's ``eval_run`` span in it). They are the only columns that
  differ between two runs of the scripted model (:data:`TIMING_COLUMNS`).

pandas is imported inside the functions, never at import time of agentkit.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkit._extras import require
from agentkit.errors import UsageError
from agentkit.eval.expectations import EXPECTATION_KINDS

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "IDENTITY_COLUMNS",
    "RESULT_SUFFIXES",
    "TIMING_COLUMNS",
    "check_output_path",
    "failures",
    "load_results",
    "param_columns",
    "report",
    "require_pandas",
    "save_results",
    "summarize",
    "to_frame",
]

IDENTITY_COLUMNS: tuple[str, ...] = ("scenario", "title", "language", "agent", "tags", "point")
TIMING_COLUMNS: tuple[str, ...] = ("latency_ms", "wall_ms", "trace_id", "span_id")
RESULT_SUFFIXES: tuple[str, ...] = (".parquet", ".csv")
_NULLABLE_INTS = (
    "messages_before",
    "messages_after",
    "tokens_before",
    "tokens_after",
    "facts_total",
    "facts_kept",
)


def require_pandas() -> None:
    """Check that pandas can be imported, or say which extra to install."""
    require("eval", "agentkit eval", "pandas")


def to_frame(rows: Sequence[dict[str, Any]], params: Sequence[str] = ()) -> pd.DataFrame:
    """The rows as a DataFrame with the columns in the documented order and dtypes."""
    require_pandas()
    import pandas as pd

    frame = pd.DataFrame(list(rows))
    expectation_columns = [f"exp_{kind}" for kind in EXPECTATION_KINDS]
    for column in expectation_columns:
        if column not in frame:
            frame[column] = pd.NA
    leading = [*IDENTITY_COLUMNS, *params, "model", "passed"]
    rest = [c for c in frame.columns if c not in leading and c not in expectation_columns]
    rest = [c for c in rest if c not in TIMING_COLUMNS] + [c for c in TIMING_COLUMNS if c in rest]
    present = [c for c in leading if c in frame]
    frame = frame[present + expectation_columns + rest]
    for column in expectation_columns:
        frame[column] = frame[column].astype("boolean")
    for column in _NULLABLE_INTS:
        if column in frame:
            frame[column] = frame[column].astype("Int64")
    if "fact_retention" in frame:
        frame["fact_retention"] = frame["fact_retention"].astype("Float64")
    if "passed" in frame:
        frame["passed"] = frame["passed"].astype(bool)
    frame.attrs["params"] = list(params)
    return frame


def param_columns(frame: pd.DataFrame) -> list[str]:
    """The parameter columns of a results table (from its attrs, else the dotted names)."""
    stored = frame.attrs.get("params")
    if stored is not None:
        return [c for c in stored if c in frame]
    return [c for c in frame.columns if "." in c]


def summarize(frame: pd.DataFrame, by: Sequence[str] | None = None) -> pd.DataFrame:
    """Pass rate and mean figures per parameter point (by default: the parameter columns, and
    ``model`` when it varies); one row ``all`` when nothing varies."""
    require_pandas()
    import pandas as pd

    keys = list(by) if by is not None else param_columns(frame)
    if by is None and "model" in frame and frame["model"].nunique() > 1 and "model" not in keys:
        keys.append("model")
    work = frame.copy()
    if not keys:
        work["run set"] = "all"
        keys = ["run set"]
    grouped = work.groupby(keys, dropna=False, sort=False)
    summary = grouped.agg(
        runs=("scenario", "size"),
        passed=("passed", "sum"),
        errors=("error", lambda s: int((s.astype(str) != "").sum())),
        checks_failed=("checks_failed", "sum"),
        model_calls=("model_calls", "mean"),
        tokens=("output_tokens", "mean"),
        compressions=("compressions", "sum"),
        fact_retention=("fact_retention", "mean"),
        latency_ms=("latency_ms", "median"),
    )
    summary.insert(2, "pass_rate", summary["passed"] / summary["runs"])
    summary["fact_retention"] = pd.to_numeric(summary["fact_retention"], errors="coerce")
    return summary.reset_index()


def failures(frame: pd.DataFrame) -> pd.DataFrame:
    """The runs that did not pass: which scenario, at which point, and why."""
    columns = ["scenario", *param_columns(frame), "model", "failures", "error"]
    failed = frame.loc[~frame["passed"], [c for c in columns if c in frame]]
    return failed.reset_index(drop=True)


def check_output_path(path: Path | str) -> Path:
    """*path* if it names a .parquet or .csv file (checked before a sweep starts)."""
    target = Path(path)
    _checked_suffix(target)
    if target.is_dir():
        raise UsageError(f"{target} is a folder: give a .parquet or .csv file name")
    return target


def report(frame: pd.DataFrame, *, max_failures: int = 20) -> str:
    """The text the CLI prints at the end: the summary table, then the failed runs and why."""
    require_pandas()
    import pandas as pd

    summary = summarize(frame)
    with pd.option_context("display.width", 160, "display.max_columns", 30):
        lines = [summary.to_string(index=False, float_format=lambda value: f"{value:.3g}")]
    failed = failures(frame)
    params = param_columns(frame)
    if len(failed):
        lines.append(f"\nfailed runs ({len(failed)} of {len(frame)}):")
        for record in failed.head(max_failures).to_dict("records"):
            point = ", ".join(f"{key}={record[key]}" for key in params)
            why = record.get("error") or record.get("failures") or ""
            lines.append(f"  {record['scenario']}" + (f" [{point}]" if point else "") + f": {why}")
        if len(failed) > max_failures:
            lines.append(f"  … and {len(failed) - max_failures} more (see the failures column)")
    else:
        lines.append(f"\nall {len(frame)} runs passed")
    return "\n".join(lines)


def _checked_suffix(path: Path) -> str:
    if path.suffix not in RESULT_SUFFIXES:
        raise UsageError(f"results go to a .parquet or .csv file, not {path.name!r}")
    return path.suffix


def save_results(frame: pd.DataFrame, path: Path | str) -> Path:
    """Write *frame* as parquet or CSV (by the suffix); returns the path written."""
    target = Path(path)
    suffix = _checked_suffix(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".parquet":
        require("eval", "writing parquet", "pyarrow")
        frame.to_parquet(target, index=False)
    else:
        frame.to_csv(target, index=False)
    return target


def load_results(path: Path | str) -> pd.DataFrame:
    """Read a table written by :func:`save_results` (or ``agentkit eval --out``)."""
    require_pandas()
    import pandas as pd

    source = Path(path)
    suffix = _checked_suffix(source)
    if not source.is_file():
        raise UsageError(f"no results file at {source}")
    if suffix == ".parquet":
        return pd.read_parquet(source)
    return pd.read_csv(source)
