"""What a scanner returns, and what it is given.

A scanner is a plain function over one run's :class:`~agentkit.eval.transcript.Transcript`
and a :class:`ScanContext` (which tools change state, which values are secrets): it returns
:class:`Finding` values, each naming its kind, how bad it is, the event it points at (by
turn and by index in :meth:`Transcript.events`) and one sentence saying what happened.
Nothing here calls a model or reads a file: a scan is a pure function of the stored run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from pydantic import BaseModel, ConfigDict

from agentkit.calls.secrets import is_masked
from agentkit.eval.transcript import Transcript

__all__ = [
    "FINDING_COLUMNS",
    "Finding",
    "ScanContext",
    "Scanner",
    "Severity",
]

_MIN_SECRET = 4
#: how bad a finding is
Severity = Literal["info", "warning", "error"]


class Finding(BaseModel):
    """One thing a scanner found in a run (a row of the findings table).

    ``run`` and ``scanner`` are filled in by :func:`~agentkit.eval.scanners.scan`: a scanner
    leaves them empty. ``event`` is the index in :meth:`Transcript.events` of the event the
    finding points at (-1: the run as a whole), ``turn`` that event's turn number
    (:attr:`UserTurn.number`), ``event_type`` its ``type``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    v: Literal[1] = 1
    run: str = ""
    scanner: str = ""
    kind: str
    severity: Severity
    turn: int = 0
    event: int = -1
    event_type: str = ""
    sentence: str


#: the findings table's columns, in order (one row per :class:`Finding`)
FINDING_COLUMNS: tuple[str, ...] = tuple(name for name in Finding.model_fields if name != "v")


@dataclass(frozen=True, slots=True)
class ScanContext:
    """What a scanner may need besides the transcript: the names of the tools that change
    state (side-effecting), the values of the agent's secret store, its toolsets' secret
    patterns (what they match in what the run's user typed is a secret of that run) and, when
    the run is read from a results table, the text cells of its row by column (the
    ``transcript`` column's JSON included: :func:`~agentkit.eval.scanners.builtin.secret_leak`
    reads them)."""

    side_effect_tools: frozenset[str] = field(default_factory=frozenset)
    secrets: tuple[str, ...] = ()
    secret_patterns: tuple[re.Pattern[str], ...] = ()
    columns: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(
        cls,
        side_effect_tools: Iterable[str] = (),
        secrets: Iterable[str] = (),
        secret_patterns: Sequence[re.Pattern[str] | str] = (),
    ) -> ScanContext:
        """A context from any iterables (secrets shorter than 4 characters are left out:
        they would be found everywhere)."""
        kept = tuple(dict.fromkeys(value for value in secrets if len(value) >= _MIN_SECRET))
        patterns = tuple(re.compile(p) if isinstance(p, str) else p for p in secret_patterns)
        return cls(frozenset(side_effect_tools), kept, patterns)

    def for_row(self, record: Mapping[str, object]) -> ScanContext:
        """This context with the text cells of the run's row of the results table."""
        cells = tuple((str(key), value) for key, value in record.items() if isinstance(value, str))
        return replace(self, columns=tuple((key, value) for key, value in cells if value))

    def secrets_of(self, transcript: Transcript) -> list[str]:
        """The secrets of one run: the store's, and what the secret patterns match in what
        its user typed (with groups, what the groups match: the value after "key")."""
        values = list(self.secrets)
        for turn in transcript.turns:
            for pattern in self.secret_patterns:
                for match in pattern.finditer(turn.said):
                    if pattern.groups:
                        values += [group for group in match.groups() if group]
                    else:
                        values.append(match.group(0))
        # a value already masked ("****abcd", what a pattern finds in a masked message) is none
        return [
            value
            for value in dict.fromkeys(values)
            if len(value) >= _MIN_SECRET and not is_masked(value)
        ]


#: a scanner: a function of one run's transcript and its context, returning its findings
Scanner = Callable[[Transcript, ScanContext], Iterable[Finding]]
