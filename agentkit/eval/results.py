"""The results table: one row per run (a scenario at a parameter point), as a pandas DataFrame.

Columns, in order:

* ``scenario``, ``title``, ``language``, ``agent``, ``tags``, ``point``, ``repeat`` (0 …
  K-1 under ``--repeat K``) — which run;
* one column per swept or set parameter, named by its dotted key
  (``compression.token_threshold``), then ``model`` (the spec the run used) and
  ``user_model`` (who played a simulated user: ``scripted`` for the scenario's user_script, a
  spec, or "" for fixed turns);
* ``passed`` (every check passed and the run finished within its budget), ``outcome``
  (``passed``, ``failed``, ``error``, ``budget`` — stopped by its budget — or ``not_started``
  — the sweep's budget was spent, or the sweep was stopped) and one nullable boolean column per
  expectation kind, ``exp_<kind>`` (NA where the scenario does not check it; a kind checked at
  several turns passes when all of them do); ``checks``, ``checks_failed``, ``failures`` (what
  failed, where, expected vs seen) and ``error`` (a run that could not finish);
* figures: ``turns``, ``steps``, ``tool_calls``, ``tools``, ``questions``, ``consents``,
  ``model_calls``, ``input_tokens``, ``output_tokens`` (every model call the agent made: the
  turns' own and the memory upkeep's after them), ``cached_tokens`` (of the input, read from
  the provider's prompt cache), ``cost_usd`` (what those calls cost in US dollars at the
  model's price on the day of the run, by genai-prices; empty for a model it does not price)
  and ``cost_note`` (why it is empty: :mod:`agentkit.eval.pricing`), ``compressions`` and the last
  compression's ``messages_before/after``, ``tokens_before/after`` and
  ``compression_strategy``, ``facts_ungrounded`` (model-written facts the run's
  compressions dropped because the summarised window never said them); the fidelity probe
  ``facts_total``, ``facts_kept``, ``fact_retention`` (of the scenario's known ``facts``, the
  share TaskState still carries at the end); ``final_status``, ``result_status``, ``answer``,
  ``errors`` (error events), ``budget_reason`` (why the run stopped over budget, or why it
  did not start), ``sim_turns`` (messages the simulated user sent), ``sim_stopped_by``
  (``user_done``, ``user_gave_up``, ``max_turns``, ``error``, ``budget``; "" for fixed turns),
  ``sim_model_calls`` and ``sim_tokens`` (the simulator's own spend), ``sim_user_ok`` and
  ``sim_user_issues`` (did the simulated user keep to its persona, goal and what it knew; NA
  for fixed turns: :mod:`agentkit.eval.sim_check`), ``attempts`` (1, or more
  when ``--retries`` re-ran an error; 0 for a run not started), ``transport_retries`` (model
  requests sent again after a transient fault: a refused or reset connection, a 429, a 5xx;
  :mod:`agentkit.models.transport`);
* a scenario source's own columns, when its scenarios have a scorer
  (:mod:`agentkit.eval.scorer`: e.g. ``bfcl_id``; NA in the rows of other scenarios);
* timings: ``latency_ms`` (the turns' own figures), ``wall_ms`` (the whole run), then
  the run's trace: ``trace_id`` (the sweep's trace, which holds the run's span and its turns'
  spans) and ``span_id`` (the run's ``eval_run`` span in it). They are the only figures that
  differ between two runs of the scripted model (:data:`TIMING_COLUMNS`);
* the judges (scenario ``expect: judges``, :mod:`agentkit.eval.judges`): ``judge_errors``
  (judges that could not decide: counted apart, never as the agent's failures),
  ``judge_calls`` and ``judge_tokens`` (the graders' spend, apart from the agent's), one
  ``judge_<name>`` column per judge (``pass``, ``fail`` or ``judge_error``; NA where it did
  not run) and ``judgements`` (each judge's verdict, score, reason and graders, as compact
  JSON: :func:`~agentkit.eval.judges.load_judgements`);
* last, ``transcript``: everything the run showed, as compact JSON
  (:func:`~agentkit.eval.transcript.load_transcripts` gives the typed values back). It holds
  the conversation's ids, so it differs between two runs too (:data:`RUN_SPECIFIC_COLUMNS`).

The row is declared once, as :class:`~agentkit.eval.row.RunRow`: the columns come from it.
pandas is imported inside the functions, never at import time of agentkit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from agentkit._extras import require
from agentkit.errors import UsageError
from agentkit.eval.expectations import EXPECTATION_KINDS
from agentkit.eval.judges.table import JUDGE_PREFIX, judge_names
from agentkit.eval.row import EXPECTATION_PREFIX, RunRow, nullable_columns
from agentkit.eval.scorer import SourceColumns
from agentkit.eval.task import run_name
from agentkit.eval.transcript import TRANSCRIPT_COLUMN, load_transcripts

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "IDENTITY_COLUMNS",
    "RESULT_SUFFIXES",
    "RUN_SPECIFIC_COLUMNS",
    "TIMING_COLUMNS",
    "check_output_path",
    "failures",
    "load_results",
    "param_columns",
    "reliability",
    "repeats",
    "report_text",
    "require_pandas",
    "results_beside",
    "run_errors",
    "run_ids",
    "save_results",
    "summarize",
    "to_frame",
]

IDENTITY_COLUMNS: tuple[str, ...] = (
    "scenario",
    "title",
    "language",
    "agent",
    "tags",
    "point",
    "repeat",
)
TIMING_COLUMNS: tuple[str, ...] = ("latency_ms", "wall_ms", "trace_id", "span_id")
#: the columns that differ between two runs of the scripted model
RUN_SPECIFIC_COLUMNS: tuple[str, ...] = (*TIMING_COLUMNS, TRANSCRIPT_COLUMN)
RESULT_SUFFIXES: tuple[str, ...] = (".parquet", ".csv")


def require_pandas() -> None:
    """Check that pandas can be imported, or say which extra to install."""
    require("eval", "agentkit eval", "pandas")


def to_frame(rows: Sequence[RunRow], params: Sequence[str] = ()) -> pd.DataFrame:
    """The rows as a DataFrame with the columns in the documented order and dtypes."""
    require_pandas()
    import pandas as pd

    sources: list[type[SourceColumns]] = []
    for row in rows:
        if row.source is not None and type(row.source) not in sources:
            sources.append(type(row.source))
    names = [key for key in params if key != "model"]
    judges = judge_names(row.judgements for row in rows)
    columns = RunRow.columns(names, sources, judges)
    frame = pd.DataFrame([row.record() for row in rows], columns=columns)
    for kind in EXPECTATION_KINDS:
        frame[EXPECTATION_PREFIX + kind] = frame[EXPECTATION_PREFIX + kind].astype("boolean")
    for column, dtype in nullable_columns().items():
        frame[column] = frame[column].astype(dtype)
    for judge in judges:
        frame[JUDGE_PREFIX + judge] = frame[JUDGE_PREFIX + judge].astype("string")
    frame["passed"] = frame["passed"].astype(bool)
    frame.attrs["params"] = names
    return frame


def param_columns(frame: pd.DataFrame) -> list[str]:
    """The parameter columns of a results table (from its attrs, else the dotted names)."""
    stored = frame.attrs.get("params")
    if stored is not None:
        return [c for c in stored if c in frame]
    return [c for c in frame.columns if "." in c]


def _ran(frame: pd.DataFrame) -> pd.Series[bool]:
    """The rows of runs that ran (not the ``not_started`` ones)."""
    import pandas as pd

    if "outcome" not in frame:
        return pd.Series(True, index=frame.index)
    return frame["outcome"].astype(str) != "not_started"


def _repeat_count(frame: pd.DataFrame) -> int:
    """K of ``--repeat K`` (1 for a table without repeats)."""
    if "repeat" not in frame or frame.empty:
        return 1
    return int(frame["repeat"].nunique())


def summarize(frame: pd.DataFrame, by: Sequence[str] | None = None) -> pd.DataFrame:
    """Pass rate and mean figures per parameter point (by default: the parameter columns, and
    ``model`` when it varies); one row ``all`` when nothing varies.

    ``runs`` counts the runs that ran; ``not_started`` (when some did not) and
    ``over_budget`` (when some were stopped by their budget) follow; ``cost_usd`` is the
    point's total cost in US dollars (its priced runs'; absent when no run was priced). Under
    ``--repeat K``,
    ``pass@K`` (at least one repeat of a scenario passed) and ``pass^K`` (every one did) are
    the means over the point's scenarios (:func:`repeats` gives them per scenario)."""
    require_pandas()
    import pandas as pd

    keys = list(by) if by is not None else param_columns(frame)
    if by is None and "model" in frame and frame["model"].nunique() > 1 and "model" not in keys:
        keys.append("model")
    work = frame.copy()
    if not keys:
        work["run set"] = "all"
        keys = ["run set"]
    ran = _ran(work)
    work["_ran"] = ran
    work["_not_started"] = ~ran
    work["_budget"] = work["outcome"].astype(str) == "budget" if "outcome" in work else False
    figures = ["model_calls", "output_tokens", "fact_retention", "latency_ms"]
    for column in figures:
        if column in work:
            work[column] = pd.to_numeric(work[column], errors="coerce").where(ran)
    grouped = work.groupby(keys, dropna=False, sort=False)
    summary = grouped.agg(
        runs=("_ran", "sum"),
        passed=("passed", "sum"),
        errors=("error", lambda s: int((s.astype(object).fillna("").astype(str) != "").sum())),
        checks_failed=("checks_failed", "sum"),
        model_calls=("model_calls", "mean"),
        tokens=("output_tokens", "mean"),
        compressions=("compressions", "sum"),
        fact_retention=("fact_retention", "mean"),
        latency_ms=("latency_ms", "median"),
        not_started=("_not_started", "sum"),
        over_budget=("_budget", "sum"),
    )
    if "cost_usd" in work:
        costs = pd.to_numeric(work["cost_usd"], errors="coerce").where(ran)
        priced = costs.groupby([work[key] for key in keys], dropna=False, sort=False)
        summary["cost_usd"] = priced.sum(min_count=1)
        if not summary["cost_usd"].notna().any():
            summary = summary.drop(columns="cost_usd")
    summary["runs"] = summary["runs"].astype(int)
    summary.insert(2, "pass_rate", summary["passed"] / summary["runs"].where(summary["runs"] > 0))
    summary["fact_retention"] = pd.to_numeric(summary["fact_retention"], errors="coerce")
    for column in ("not_started", "over_budget"):
        summary[column] = summary[column].astype(int)
        if not summary[column].any():
            summary = summary.drop(columns=column)
    k = _repeat_count(frame)
    if k > 1:
        per_scenario = repeats(frame, by=keys if by is not None or keys != ["run set"] else [])
        group = [key for key in keys if key in per_scenario]
        if group:
            overall = per_scenario.groupby(group, dropna=False, sort=False)[
                [f"pass@{k}", f"pass^{k}"]
            ].mean()
            summary = summary.join(overall, on=group)
        else:
            summary[f"pass@{k}"] = per_scenario[f"pass@{k}"].mean()
            summary[f"pass^{k}"] = per_scenario[f"pass^{k}"].mean()
    return summary.reset_index()


