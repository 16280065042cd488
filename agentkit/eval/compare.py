"""Paired comparison of two results tables: is variant B better than A, and by how much?

Two pass rates say little on their own ("27/31 against 25/31"): the runs are paired by what
they ran — the scenario, its repeat, and the parameters both tables share with overlapping
values (``point`` is a grid index, not an identity) — and the comparison reports:

* each side's pass rate with a Wilson 95% interval (:func:`~agentkit.eval.stats.wilson_interval`);
* the paired difference B - A with a bootstrap 95% interval over the pairs, from a fixed seed
  that the report prints (:func:`~agentkit.eval.stats.paired_bootstrap`);
* McNemar's exact two-sided p-value on the discordant pairs
  (:func:`~agentkit.eval.stats.mcnemar_exact`);
* the runs that flipped: ``fixed`` (failed on A, passed on B) and ``broke`` (the reverse);
* token, model-call, latency and cost (``cost_usd``) deltas over the pairs, and each side's
  total cost over them (runs of a model genai-prices does not price counted apart);
* under ``--repeat K``, pass^k and pass@k for k = 1 … K on each side over the paired runs
  (per scenario and shared parameters, then averaged: :func:`~agentkit.eval.results.reliability`);
* the rows that have no partner on the other side (a scenario run on one side only, or not
  started there), listed, never dropped silently.

``exclude_sim_deviations=True`` leaves out, before pairing, every run whose simulated user
deviated from its persona, goal or what it knew (``sim_user_ok`` False:
:mod:`agentkit.eval.sim_check`), and the report says how many on each side.

A parameter present in both tables with no value in common (``planner.strategy`` plan_replan
on A, next_step on B), or in one table only, is what differs between the variants: it is not
part of the pairing, and the report names it. ``on=`` gives the pairing columns explicitly.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentkit.errors import UsageError
from agentkit.eval.results import param_columns, reliability, require_pandas
from agentkit.eval.stats import (
    DEFAULT_SEED,
    mcnemar_exact,
    paired_bootstrap,
    wilson_interval,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DELTA_METRICS", "Comparison", "compare"]

#: the figures whose paired differences are reported (``tokens`` = input + output)
DELTA_METRICS: tuple[str, ...] = ("tokens", "model_calls", "latency_ms", "cost_usd")
_OCCURRENCE = "occurrence"


@dataclass(frozen=True)
class Comparison:
    """The comparison of tables A and B (each field a DataFrame but the labels and settings).

    * ``sides``: per side, ``runs``, ``passed``, ``pass_rate``, ``ci_low``, ``ci_high``,
      ``errors``, ``over_budget``, ``cost_usd`` (the priced runs' total; NaN: none priced)
      and ``unpriced`` (runs without a price) over the paired runs;
    * ``difference``: one row — ``pairs``, ``a_rate``, ``b_rate``, ``difference`` (B - A),
      ``ci_low``, ``ci_high``, ``only_a`` (passed on A only), ``only_b``, ``p_value``
      (McNemar, exact, two-sided), ``seed``, ``resamples``;
    * ``flipped``: the pairing columns and ``flip`` (``fixed``: failed on A, passed on B;
      ``broke``: passed on A, failed on B);
    * ``deltas``: per metric, ``a_mean``, ``b_mean``, ``mean_delta`` (B - A), ``median_delta``;
    * ``pairs``: every pair, the pairing columns then ``passed_a``, ``passed_b``, ``flip``
      ("" when both sides agree), each metric's ``_a`` / ``_b``, and ``row_a`` / ``row_b``
      (the pair's row positions in table A and B: :mod:`agentkit.eval.pairs` reads them);
    * ``unpaired``: the pairing columns, ``side`` (``A`` or ``B``) and ``outcome``;
    * ``reliability``: per side and k (1 … the most repeats a paired scenario has),
      ``pass^k``, ``pass@k`` and ``scenarios`` (those with at least k paired repeats);
    * ``excluded``: the runs of A and of B left out as simulated-user deviations.
    """

    labels: tuple[str, str]
    on: tuple[str, ...]
    varies: tuple[str, ...]
    seed: int
    resamples: int
    sides: pd.DataFrame
    difference: pd.DataFrame
    flipped: pd.DataFrame
    deltas: pd.DataFrame
    pairs: pd.DataFrame
    unpaired: pd.DataFrame
    reliability: pd.DataFrame
    excluded: tuple[int, int] = (0, 0)

    def report(self) -> str:
        """The text ``agentkit compare`` prints."""
        return _report(self)

    def to_json(self) -> dict[str, object]:
        """Everything but the pairs, as JSON-able values (``agentkit compare --out x.json``)."""

        def records(frame: pd.DataFrame) -> list[dict[str, object]]:
            return [
                {str(k): _plain(v) for k, v in record.items()}
                for record in frame.to_dict("records")
            ]

        return {
            "labels": list(self.labels),
            "on": list(self.on),
            "varies": list(self.varies),
            "seed": self.seed,
            "resamples": self.resamples,
            "sides": records(self.sides),
            "difference": records(self.difference)[0],
            "flipped": records(self.flipped),
            "deltas": records(self.deltas),
            "unpaired": records(self.unpaired),
            "reliability": records(self.reliability),
            "excluded": list(self.excluded),
        }


def _prepare(frame: pd.DataFrame) -> pd.DataFrame:
    import pandas as pd

    work = frame.copy()
    if "repeat" not in work:
        work["repeat"] = 0
    for column in ("input_tokens", "output_tokens", "model_calls", "latency_ms", "cost_usd"):
        if column not in work:
            work[column] = math.nan
        work[column] = pd.to_numeric(work[column], errors="coerce")
    work["tokens"] = work["input_tokens"] + work["output_tokens"]
    if "outcome" not in work:
        errors = work["error"].fillna("").astype(str) if "error" in work else ""
        work["outcome"] = "failed"
        work.loc[work["passed"].astype(bool), "outcome"] = "passed"
        if "error" in work:
            work.loc[errors != "", "outcome"] = "error"
    work["outcome"] = work["outcome"].fillna("").astype(str)
    work["passed"] = work["passed"].astype(bool)
    return work


def _candidates(frame: pd.DataFrame) -> list[str]:
    columns = [c for c in param_columns(frame) if c != "model"]
    return [*columns, *(c for c in ("model", "user_model") if c in frame)]


def _pairing(a: pd.DataFrame, b: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The columns to pair on, and those that tell the variants apart."""
    on = ["scenario", "repeat"]
    varies: list[str] = []
    seen_a, seen_b = _candidates(a), _candidates(b)
    for column in dict.fromkeys([*seen_a, *seen_b]):
        if column not in seen_a or column not in seen_b:
            varies.append(column)
            continue
        values_a, values_b = _values(a[column]), _values(b[column])
        if values_a & values_b:
            on.append(column)
        else:
            varies.append(column)
    return on, varies


def _values(column: pd.Series[Any]) -> set[str]:
    """The distinct values of *column* as text ("" for a missing one), from its unique values
    (iterating an arrow-backed column cell by cell is slow at 10,000 rows)."""
    values = {str(value) for value in column.dropna().unique()}
    return values | {""} if column.isna().any() else values


def compare(
    a: pd.DataFrame,
    b: pd.DataFrame,
    *,
    on: Sequence[str] | None = None,
    labels: tuple[str, str] = ("A", "B"),
    seed: int = DEFAULT_SEED,
    resamples: int = 10_000,
    exclude_sim_deviations: bool = False,
) -> Comparison:
    """Pair the runs of *a* and *b* and compare them (see the module docstring)."""
    require_pandas()
    import pandas as pd

    excluded = (0, 0)
    if exclude_sim_deviations:
        a, left_out = _without_sim_deviations(a)
        b, right_out = _without_sim_deviations(b)
        excluded = (left_out, right_out)
    left, right = _prepare(a), _prepare(b)
    left["row"], right["row"] = range(len(left)), range(len(right))
    if on is None:
        keys, varies = _pairing(left, right)
    else:
        keys = list(on)
        missing = [c for c in keys if c not in left or c not in right]
        if missing:
            raise UsageError(f"cannot pair on {missing}: not a column of both tables")
        varies = [c for c in _candidates(left) if c not in keys]
    for side in (left, right):
        for column in keys:
            side[column] = side[column].fillna("").astype(str)
        side[_OCCURRENCE] = side.groupby(keys, sort=False).cumcount()
    key = [*keys, _OCCURRENCE]
    ran_a = left[left["outcome"] != "not_started"]
    ran_b = right[right["outcome"] != "not_started"]
    metrics = list(DELTA_METRICS)
    take = [*key, "passed", "outcome", *metrics, "row"]
    merged = ran_a[take].merge(
        ran_b[take], on=key, how="outer", suffixes=("_a", "_b"), indicator=True
    )
    both = merged[merged["_merge"] == "both"].reset_index(drop=True)
    lonely = merged[merged["_merge"] != "both"]
    unpaired_rows = [
        {
            **{column: record[column] for column in keys},
            "side": "A" if record["_merge"] == "left_only" else "B",
            "outcome": record["outcome_a"]
            if record["_merge"] == "left_only"
            else record["outcome_b"],
        }
        for record in lonely.to_dict("records")
    ]
    for side, name in ((left, "A"), (right, "B")):
        unstarted = side[side["outcome"] == "not_started"]
        unpaired_rows += [
            {**{column: record[column] for column in keys}, "side": name, "outcome": "not_started"}
            for record in unstarted.to_dict("records")
        ]
    unpaired = pd.DataFrame(unpaired_rows, columns=[*keys, "side", "outcome"])

    passed_a = both["passed_a"].astype(bool).tolist()
    passed_b = both["passed_b"].astype(bool).tolist()
    sides = pd.DataFrame(
        [_side(labels[0], both, "_a"), _side(labels[1], both, "_b")],
    )
    only_a = sum(1 for x, y in zip(passed_a, passed_b, strict=True) if x and not y)
    only_b = sum(1 for x, y in zip(passed_a, passed_b, strict=True) if y and not x)
    diff, low, high = paired_bootstrap(passed_a, passed_b, seed=seed, resamples=resamples)
    difference = pd.DataFrame(
        [
            {
                "pairs": len(both),
                "a_rate": sum(passed_a) / len(both) if len(both) else math.nan,
                "b_rate": sum(passed_b) / len(both) if len(both) else math.nan,
                "difference": diff,
                "ci_low": low,
                "ci_high": high,
                "only_a": only_a,
                "only_b": only_b,
                "p_value": mcnemar_exact(only_a, only_b),
                "seed": seed,
                "resamples": resamples,
            }
        ]
    )
    flips = both[both["passed_a"] != both["passed_b"]].copy()
    flips["flip"] = ["fixed" if bool(x) else "broke" for x in flips["passed_b"]]
    flipped = flips[[*keys, "flip"]].reset_index(drop=True)
    deltas = pd.DataFrame(
        [
            {
                "metric": metric,
                "a_mean": both[f"{metric}_a"].mean(),
                "b_mean": both[f"{metric}_b"].mean(),
                "mean_delta": (both[f"{metric}_b"] - both[f"{metric}_a"]).mean(),
                "median_delta": (both[f"{metric}_b"] - both[f"{metric}_a"]).median(),
            }
            for metric in metrics
        ]
    )
    both["flip"] = [
        "" if x == y else "fixed" if y else "broke"
        for x, y in zip(both["passed_a"].astype(bool), both["passed_b"].astype(bool), strict=True)
    ]
    pair_columns = [*keys, "passed_a", "passed_b", "flip"]
    pair_columns += [f"{metric}{suffix}" for metric in metrics for suffix in ("_a", "_b")]
    pair_columns += ["row_a", "row_b"]
    return Comparison(
        labels=labels,
        on=tuple(keys),
        varies=tuple(varies),
        seed=seed,
        resamples=resamples,
        sides=sides,
        difference=difference,
        flipped=flipped,
        deltas=deltas,
        pairs=both[pair_columns].copy(),
        unpaired=unpaired,
        reliability=_reliability_by_side(both, keys, labels),
        excluded=excluded,
    )


def _reliability_by_side(
    both: pd.DataFrame, keys: Sequence[str], labels: tuple[str, str]
) -> pd.DataFrame:
    """pass^k and pass@k of each side over the pairs, per scenario and shared parameters."""
    import pandas as pd

    group = [column for column in keys if column != "repeat"]
    rows = []
    for name, suffix in ((labels[0], "_a"), (labels[1], "_b")):
        side = both[[*group, f"passed{suffix}"]].rename(columns={f"passed{suffix}": "passed"})
        rows += [{"side": name, **record} for record in reliability(side, group).to_dict("records")]
    return pd.DataFrame(rows, columns=["side", "k", "pass^k", "pass@k", "scenarios"])


def _without_sim_deviations(frame: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """*frame* without the runs whose simulated user deviated (``sim_user_ok`` False; a
    table without the column, or a run without a simulated user, keeps every row)."""
    if "sim_user_ok" not in frame:
        return frame, 0
    flagged = frame["sim_user_ok"].astype("boolean").fillna(True).eq(False).to_numpy()
    kept = frame.loc[~flagged].reset_index(drop=True)
    kept.attrs = dict(frame.attrs)
    return kept, int(flagged.sum())


def _side(label: str, pairs: pd.DataFrame, suffix: str) -> dict[str, object]:
    runs = len(pairs)
    passed = int(pairs[f"passed{suffix}"].astype(bool).sum())
    low, high = wilson_interval(passed, runs)
    outcomes = pairs[f"outcome{suffix}"]
    costs = pairs[f"cost_usd{suffix}"]
    return {
        "side": label,
        "runs": runs,
        "passed": passed,
        "pass_rate": passed / runs if runs else math.nan,
        "ci_low": low,
        "ci_high": high,
        "errors": int((outcomes == "error").sum()),
        "over_budget": int((outcomes == "budget").sum()),
        "cost_usd": float(costs.sum()) if costs.notna().any() else math.nan,
        "unpriced": int(costs.isna().sum()),
    }


def _where(record: Mapping[Hashable, object], shown: Sequence[str]) -> str:
    """``scenario [key=value, …]`` with the pairing columns that tell runs apart."""
    rest = [f"{column}={record[column]}" for column in shown if str(record[column]) != ""]
    return f"{record['scenario']}" + (f" [{', '.join(rest)}]" if rest else "")


def _shown(result: Comparison) -> list[str]:
    """The pairing columns (but the scenario) that take more than one value."""
    import pandas as pd

    rows = pd.concat([result.pairs, result.unpaired], ignore_index=True)
    return [
        column
        for column in result.on
        if column != "scenario" and column in rows and rows[column].astype(str).nunique() > 1
    ]


def _report(result: Comparison) -> str:
    a, b = result.labels
    shown = _shown(result)
    lines = [f"A = {a}", f"B = {b}", f"paired on: {', '.join(result.on)}"]
    if result.varies:
        lines.append(f"differs (not paired on): {', '.join(result.varies)}")
    if any(result.excluded):
        lines.append(
            f"left out as simulated-user deviations (--exclude-sim-deviations): "
            f"{result.excluded[0]} runs of A, {result.excluded[1]} of B"
        )
    lines.append("")
    lines.append(f"{'':<4}{'runs':>6}{'passed':>8}{'pass rate':>11}   95% interval (Wilson)")
    for name, record in zip(("A", "B"), result.sides.to_dict("records"), strict=True):
        lines.append(
            f"{name:<4}{record['runs']:>6}{record['passed']:>8}{_rate(record['pass_rate']):>11}"
            f"   [{_rate(record['ci_low'])}, {_rate(record['ci_high'])}]"
            + (f"  ({record['errors']} errors)" if record["errors"] else "")
            + (f"  ({record['over_budget']} over budget)" if record["over_budget"] else "")
        )
    lines += _costs(result)
    lines += _reliability(result)
    d = result.difference.iloc[0]
    lines.append("")
    lines.append(
        f"difference B - A over {int(d['pairs'])} pairs: {_signed(d['difference'])}, "
        f"95% interval [{_signed(d['ci_low'])}, {_signed(d['ci_high'])}] "
        f"(paired bootstrap, {int(d['resamples'])} resamples, seed {int(d['seed'])})"
    )
    lines.append(
        f"McNemar exact two-sided p = {d['p_value']:.4g} "
        f"(discordant pairs: {int(d['only_a'])} passed on A only, "
        f"{int(d['only_b'])} on B only)"
    )
    for flip, text in (
        ("fixed", "failed on A, passed on B"),
        ("broke", "passed on A, failed on B"),
    ):
        chosen = result.flipped[result.flipped["flip"] == flip]
        if len(chosen):
            lines.append(f"{flip} ({text}): {len(chosen)}")
            lines += [f"  {_where(r, shown)}" for r in chosen.to_dict("records")]
    if result.flipped.empty:
        lines.append("no run flipped")
    lines.append("")
    lines.append("deltas over the pairs (B - A):")
    for record in result.deltas.to_dict("records"):
        if _rate(record["a_mean"]) == _rate(record["b_mean"]) == "-":
            continue  # a figure neither side has (cost_usd of unpriced models)
        lines.append(
            f"  {record['metric']:<12} mean {_signed(record['mean_delta'], 3)}"
            f"  median {_signed(record['median_delta'], 3)}"
            f"  (A {_number(record['a_mean'])}, B {_number(record['b_mean'])})"
        )
    if len(result.unpaired):
        lines.append("")
        lines.append(f"unpaired rows ({len(result.unpaired)}, not in the figures above):")
        for record in result.unpaired.to_dict("records"):
            lines.append(f"  {record['side']} only: {_where(record, shown)} ({record['outcome']})")
    return "\n".join(lines)


def _costs(result: Comparison) -> list[str]:
    """Each side's cost over the pairs, when some run of either side was priced."""
    records = result.sides.to_dict("records")
    if all(math.isnan(float(record["cost_usd"])) for record in records):
        return []
    lines = ["", "cost over the pairs (genai-prices):"]
    for name, record in zip(("A", "B"), records, strict=True):
        unpriced = int(record["unpriced"])
        lines.append(
            f"  {name} ${_number(record['cost_usd'])}"
            + (f" ({unpriced} runs unpriced: see cost_note)" if unpriced else "")
        )
    return lines


def _reliability(result: Comparison) -> list[str]:
    """pass^k and pass@k per side, when a paired scenario ran more than once."""
    table = result.reliability
    if table.empty or int(table["k"].max()) < 2:
        return []
    lines = ["", "reliability over the paired repeats (per scenario, averaged):"]
    for k in sorted(set(table["k"].astype(int))):
        rows = table[table["k"] == k].to_dict("records")
        shown = "  ".join(
            f"{name} pass^{k} {_rate(r['pass^k'])} pass@{k} {_rate(r['pass@k'])}"
            for name, r in zip(("A", "B"), rows, strict=True)
        )
        lines.append(f"  k={k}: {shown}  ({int(rows[0]['scenarios'])} scenarios)")
    return lines


def _plain(value: object) -> object:
    """A cell as a JSON value (numpy scalars to Python ones, NaN to None)."""
    item = getattr(value, "item", None)
    if callable(item):
        value = item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _rate(value: object) -> str:
    return "-" if not isinstance(value, float | int) or math.isnan(value) else f"{value:.3f}"


def _signed(value: object, digits: int = 3) -> str:
    if not isinstance(value, float | int) or math.isnan(value):
        return "-"
    return f"{value:+.{digits}f}"


def _number(value: object) -> str:
    if not isinstance(value, float | int) or math.isnan(value):
        return "-"
    return f"{value:.4g}"
