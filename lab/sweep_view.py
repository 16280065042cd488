"""What the sweep views show, as plain functions (testable without a kernel).

The compression sweep itself is :func:`agentkit.memory.sweep.sweep_compression`; this module
turns its inputs into a :class:`SweepSource` (a scenario file or a stored conversation), parses
the grid the user typed, and renders the rows as a DataFrame and a figure. For evaluation
sweeps (``agentkit eval``'s results tables) :func:`variant_rates` gives each variant's pass rate
with its Wilson 95% interval, and :func:`pass_rate_figure` plots them: two bare pass rates are
never shown without their uncertainty. The figure is drawn on a bare
``matplotlib.figure.Figure`` (no pyplot, so no global state and no GUI backend) and shipped as
PNG bytes, which an ``ipywidgets.Image`` shows the same way in a kernel and in a test.
:func:`judge_rates` puts a judge's pass rate per variant next to its agreement with your
labels (:func:`agentkit.eval.agreement.judge_agreement`): a judge's rate is shown with how far
it is to be trusted, or with "too few labels" when there is no figure.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from agentkit import Agent, Message, TaskState
from agentkit.errors import UsageError
from agentkit.eval.agreement import Agreement
from agentkit.memory.sweep import SweepRow, ThresholdGrid, load_scenario
from matplotlib.figure import Figure

__all__ = [
    "SweepSource",
    "conversation_source",
    "figure_png",
    "judge_rates",
    "parse_facts",
    "parse_grid",
    "parse_values",
    "pass_rate_figure",
    "scenario_files",
    "scenario_source",
    "sweep_figure",
    "sweep_frame",
    "variant_rates",
]

_SEPARATORS = re.compile(r"[\s,;]+")


@dataclass(frozen=True)
class SweepSource:
    """What a sweep runs on: a window, the TaskState it starts from, the facts to look for."""

    label: str
    window: tuple[Message, ...]
    task_state: TaskState
    facts: tuple[str, ...] = ()


def scenario_files(folder: Path | str | None) -> list[Path]:
    """The ``*.json`` scenario files in *folder*, sorted (none when it does not exist)."""
    if folder is None or not Path(folder).is_dir():
        return []
    return sorted(Path(folder).glob("*.json"))


def scenario_source(path: Path | str) -> SweepSource:
    """A scenario file (validated: a bad one is a ConfigError naming the field)."""
    scenario = load_scenario(path)
    return SweepSource(
        label=scenario.title or Path(path).stem,
        window=tuple(scenario.window()),
        task_state=scenario.task_state(),
        facts=scenario.facts,
    )


def conversation_source(
    agent: Agent, conversation_id: str, facts: Iterable[str] = ()
) -> SweepSource:
    """A stored conversation's dialogue since its last ``/clear``, compression markers and
    other system messages left out, so the sweep sees the whole dialogue, not just what an
    earlier compression kept. It starts from the stored TaskState's pinned facts only (the
    rest of the stored state is an earlier summary of this very dialogue)."""
    window = tuple(agent.chat_window(conversation_id, compressed=False))
    if not window:
        raise UsageError(f"conversation {conversation_id!r} has no messages to compress")
    pinned = agent.task_state(conversation_id).value.pinned_facts
    title = agent.get_conversation(conversation_id).meta.title
    return SweepSource(
        label=f"{agent.id} / {title}",
        window=window,
        task_state=TaskState(pinned_facts=pinned).normalize(),
        facts=tuple(facts),
    )


def parse_values(text: str, axis: str) -> tuple[int, ...]:
    """``"4, 8 12"`` → ``(4, 8, 12)``; anything but whole numbers is a UsageError naming
    *axis* and the offending item."""
    values: list[int] = []
    for item in _SEPARATORS.split(text.strip()):
        if not item:
            continue
        if not item.isdigit():
            raise UsageError(f"{axis}: {item!r} is not a whole number")
        values.append(int(item))
    return tuple(values)


def parse_grid(n_text: str, t_text: str, k_text: str) -> ThresholdGrid:
    """The grid typed in the lab's three fields (empty fields are an error naming the axis)."""
    return ThresholdGrid(
        max_messages=parse_values(n_text, "N (max_messages)"),
        token_threshold=parse_values(t_text, "T (token_threshold)"),
        keep_recent=parse_values(k_text, "K (keep_recent)"),
    )