def repeats(frame: pd.DataFrame, by: Sequence[str] | None = None) -> pd.DataFrame:
    """Per scenario and parameter point: the repeats that ran, how many passed, and
    ``pass@K`` / ``pass^K`` for K = the number of repeats (:mod:`agentkit.eval.stats`)."""
    require_pandas()
    from agentkit.eval.stats import pass_at_k, pass_hat_k

    keys = list(by) if by is not None else param_columns(frame)
    if by is None and "model" in frame and frame["model"].nunique() > 1 and "model" not in keys:
        keys.append("model")
    k = _repeat_count(frame)
    work = frame.loc[_ran(frame)]
    grouped = work.groupby([*keys, "scenario"], dropna=False, sort=False)
    table = grouped.agg(runs=("passed", "size"), passed=("passed", "sum")).reset_index()
    table["pass_rate"] = table["passed"] / table["runs"]
    table[f"pass@{k}"] = [
        pass_at_k(int(n), int(c), k) for n, c in zip(table["runs"], table["passed"], strict=True)
    ]
    table[f"pass^{k}"] = [
        pass_hat_k(int(n), int(c), k) for n, c in zip(table["runs"], table["passed"], strict=True)
    ]
    return table[["scenario", *keys, "runs", "passed", "pass_rate", f"pass@{k}", f"pass^{k}"]]


