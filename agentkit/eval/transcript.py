"""A run's transcript: what the user did, every event of every turn, and the state the
expectations read — kept in the results table, so a run can be re-scored, scanned or shown
without running it again.

A :class:`Transcript` is a versioned value (``v``) made as the run goes
(:class:`~agentkit.eval.dialogue.RunLog`) and stored as compact JSON in the table's
``transcript`` column, one per row (parquet compresses it with the table; a CSV holds the same
text). :func:`load_transcripts` gives them back as the same typed values: the events are the
:data:`~agentkit.events.AgentEvent` records the agent emitted, equal field for field.

The user's typed words are masked before the row is written (:meth:`Transcript.masked`,
with the agent's mask: the toolsets' secret patterns, the values their secret store holds and
the values passed as secret-named arguments), as the conversation's journal masks them:
results tables are what researchers share.

What a transcript holds, per turn (:class:`UserTurn`): the user's message — or the decision
on the pending approval — whether the agent was opened afresh first, every event of the turn
(the memory upkeep's ``compression`` event after its ``result`` included), and the state
right after it when the turn's own expectations read it (:class:`RunState`). Then the run's
final state, a simulated user's model calls (their
:class:`~agentkit.calls.records.CallRecord` values: the agent's own calls are in its store's
``calls.jsonl``, kept with ``--keep``) and, from format 2 on, the scenario the run read
(``scenario_spec``), so that ``agentkit score`` re-scores the run when the scenario files are
gone (format 1 transcripts, without it, still load).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from agentkit.calls.records import CallRecord
from agentkit.calls.secrets import SecretMask
from agentkit.errors import UsageError
from agentkit.events import AgentEvent
from agentkit.memory import TaskState

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "TRANSCRIPT_COLUMN",
    "RunState",
    "Transcript",
    "UserTurn",
    "load_transcripts",
]

#: the results table's column that holds each run's transcript (compact JSON)
TRANSCRIPT_COLUMN = "transcript"


class _Value(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RunState(_Value):
    """The state an expectation reads after a turn or at the end of the run."""

    #: the ExecutionState status, or ``none`` (no plan on record)
    status: str
    task_state: TaskState
    #: each stateful toolset's snapshot, by toolset name
    state: dict[str, JsonValue] = Field(default_factory=dict)
    #: the model calls counted so far (of the turn, or of the run)
    model_calls: int = 0


class UserTurn(_Value):
    """One turn: what the user did, and every event the agent emitted for it."""

    number: int
    #: the user's message ("" for a decision on the pending approval)
    said: str = ""
    decision: Literal["approve", "reject"] | None = None
    #: the edited arguments of an approval (None: as planned)
    args: dict[str, JsonValue] | None = None
    #: the agent was opened afresh first (a new process: scenario C)
    restart: bool = False
    events: list[AgentEvent] = Field(default_factory=list)
    #: the state right after the turn, when the turn's own expectations read it
    after: RunState | None = None


class Transcript(_Value):
    """Everything one run showed (see the module docstring)."""

    #: 1: before the scenario was kept in it; 2: :attr:`scenario_spec`
    v: Literal[1, 2] = 2
    #: the run's name, ``{scenario}--p{point}`` (``--r{repeat}`` for a repeat past the first)
    run: str
    scenario: str
    #: the scenario the run read (its file's fields, masked like the rest), so that
    #: ``agentkit score`` re-scores the run when the scenario files are gone (None: a
    #: transcript of format 1, or a scenario made in Python that does not dump)
    scenario_spec: dict[str, JsonValue] | None = None
    turns: list[UserTurn] = Field(default_factory=list)
    #: the state at the end (None: the run stopped before it could be read)
    final: RunState | None = None
    #: the simulated user's model calls, in order
    user_calls: list[CallRecord] = Field(default_factory=list)

    def events(self) -> list[AgentEvent]:
        """Every event of every turn, in order."""
        return [event for turn in self.turns for event in turn.events]

    def to_json(self) -> str:
        """The compact JSON the table stores."""
        return self.model_dump_json()

    def masked(self, mask: SecretMask) -> Transcript:
        """This transcript with every secret *mask* knows masked in what the user side wrote:
        the user's words, an approval's edited arguments (secret-named keys' values too), the
        simulated user's calls and the scenario kept — what the results table keeps, masked as
        the conversation's journal is. The agent's events and states were masked by the
        agent's own mask as they were made (and hold ids a secret pattern could take for keys:
        a trace id), so they are kept as they are."""
        turns = [
            turn.model_copy(
                update={
                    "said": mask.text(turn.said),
                    "args": None if turn.args is None else mask.json(turn.args),
                }
            )
            for turn in self.turns
        ]
        calls = [
            CallRecord.model_validate(mask.deep(call.model_dump(mode="json")))
            for call in self.user_calls
        ]
        spec = self.scenario_spec
        return self.model_copy(
            update={
                "turns": turns,
                "user_calls": calls,
                "scenario_spec": None if spec is None else mask.deep(spec),
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Transcript:
        """The transcript of one table cell (a ValueError names what is wrong)."""
        return cls.model_validate_json(text)


def load_transcripts(
    results: pd.DataFrame | Path | str | Iterable[object],
) -> list[Transcript | None]:
    """Each row's transcript, in row order, as the typed values the run made (None for a run
    that kept none: a table written before transcripts were kept, or a cell left empty).

    *results* is a results table (``run_eval``'s, or one read by ``load_results``), the path
    of one (``.parquet`` or ``.csv``), or its ``transcript`` column (a list or a Series).
    Anything else, and a cell that is not a transcript, is a :class:`UsageError` (naming the
    row), and nothing is returned."""
    import pandas as pd

    if isinstance(results, str | Path):
        from agentkit.eval.results import load_results  # the table's one reader (above us)

        results = load_results(results)
    column: Iterable[object]
    if isinstance(results, bytes | bytearray | dict) or not isinstance(
        results, pd.DataFrame | Iterable
    ):
        raise UsageError(
            "load_transcripts takes a results table (a DataFrame), the path of one, or its "
            f"transcript column, not a {type(results).__name__}"
        )
    if isinstance(results, pd.DataFrame):
        frame = results
        if TRANSCRIPT_COLUMN not in frame.columns:
            raise UsageError(
                "this results table has no transcript column (written before transcripts "
                "were kept): run the sweep again to keep them"
            )
        column = frame[TRANSCRIPT_COLUMN].tolist()
    else:
        column = results
    loaded: list[Transcript | None] = []
    for number, cell in enumerate(column):
        if not isinstance(cell, str) or not cell:
            loaded.append(None)
            continue
        try:
            loaded.append(Transcript.from_json(cell))
        except ValidationError as error:
            problem = error.errors()[0]
            where = ".".join(str(part) for part in problem["loc"]) or "(root)"
            raise UsageError(
                f"row {number}: the transcript is not valid ({where}: {problem['msg']})"
            ) from None
    return loaded
