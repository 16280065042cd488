"""The results table's row, declared once: :class:`RunRow`.

Its fields are the table's columns, in order (:mod:`agentkit.eval.results` documents each);
four fields stand for a group of columns, expanded where they are declared:

* ``params`` — one column per swept or set parameter, named by its dotted key;
* ``expectations`` — ``exp_<kind>`` for every expectation kind
  (:data:`~agentkit.eval.expectations.EXPECTATION_KINDS`; NA where the scenario does not
  check it);
* ``source`` — a scenario source's own columns (:mod:`agentkit.eval.scorer`), present in a
  table only when some row has them;
* ``judgements`` — the run's judges (:mod:`agentkit.eval.judges.table`): ``judge_errors``,
  ``judge_calls``, ``judge_tokens``, one ``judge_<name>`` column per judge in the table (its
  outcome), then ``judgements`` (the values, as compact JSON).

``transcript`` (the run's :class:`~agentkit.eval.transcript.Transcript`) is stored as compact
JSON in the last column. :meth:`RunRow.columns` derives the column names, :meth:`RunRow.record`
a row's cells and :meth:`RunRow.from_record` reads a stored row back (``--resume``): nothing
else spells a column name.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from functools import cache
from typing import Literal

from pydantic import JsonValue

from agentkit.calls.secrets import SecretMask
from agentkit.eval.expectations import EXPECTATION_KINDS
from agentkit.eval.judges.table import (
    JUDGE_PREFIX,
    JUDGEMENTS_COLUMN,
    judgements_json,
    parse_judgements,
)
from agentkit.eval.judges.values import Judgement
from agentkit.eval.scorer import SourceColumns
from agentkit.eval.transcript import TRANSCRIPT_COLUMN, Transcript

__all__ = [
    "EXPECTATION_PREFIX",
    "JUDGE_FIGURES",
    "Outcome",
    "RunRow",
    "outcome_of",
]

#: a run's outcome (the ``outcome`` column)
Outcome = Literal["passed", "failed", "error", "budget", "not_started"]
#: ``exp_<kind>``: one column per expectation kind
EXPECTATION_PREFIX = "exp_"
#: the fields that stand for a group of columns
_GROUPS = ("params", "expectations", "source", JUDGEMENTS_COLUMN)
#: the judges' figures, first columns of the ``judgements`` group
JUDGE_FIGURES: tuple[str, ...] = ("judge_errors", "judge_calls", "judge_tokens")


@dataclass(frozen=True, slots=True)
class RunRow:
    """One run's row of the results table (the fields are the columns, in order)."""

    # -- which run
    scenario: str
    title: str
    language: str
    agent: str
    tags: str
    point: int
    repeat: int
    #: by dotted config key, the point's parameters (``model`` excluded: its own column)
    params: Mapping[str, JsonValue]
    model: str
    user_model: str
    # -- the verdict
    passed: bool
    outcome: Outcome
    #: by expectation kind, whether every check of that kind passed (absent: not checked)
    expectations: Mapping[str, bool]
    checks: int
    checks_failed: int
    failures: str
    error: str
    # -- figures
    turns: int
    steps: int
    tool_calls: int
    tools: str
    questions: int
    consents: int
    model_calls: int
    input_tokens: int
    output_tokens: int
    #: of the input tokens, those read from the provider's prompt cache
    cached_tokens: int
    #: what the agent's model calls cost in US dollars (None: not priced; ``cost_note`` says
    #: why: :mod:`agentkit.eval.pricing`)
    cost_usd: float | None
    cost_note: str
    compressions: int
    messages_before: int | None
    messages_after: int | None
    tokens_before: int | None
    tokens_after: int | None
    compression_strategy: str
    facts_ungrounded: int
    facts_total: int | None
    facts_kept: int | None
    fact_retention: float | None
    final_status: str
    result_status: str
    answer: str
    errors: str
    budget_reason: str
    sim_turns: int
    sim_stopped_by: str
    sim_model_calls: int
    sim_tokens: int
    #: the simulated user kept to its persona, goal and what it knew (None: fixed turns, or
    #: a run that did not start; :mod:`agentkit.eval.sim_check`), and what it did not
    sim_user_ok: bool | None
    sim_user_issues: str
    attempts: int
    #: requests the model backends sent again after a transient fault (all attempts)
    transport_retries: int
    #: a scenario source's own columns (None: a scenario without a scorer)
    source: SourceColumns | None
    # -- timings and the run's trace: differ between two runs of the scripted model
    latency_ms: float
    wall_ms: float
    trace_id: str
    span_id: str
    # -- what the judges decided (scenario ``expect: judges``; empty: none judged the run)
    judgements: tuple[Judgement, ...]
    # -- everything the run showed
    transcript: Transcript

    def __post_init__(self) -> None:
        unknown = sorted(set(self.expectations) - set(EXPECTATION_KINDS))
        if unknown:
            raise ValueError(f"not expectation kinds: {unknown}")
        if "model" in self.params:
            raise ValueError("the model is its own column, not a parameter")
        names = [item.judge for item in self.judgements]
        if len(set(names)) != len(names):
            raise ValueError(f"a judge judged the run twice: {names}")

    # -- columns --------------------------------------------------------------------------------

    @staticmethod
    def columns(
        params: Sequence[str] = (),
        sources: Sequence[type[SourceColumns]] = (),
        judges: Sequence[str] = (),
    ) -> list[str]:
        """The table's columns, in order, for these parameter names, source columns and
        judge names."""
        names: list[str] = []
        for item in fields(RunRow):
            if item.name == "params":
                names += [key for key in params if key != "model"]
            elif item.name == "expectations":
                names += [EXPECTATION_PREFIX + kind for kind in EXPECTATION_KINDS]
            elif item.name == "source":
                for source in sources:
                    names += [name for name in source.names() if name not in names]
            elif item.name == JUDGEMENTS_COLUMN:
                names += [*JUDGE_FIGURES, *(JUDGE_PREFIX + judge for judge in judges)]
                names.append(JUDGEMENTS_COLUMN)
            else:
                names.append(item.name)
        return names

    def record(self) -> dict[str, object]:
        """The row's cells by column (its own parameters and source columns only)."""
        cells: dict[str, object] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name == "params":
                cells.update(value)
            elif item.name == "expectations":
                for kind in EXPECTATION_KINDS:
                    cells[EXPECTATION_PREFIX + kind] = value.get(kind)
            elif item.name == "source":
                if value is not None:
                    cells.update({name: getattr(value, name) for name in value.names()})
            elif item.name == JUDGEMENTS_COLUMN:
                cells["judge_errors"] = self.judge_errors
                cells["judge_calls"] = sum(judgement.calls for judgement in value)
                cells["judge_tokens"] = sum(judgement.tokens for judgement in value)
                for judgement in value:
                    cells[JUDGE_PREFIX + judgement.judge] = judgement.outcome
                cells[item.name] = judgements_json(value)
            elif item.name == TRANSCRIPT_COLUMN:
                cells[item.name] = value.to_json()
            else:
                cells[item.name] = value
        return cells

    @property
    def judge_errors(self) -> int:
        """The judges whose outcome is ``judge_error`` (counted apart from failures)."""
        return sum(1 for judgement in self.judgements if judgement.outcome == "judge_error")

    @property
    def tokens(self) -> int:
        """The tokens the run spent: the agent's (input + output) and the simulated user's."""
        return self.input_tokens + self.output_tokens + self.sim_tokens

    def masked(self, mask: SecretMask, *, transcript: bool = True) -> RunRow:
        """This row with every secret *mask* knows masked in its text columns and (unless
        *transcript* is False: it is already) its transcript (a key the user typed, one
        passed as a secret-named argument)."""
        text = mask.text
        return replace(
            self,
            title=text(self.title),
            failures=text(self.failures),
            error=text(self.error),
            answer=text(self.answer),
            errors=text(self.errors),
            budget_reason=text(self.budget_reason),
            params=typing.cast(Mapping[str, JsonValue], mask.deep(dict(self.params))),
            judgements=tuple(_masked_judgement(judgement, mask) for judgement in self.judgements),
            transcript=self.transcript.masked(mask) if transcript else self.transcript,
        )

    def with_attempts(self, attempts: int, transport_retries: int) -> RunRow:
        """The row of the last of *attempts*, with the retries of all of them."""
        return replace(self, attempts=attempts, transport_retries=transport_retries)

    # -- reading a stored row back ---------------------------------------------------------------

    @classmethod
    def from_record(
        cls,
        record: Mapping[str, object],
        params: Sequence[str] = (),
        source: type[SourceColumns] | None = None,
    ) -> RunRow:
        """The row of a stored table's *record* (a CSV's empty cells and NaN read as missing);
        *params*: the table's parameter columns, *source*: the row's source columns. A table
        written before transcripts were kept gives an empty transcript, one written before
        judges no judgements."""
        cells = {key: _cell(value) for key, value in record.items()}
        hints = _hints()
        values: dict[str, object] = {}
        for item in fields(cls):
            name = item.name
            if name == "params":
                values[name] = {
                    key: typing.cast(JsonValue, cells.get(key)) for key in params if key != "model"
                }
            elif name == "expectations":
                values[name] = {
                    kind: bool(cells[column])
                    for kind in EXPECTATION_KINDS
                    if (column := EXPECTATION_PREFIX + kind) in cells and cells[column] is not None
                }
            elif name == "source":
                values[name] = (
                    None
                    if source is None
                    else source.model_validate({n: cells.get(n) for n in source.names()})
                )
            elif name == JUDGEMENTS_COLUMN:
                values[name] = parse_judgements(cells.get(name))
            elif name == TRANSCRIPT_COLUMN:
                text = cells.get(name)
                values[name] = (
                    Transcript.from_json(text)
                    if isinstance(text, str) and text
                    else Transcript(run="", scenario=str(cells.get("scenario", "")))
                )
            else:
                values[name] = _typed(cells.get(name), hints[name])
        return cls(**values)  # type: ignore[arg-type]  # each value checked by _typed