def reliability(
    frame: pd.DataFrame, by: Sequence[str], ks: Sequence[int] | None = None
) -> pd.DataFrame:
    """pass^k and pass@k of the runs of *frame* (its ``passed`` column) grouped by *by* — a
    scenario and its parameters — for each k of *ks* (default 1 … the most runs a group has):
    per group ``C(c, k) / C(n, k)`` and ``1 - C(n - c, k) / C(n, k)`` for n runs with c
    passes (:func:`~agentkit.eval.stats.pass_hat_k`, :func:`~agentkit.eval.stats.pass_at_k`),
    averaged over the groups with at least k runs (``scenarios`` counts them: with uneven
    repeats a group with fewer than k runs says nothing about k)."""
    require_pandas()
    import pandas as pd

    from agentkit.eval.stats import pass_at_k, pass_hat_k

    columns = ["k", "pass^k", "pass@k", "scenarios"]
    if frame.empty:
        return pd.DataFrame([], columns=columns)
    passed = frame["passed"].astype(bool)
    keys = [frame[column].astype(str) for column in by] if by else [pd.Series(0, frame.index)]
    counts = passed.groupby(keys, sort=False).agg(["size", "sum"])
    runs = counts["size"].astype(int).tolist()
    wins = counts["sum"].astype(int).tolist()
    chosen = list(ks) if ks is not None else list(range(1, max(runs) + 1))
    rows = []
    for k in chosen:
        groups = [(n, c) for n, c in zip(runs, wins, strict=True) if n >= k]
        hat = [pass_hat_k(n, c, k) for n, c in groups]
        at = [pass_at_k(n, c, k) for n, c in groups]
        rows.append(
            {
                "k": k,
                "pass^k": sum(hat) / len(hat) if hat else math.nan,
                "pass@k": sum(at) / len(at) if at else math.nan,
                "scenarios": len(groups),
            }
        )
    return pd.DataFrame(rows, columns=columns)