def parse_facts(text: str) -> tuple[str, ...]:
    """One fact per line; blank lines are skipped."""
    return tuple(line.strip() for line in text.splitlines() if line.strip())


def sweep_frame(rows: Sequence[SweepRow]) -> pd.DataFrame:
    """One row per grid point, in grid order, with the retention ratios as columns."""
    frame = pd.DataFrame([row.as_record() for row in rows])
    if frame.empty:
        return frame
    total = frame["facts_total"].where(frame["facts_total"] > 0)
    frame["state_retention"] = frame["facts_in_state"] / total
    frame["context_retention"] = frame["facts_in_context"] / total
    return frame


def _label(row: SweepRow) -> str:
    return f"N{row.max_messages} T{row.token_threshold} K{row.keep_recent}"


def sweep_figure(rows: Sequence[SweepRow], title: str = "") -> Figure:
    """Tokens before/after (bars) and facts kept (lines) at each grid point."""
    figure = Figure(figsize=(max(6.0, 0.7 * len(rows) + 2), 6.0), layout="constrained")
    tokens_axes, facts_axes = figure.subplots(2, 1, sharex=True)
    positions = list(range(len(rows)))
    width = 0.4
    tokens_axes.bar(
        [p - width / 2 for p in positions], [r.tokens_before for r in rows], width, label="before"
    )
    tokens_axes.bar(
        [p + width / 2 for p in positions], [r.tokens_after for r in rows], width, label="after"
    )
    for position, row in zip(positions, rows, strict=True):
        if row.status == "failed":
            tokens_axes.annotate("failed", (position, row.tokens_after), ha="center", color="red")
    tokens_axes.set_ylabel("tokens in the window")
    tokens_axes.legend(loc="upper right")
    tokens_axes.set_title(title or "compression sweep")
    facts_axes.plot(positions, [r.facts_in_state for r in rows], "o-", label="in TaskState")
    facts_axes.plot(positions, [r.facts_in_context for r in rows], "s--", label="in context")
    total = max((r.facts_total for r in rows), default=0)
    facts_axes.set_ylim(-0.2, total + 0.5)
    facts_axes.set_ylabel(f"facts kept (of {total})")
    facts_axes.legend(loc="lower right")
    facts_axes.set_xticks(positions, [_label(r) for r in rows], rotation=45, ha="right")
    facts_axes.set_xlabel("grid point (N messages, T tokens, K kept)")
    return figure


