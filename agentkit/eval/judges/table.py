"""Where judgements live: in the results table, beside the transcripts.

Each row (one run) keeps its judges' :class:`~agentkit.eval.judges.values.Judgement` values as
compact JSON in the ``judgements`` column (a JSON list, ``[]`` for a run no judge saw), so they
survive ``--resume``, export with the table and serve as the cache of a re-score. From them the
row derives, per judge, a column ``judge_<name>`` (``pass``, ``fail`` or ``judge_error``; NA
where that judge did not run) and the figures ``judge_errors`` (judges whose outcome is
``judge_error``: counted apart, never as failures), ``judge_calls`` and ``judge_tokens`` (what
the graders spent, apart from the agent's ``model_calls`` and tokens).

A run is named by its id (:func:`~agentkit.eval.results.run_ids`): one judge's judgement of
each run, by run id, is :func:`~agentkit.eval.scoring.judge_verdicts`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from pydantic import TypeAdapter, ValidationError

from agentkit.errors import UsageError
from agentkit.eval.judges.values import Judgement

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "JUDGEMENTS_COLUMN",
    "JUDGE_PREFIX",
    "judge_error_lines",
    "judge_names",
    "judgements_json",
    "load_judgements",
    "parse_judgements",
]

#: the column that holds each run's judgements (compact JSON list)
JUDGEMENTS_COLUMN = "judgements"
#: ``judge_<name>``: one column per judge, its outcome
JUDGE_PREFIX = "judge_"

_LIST = TypeAdapter(tuple[Judgement, ...])


def judgements_json(judgements: Sequence[Judgement]) -> str:
    """The compact JSON a table cell holds."""
    return "[" + ",".join(item.model_dump_json() for item in judgements) + "]"


def parse_judgements(text: object) -> tuple[Judgement, ...]:
    """The judgements of one cell ("" or a missing cell: none); a ValueError says what is
    wrong."""
    if not isinstance(text, str) or not text.strip():
        return ()
    try:
        return _LIST.validate_json(text)
    except ValidationError as error:
        problem = error.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "(root)"
        raise ValueError(f"the judgements are not valid ({where}: {problem['msg']})") from None


def load_judgements(results: pd.DataFrame | Iterable[object]) -> list[tuple[Judgement, ...]]:
    """Each row's judgements, in row order (empty for a run no judge saw, or a table written
    before judges). *results* is a results table or its ``judgements`` column; a cell that is
    not judgements is a :class:`UsageError` naming the row."""
    import pandas as pd

    column: Iterable[object]
    if isinstance(results, pd.DataFrame):
        if JUDGEMENTS_COLUMN not in results.columns:
            return [() for _ in range(len(results))]
        column = results[JUDGEMENTS_COLUMN].tolist()
    else:
        column = results
    loaded: list[tuple[Judgement, ...]] = []
    for number, cell in enumerate(column):
        try:
            loaded.append(parse_judgements(cell))
        except ValueError as error:
            raise UsageError(f"row {number}: {error}") from None
    return loaded


def judge_names(rows: Iterable[Sequence[Judgement]]) -> list[str]:
    """Every judge's name, in order of first appearance."""
    names: list[str] = []
    for judgements in rows:
        for item in judgements:
            if item.judge not in names:
                names.append(item.judge)
    return names


def judge_error_lines(
    rows: Sequence[Sequence[Judgement]], runs: Sequence[str], *, limit: int = 5
) -> list[str]:
    """The judge errors of a table, said with their reason: ``N judge errors …`` then one
    line per judge and reason (how many runs, the first run's id), at most *limit* of them;
    no line when no judge erred. The reason is the first failing grader's, else the
    judgement's own (the graders that answered could not decide)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for run, judgements in zip(runs, rows, strict=True):
        for item in judgements:
            if item.outcome != "judge_error":
                continue
            failed = [g.reason for g in item.graders if g.outcome == "judge_error" and g.reason]
            reason = " ".join((failed[0] if failed else item.reason or "no reason kept").split())
            groups.setdefault((item.judge, reason), []).append(run)
    if not groups:
        return []
    errors = sum(len(found) for found in groups.values())
    lines = [f"{errors} judge errors (a judge could not decide: counted apart, not as failures):"]
    for (judge, reason), found in list(groups.items())[:limit]:
        where = found[0] if len(found) == 1 else f"{len(found)} runs, e.g. {found[0]}"
        lines.append(f"  {judge} ({where}): {reason}")
    if len(groups) > limit:
        lines.append(f"  … and {len(groups) - limit} more reasons (the judgements column)")
    return lines