def failures(frame: pd.DataFrame) -> pd.DataFrame:
    """The runs that did not pass: which scenario, at which point, and why."""
    columns = ["scenario", *param_columns(frame), "model", "failures", "error"]
    if "repeat" in frame and _repeat_count(frame) > 1:
        columns.insert(1, "repeat")
    columns += [c for c in ("outcome", "budget_reason") if c in frame]
    failed = frame.loc[
        ~frame["passed"].astype(bool) & _ran(frame), [c for c in columns if c in frame]
    ]
    return failed.reset_index(drop=True)


def check_output_path(path: Path | str) -> Path:
    """*path* if it names a .parquet or .csv file (checked before a sweep starts)."""
    target = Path(path)
    _checked_suffix(target)
    if target.is_dir():
        raise UsageError(f"{target} is a folder: give a .parquet or .csv file name")
    return target


def report_text(frame: pd.DataFrame, *, max_failures: int = 20) -> str:
    """The text the CLI prints at the end: the summary table, then the failed runs and why."""
    require_pandas()
    import pandas as pd

    summary = summarize(frame)
    with pd.option_context("display.width", 160, "display.max_columns", 30):
        lines = [summary.to_string(index=False, float_format=lambda value: f"{value:.3g}")]
    k = _repeat_count(frame)
    if k > 1:
        table = repeats(frame)
        with pd.option_context("display.width", 160, "display.max_columns", 30):
            text = table.to_string(index=False, float_format=lambda value: f"{value:.3g}")
        lines += [f"\nper scenario over {k} repeats:", text]
    failed = failures(frame)
    params = param_columns(frame)
    ran = int(_ran(frame).sum())
    if len(failed):
        lines.append(f"\nfailed runs ({len(failed)} of {ran}):")
        for record in failed.head(max_failures).to_dict("records"):
            point = ", ".join(f"{key}={record[key]}" for key in params)
            if k > 1:
                point = ", ".join(filter(None, [point, f"repeat={record.get('repeat')}"]))
            budget = _text(record.get("budget_reason"))
            why = (
                _text(record.get("error"))
                or (f"over budget ({budget})" if budget else "")
                or _text(record.get("failures"))
            )
            lines.append(f"  {record['scenario']}" + (f" [{point}]" if point else "") + f": {why}")
        if len(failed) > max_failures:
            lines.append(f"  … and {len(failed) - max_failures} more (see the failures column)")
    else:
        lines.append(f"\nall {ran} runs passed")
    errors = run_errors(frame)
    if errors:
        retried = int(frame["transport_retries"].sum()) if "transport_retries" in frame else 0
        lines.append(
            f"{errors} of {ran} runs ended in an error (they were not judged)"
            + (f"; {retried} model requests were retried" if retried else "")
        )
    if "judge_errors" in frame and int(frame["judge_errors"].sum()):
        lines.append(
            f"{int(frame['judge_errors'].sum())} judge errors (a judge could not decide: "
            "counted apart, not as failures; see the judge_<name> columns)"
        )
    unstarted = frame.loc[~_ran(frame)]
    if len(unstarted):
        reason = _text(unstarted["budget_reason"].iloc[0]) if "budget_reason" in frame else ""
        lines.append(
            f"{len(unstarted)} of {len(frame)} runs not started ({reason}): "
            "--resume with --out runs them"
        )
    return "\n".join(lines)