def figure_png(figure: Figure) -> bytes:
    """The figure as PNG bytes."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90)
    return buffer.getvalue()


def variant_rates(
    tables: pd.DataFrame | dict[str, pd.DataFrame], by: Sequence[str] | None = None
) -> pd.DataFrame:
    """Per variant: ``variant``, ``runs``, ``passed``, ``pass_rate``, ``ci_low``, ``ci_high``
    (Wilson 95%). *tables* is one results table whose variants are the values of *by*
    (default: its parameter columns, and ``model`` when it varies), or ``{label: table}``
    (each table one variant). Runs that never started are not counted."""
    from agentkit.eval.results import param_columns
    from agentkit.eval.stats import wilson_interval

    def counts(table: pd.DataFrame) -> pd.DataFrame:
        ran = table if "outcome" not in table else table[table["outcome"] != "not_started"]
        return ran.assign(passed=ran["passed"].astype(bool))

    rows: list[dict[str, object]] = []
    if isinstance(tables, dict):
        for label, table in tables.items():
            ran = counts(table)
            rows.append({"variant": label, "runs": len(ran), "passed": int(ran["passed"].sum())})
    else:
        keys = list(by) if by is not None else param_columns(tables)
        if by is None and "model" in tables and tables["model"].nunique() > 1:
            keys.append("model")
        ran = counts(tables)
        if not keys:
            rows.append({"variant": "all", "runs": len(ran), "passed": int(ran["passed"].sum())})
        for group_key, group in ran.groupby(keys, sort=False, dropna=False) if keys else ():
            values = group_key if isinstance(group_key, tuple) else (group_key,)
            name = ", ".join(f"{key}={value}" for key, value in zip(keys, values, strict=True))
            rows.append({"variant": name, "runs": len(group), "passed": int(group["passed"].sum())})
    frame = pd.DataFrame(rows, columns=["variant", "runs", "passed"])
    frame["pass_rate"] = frame["passed"] / frame["runs"].where(frame["runs"] > 0)
    bounds = [wilson_interval(p, n) for p, n in zip(frame["passed"], frame["runs"], strict=True)]
    frame["ci_low"] = [low for low, _ in bounds]
    frame["ci_high"] = [high for _, high in bounds]
    return frame


def pass_rate_figure(rates: pd.DataFrame, title: str = "") -> Figure:
    """Each variant's pass rate (a point) and its 95% interval (a bar), from
    :func:`variant_rates`."""
    figure = Figure(figsize=(max(5.0, 0.9 * len(rates) + 2), 4.0), layout="constrained")
    axes = figure.subplots()
    positions = list(range(len(rates)))
    rate = rates["pass_rate"].fillna(0.0)
    below = (rate - rates["ci_low"].fillna(0.0)).clip(lower=0.0)
    above = (rates["ci_high"].fillna(0.0) - rate).clip(lower=0.0)
    axes.errorbar(positions, rate, yerr=[below, above], fmt="o", capsize=6, color="tab:blue")
    for position, line in zip(positions, rates.to_dict("records"), strict=True):
        axes.annotate(
            f"{line['passed']}/{line['runs']}",
            (position, float(line["ci_high"] if line["runs"] else 0.0)),
            textcoords="offset points",
            xytext=(0, 6),
            ha="center",
        )
    axes.set_ylim(-0.05, 1.12)
    axes.set_ylabel("pass rate (95% Wilson interval)")
    axes.set_xticks(positions, list(rates["variant"]), rotation=30, ha="right")
    axes.set_xlim(-0.6, len(rates) - 0.4)
    axes.set_title(title or "pass rate per variant")
    axes.grid(axis="y", alpha=0.3)
    return figure


def judge_rates(
    table: pd.DataFrame, judge: str, agreement: Agreement, by: Sequence[str] | None = None
) -> pd.DataFrame:
    """Per variant (as :func:`variant_rates`): the judge *judge*'s pass rate with its Wilson
    interval (runs it judged pass or fail; ``judge_error`` left out), then its agreement
    with the labels: ``agreement``, ``kappa``, ``kappa_low``, ``kappa_high`` (NaN when there
    are too few labelled runs) and ``trust``, the agreement's one-line summary."""
    column = f"judge_{judge}"
    if column not in table:
        raise UsageError(f"no judge {judge!r} in this table (no {column} column)")
    verdicts = table[column].astype("string")
    judged = table.loc[verdicts.isin(["pass", "fail"])].assign(
        passed=lambda frame: frame[column].astype("string") == "pass"
    )
    rates = variant_rates(judged, by=by)
    rates.insert(0, "judge", judge)
    missing = float("nan")
    rates["agreement"] = agreement.rate if agreement.rate is not None else missing
    rates["kappa"] = agreement.kappa if agreement.kappa is not None else missing
    rates["kappa_low"] = agreement.low if agreement.low is not None else missing
    rates["kappa_high"] = agreement.high if agreement.high is not None else missing
    rates["trust"] = agreement.summary()
    return rates
