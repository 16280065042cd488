"""Model judges: a rubric in words graded by one or more models, over a run's transcript.

::

    from agentkit.eval import Judge, load_judgements
    helpful = Judge(name="helpful", rubric="The answer gives the status the user asked for.",
                    sees=("answer", "tool_calls"), graders=3, vote="majority")

In a scenario file the same values go under ``expect: judges:``. Modules:
:mod:`~agentkit.eval.judges.values` (the judge, a grader's reply, the judgement),
:mod:`~agentkit.eval.judges.table` (where judgements are kept: the results table),
:mod:`~agentkit.eval.judges.grading` (asking the graders through the call tracer, the vote,
the cache; ``judge_run`` and ``judge_transcript`` are exported by :mod:`agentkit.eval`).
Re-scoring a stored table is :mod:`agentkit.eval.scoring` (``agentkit score``).

This package's own ``__init__`` imports the values and the table only: the scenario schema
imports :class:`Judge`, and grading reads expectations, which read the scenario schema.
"""

from __future__ import annotations

from agentkit.eval.judges.table import (
    JUDGE_PREFIX,
    JUDGEMENTS_COLUMN,
    judge_names,
    load_judgements,
)
from agentkit.eval.judges.values import (
    JUDGE_PARTS,
    GraderVerdict,
    Judge,
    Judgement,
    JudgeOutcome,
    JudgePart,
    JudgeReply,
    Vote,
)

__all__ = [
    "JUDGEMENTS_COLUMN",
    "JUDGE_PARTS",
    "JUDGE_PREFIX",
    "GraderVerdict",
    "Judge",
    "JudgeOutcome",
    "JudgePart",
    "JudgeReply",
    "Judgement",
    "Vote",
    "judge_names",
    "load_judgements",
]
