"""The BFCL summary of a results table: accuracy per category, and BFCL's overall score.

Rows are grouped by what varies between runs (``bfcl_mode``, the parameter columns, the
model); in each group, a category's accuracy is the share of its rows BFCL's checker found
valid. The overall figure is BFCL's own formula (``generate_leaderboard_csv``, computed with
its helper functions) restricted to the categories run: non-live AST (unweighted over simple
— itself the mean of Python, Java, JavaScript —, multiple, parallel, parallel multiple), live
AST (weighted by each category's size in BFCL), irrelevance (unweighted over irrelevance and
live irrelevance), multi-turn (unweighted) and agentic (here the memory set), weighted
10/10/10/30/40; a group with no category run is left out and the weights of the others are
normalised, as BFCL's helper does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentkit.eval.bfcl._package import bfcl_module
from agentkit.eval.bfcl.catalog import CATEGORIES, load_items
from agentkit.eval.results import param_columns, require_pandas

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["accuracy_table", "bfcl_report", "overall_accuracy", "run_set_columns"]

_NON_LIVE_SIMPLE = ("simple_python", "simple_java", "simple_javascript")
_NON_LIVE = ("multiple", "parallel", "parallel_multiple")
_LIVE = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
_IRRELEVANCE = ("irrelevance", "live_irrelevance")
_MULTI_TURN = (
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
    "multi_turn_long_context",
)
_AGENTIC = ("memory",)
_WEIGHTS = (10, 10, 10, 30, 40)
#: how a missing value reads once made text (a parameter the run set did not have)
_MISSING = ("", "nan", "<NA>", "None")


def run_set_columns(frame: pd.DataFrame) -> list[str]:
    """The columns that tell the run sets of *frame* apart (those that vary)."""
    candidates = ["bfcl_mode", *param_columns(frame), "model"]
    if "bfcl_memory_context" in frame:
        candidates.append("bfcl_memory_context")
    present = [c for c in dict.fromkeys(candidates) if c in frame]
    varying = [c for c in present if frame[c].astype(str).nunique(dropna=False) > 1]
    return varying or present[:1]


def accuracy_table(frame: pd.DataFrame, by: Sequence[str] | None = None) -> pd.DataFrame:
    """Per run set and category: ``runs``, ``valid`` and ``accuracy`` (BFCL rows only)."""
    require_pandas()
    import pandas as pd

    rows = frame[frame["bfcl_category"].notna()] if "bfcl_category" in frame else frame.iloc[0:0]
    keys = list(by) if by is not None else run_set_columns(frame)
    if rows.empty:
        return pd.DataFrame(columns=[*keys, "bfcl_category", "runs", "valid", "accuracy"])
    work = rows.assign(_valid=rows["bfcl_valid"].fillna(False).astype(bool))
    for key in keys:  # text, "" for a parameter a run set did not have (kept as a group)
        work[key] = [("" if pd.isna(value) else str(value)) for value in work[key]]
    grouped = work.groupby([*keys, "bfcl_category"], sort=False, dropna=False)
    table = grouped.agg(runs=("_valid", "size"), valid=("_valid", "sum")).reset_index()
    table["accuracy"] = table["valid"] / table["runs"]
    return table


def overall_accuracy(accuracy: Mapping[str, float]) -> float | None:
    """BFCL's overall score over the categories in *accuracy* (category → accuracy)."""
    helper = bfcl_module("eval_checker.eval_runner_helper")

    def score(category: str) -> dict[str, Any]:
        return {
            "accuracy": accuracy[category],
            "total_count": len(load_items(category)),
            "display_accuracy": accuracy[category],
        }

    def unweighted(parts: list[dict[str, Any]]) -> dict[str, Any] | None:
        return helper.calculate_unweighted_accuracy(parts, False) if parts else None

    simple = unweighted([score(c) for c in _NON_LIVE_SIMPLE if c in accuracy])
    non_live = unweighted(
        [part for part in [simple] if part] + [score(c) for c in _NON_LIVE if c in accuracy]
    )
    live_parts = [score(c) for c in _LIVE if c in accuracy]
    live = helper.calculate_weighted_accuracy(live_parts, False) if live_parts else None
    groups = [
        non_live,
        live,
        unweighted([score(c) for c in _IRRELEVANCE if c in accuracy]),
        unweighted([score(c) for c in _MULTI_TURN if c in accuracy]),
        unweighted([score(c) for c in _AGENTIC if c in accuracy]),
    ]
    present = [(group, weight) for group, weight in zip(groups, _WEIGHTS, strict=True) if group]
    if not present:
        return None
    total = helper.calculate_percentage_weighted_accuracy(
        [group for group, _ in present], [weight for _, weight in present], False
    )
    return float(total["accuracy"])


def bfcl_report(frame: pd.DataFrame) -> str:
    """The summary as text: one line per run set, accuracy per category, BFCL overall."""
    table = accuracy_table(frame)
    if table.empty:
        return "BFCL: no BFCL rows"
    keys = [c for c in table.columns if c not in ("bfcl_category", "runs", "valid", "accuracy")]
    order = {category: index for index, category in enumerate(CATEGORIES)}
    lines = ["BFCL accuracy (BFCL's checkers), per category; overall by BFCL's formula "
             "over the categories run:"]  # fmt: skip
    for values, group in table.groupby(keys, sort=False, dropna=False) if keys else [((), table)]:
        named = values if isinstance(values, tuple) else (values,)
        shown = [(k, v) for k, v in zip(keys, named, strict=True) if str(v) not in _MISSING]
        label = ", ".join(f"{k}={v}" for k, v in shown) or "all"
        ordered = group.sort_values("bfcl_category", key=lambda s: s.map(order))
        parts = [
            f"{row.bfcl_category} {row.accuracy:.1%} ({row.valid}/{row.runs})"
            for row in ordered.itertuples()
        ]
        accuracy = {
            str(category): float(value)
            for category, value in zip(ordered["bfcl_category"], ordered["accuracy"], strict=True)
        }
        total = overall_accuracy(accuracy)
        overall = f"overall {total:.1%}" if total is not None else "overall n/a"
        lines.append(f"  {label}: " + "; ".join(parts) + f"; {overall}")
    return "\n".join(lines)