def run_errors(frame: pd.DataFrame) -> int:
    """How many runs ended in an error (``outcome`` ``error``: a run that could not finish,
    as opposed to a failed expectation); ``agentkit eval`` exits 1 when there are any."""
    if "outcome" not in frame:
        return 0
    return int((frame["outcome"].astype(str) == "error").sum())


def run_ids(frame: pd.DataFrame) -> list[str]:
    """Each row's run id, in row order: its transcript's ``run``, else (a table without
    transcripts, a run that kept none) ``{scenario}--p{point}[--r{repeat}]`` from its columns."""
    transcripts = (
        load_transcripts(frame) if TRANSCRIPT_COLUMN in frame.columns else [None] * len(frame)
    )
    ids: list[str] = []
    for transcript, record in zip(transcripts, frame.to_dict("records"), strict=True):
        if transcript is not None and transcript.run:
            ids.append(transcript.run)
        else:
            repeat = record.get("repeat")
            ids.append(
                run_name(
                    str(record.get("scenario", "")),
                    int(record.get("point", 0)),
                    0 if not isinstance(repeat, int | float) or math.isnan(repeat) else int(repeat),
                )
            )
    return ids


def results_beside(results: Path | str, part: str, suffix: str | None = None) -> Path:
    """The file kept beside the results table *results* for *part* (``labels``,
    ``findings`` …): ``runs.parquet`` → ``runs.labels.jsonl`` (*suffix* given) or
    ``runs.findings.parquet`` (the table's own suffix)."""
    path = Path(results)
    return path.with_name(f"{path.stem}.{part}{suffix if suffix is not None else path.suffix}")


def _text(value: object) -> str:
    """A text cell ("" for a missing one: NaN in a table read back from CSV)."""
    return value if isinstance(value, str) else ""


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


def load_results(path: Path | str, *, without: Sequence[str] = ()) -> pd.DataFrame:
    """Read a table written by :func:`save_results` (or ``agentkit eval --out``); *without*:
    columns not to read (``agentkit compare`` skips the transcripts: most of a table's bytes)."""
    require_pandas()
    import pandas as pd

    source = Path(path)
    suffix = _checked_suffix(source)
    if not source.is_file():
        raise UsageError(f"no results file at {source}")
    if suffix == ".parquet":
        if not without:
            return pd.read_parquet(source)
        require("eval", "reading parquet", "pyarrow")
        import pyarrow.parquet as pq  # type: ignore[import-untyped]

        names = [name for name in pq.read_schema(source).names if name not in without]
        return pd.read_parquet(source, columns=names)
    if not without:
        return pd.read_csv(source)
    return pd.read_csv(source, usecols=lambda name: name not in without)