def _masked_judgement(judgement: Judgement, mask: SecretMask) -> Judgement:
    """*judgement* with its graders' words masked (their reasons and replies; not their
    cache keys, hashes a secret pattern could take for a key)."""
    graders = tuple(
        grader.model_copy(update={"reason": mask.text(grader.reason), "raw": mask.text(grader.raw)})
        for grader in judgement.graders
    )
    return judgement.model_copy(update={"reason": mask.text(judgement.reason), "graders": graders})


def outcome_of(*, error: str, failed: bool, budget: bool, not_started: bool) -> Outcome:
    """A run's outcome: ``not_started``, else ``error`` (it could not finish), else ``budget``
    (stopped by its budget), else ``passed`` when no check failed, else ``failed``; ``passed``
    is the one outcome whose ``passed`` column is True."""
    if not_started:
        return "not_started"
    if error:
        return "error"
    if budget:
        return "budget"
    return "failed" if failed else "passed"


@cache
def _hints() -> dict[str, object]:
    return typing.get_type_hints(RunRow)


def nullable_columns() -> dict[str, Literal["Int64", "Float64", "boolean"]]:
    """The columns that may be missing, by the pandas dtype that keeps them nullable."""
    dtypes: dict[str, Literal["Int64", "Float64", "boolean"]] = {}
    for name, hint in _hints().items():
        if name in _GROUPS:
            continue
        if hint == int | None:
            dtypes[name] = "Int64"
        elif hint == float | None:
            dtypes[name] = "Float64"
        elif hint == bool | None:
            dtypes[name] = "boolean"
    return dtypes


def _cell(value: object) -> object:
    """A stored cell as a Python value (NaN and pandas' NA: None)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if type(value).__name__ in ("NAType", "NaTType"):
        return None
    item = getattr(value, "item", None)  # a numpy scalar
    return item() if callable(item) and not isinstance(value, str) else value


def _typed(value: object, hint: object) -> object:  # noqa: PLR0911 - one case per type
    """*value* as the field's type (a CSV reads "" as missing and whole floats as floats)."""
    if hint is str or typing.get_origin(hint) is Literal:
        return "" if value is None else str(value)
    if hint is bool:
        return bool(value)
    if hint is int:
        return 0 if value is None else int(typing.cast(float, value))
    if hint is float:
        return 0.0 if value is None else float(typing.cast(float, value))
    if hint == int | None:
        return None if value is None else int(typing.cast(float, value))
    if hint == float | None:
        return None if value is None else float(typing.cast(float, value))
    if hint == bool | None:
        return None if value is None else bool(value)
    raise TypeError(f"no reading for {hint!r}")
