"""A scenario source's own columns and scoring: the results table's one extension point.

A source of scenarios that scores runs its own way (a public suite scored by its own
checkers) declares its columns once, as the fields of a :class:`SourceColumns` subclass, and
attaches a :class:`RunScorer` to each scenario it makes (``Scenario(..., scorer=…)``; a
scenario file cannot set one). After each run — also one that ended in an error, and for a
run that never started, with an empty transcript — the run calls ``scorer.score(transcript)``;
the :class:`SourceScore` it returns fills the row's source columns and, when it gives a
verdict, counts as one more check in ``passed``, ``checks``, ``checks_failed`` and
``failures`` (it makes no ``exp_*`` column). Scoring reads the transcript only, so a stored
table can be scored again without running anything.

A scorer travels with its task to worker processes and Dask workers: it must be picklable
(a frozen dataclass of plain values, defined in an importable module).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from agentkit.eval.transcript import Transcript

__all__ = ["RunScorer", "SourceColumns", "SourceScore"]


class SourceColumns(BaseModel):
    """A source's own columns: subclass it; each field is a column, named as the field
    (prefix the names with the source's name: ``bfcl_id``). Every field needs a default (a
    row of another source, in the same table, holds NA there)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The column names, in declaration order."""
        return tuple(cls.model_fields)


@dataclass(frozen=True, slots=True)
class SourceScore:
    """What a scorer made of one run: its columns, and optionally a verdict."""

    columns: SourceColumns
    #: the source's verdict (None: the source does not judge this run)
    passed: bool | None = None
    #: the check's name in ``failures`` and in the run's evaluation events
    kind: str = "source"
    #: why it failed (shown in ``failures``)
    detail: str = ""


class RunScorer(ABC):
    """Scores a run from its transcript (see the module docstring)."""

    #: the columns this scorer fills
    columns: ClassVar[type[SourceColumns]]
    #: True: the transcript keeps the state after every turn (``UserTurn.after``; else only
    #: after the turns whose own expectations read it)
    turn_state: ClassVar[bool] = False

    @abstractmethod
    def score(self, transcript: Transcript) -> SourceScore:
        """The run's columns (and verdict) from *transcript*, which may have no turns (the
        run failed before its first one, or never started)."""
