"""A run read one way: the one walker over a run's transcript, and the typed view it makes.

Every reader of a kept run — the expectations (:func:`~agentkit.eval.expectations.turn_facts`),
the judges' view of the run (:mod:`agentkit.eval.judges.grading`), the scanners
(:mod:`agentkit.eval.scanners.builtin`), the timeline every viewer shows
(:mod:`agentkit.eval.timeline`), the label widget (``lab.label_view``) and the simulated-user
check (:mod:`agentkit.eval.sim_check`) — reads a :class:`RunRead` (or, for one turn's events
as they stream, a :class:`TurnRead`) instead of walking the events on its own. The walk is
done here once, so they agree on what happened:

* each event is a :class:`Moment`: where it is (its turn's number, its index in the turn, its
  position in :meth:`~agentkit.eval.transcript.Transcript.events`) and the event itself;
* each tool call is a :class:`CallRead` paired with its result by id, the planner's own
  re-reads of the live state marked (their ids start with ``live-``);
* per turn: the questions and the consent requests it asked, the steps it started with how
  each completed, the plans it started, whether it re-read the live state, its compressions,
  errors, session, result (the answer, its status, its usage) and what the turn's model calls
  used (the result's usage and each compression's).

It computes nothing a reader must judge (no verdict, no text): only what the events say.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentkit.eval.transcript import RunState, Transcript, UserTurn
from agentkit.events import (
    AgentEvent,
    AskUserEvent,
    CompressionEvent,
    ErrorEvent,
    PlanningEvent,
    ResultEvent,
    SessionEvent,
    StepCompleteEvent,
    StepStartEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from agentkit.types import Usage

__all__ = ["LIVE_PREFIX", "CallRead", "Moment", "RunRead", "TurnRead", "read_run", "read_turn"]

#: the id prefix of the planner's own re-reads of the live configuration (not planned calls)
LIVE_PREFIX = "live-"


@dataclass(frozen=True, slots=True)
class Moment:
    """One event of a run and where it is: the number of its turn, its index in the turn's
    events, its position in the whole run's."""

    turn: int
    index: int
    position: int
    event: AgentEvent


@dataclass(frozen=True, slots=True)
class CallRead:
    """A tool call, its result (None: none came), and where the call is."""

    call: ToolCallEvent
    result: ToolResultEvent | None
    at: Moment

    @property
    def name(self) -> str:
        return self.call.name

    @property
    def arguments(self) -> dict[str, Any]:
        return self.call.arguments

    @property
    def live(self) -> bool:
        """The planner's own re-read of the live state, not a planned call."""
        return self.call.id.startswith(LIVE_PREFIX)

    @property
    def status(self) -> str:
        """``ok``, ``failed`` or ``no result``."""
        if self.result is None:
            return "no result"
        return "ok" if self.result.ok else "failed"


@dataclass(frozen=True)
class TurnRead:
    """One turn as the walker read it (see the module docstring)."""

    #: the turn as the transcript keeps it (what the user said or decided; its events)
    turn: UserTurn
    moments: tuple[Moment, ...] = ()
    calls: tuple[CallRead, ...] = ()
    questions: tuple[AskUserEvent, ...] = ()
    consents: tuple[AskUserEvent, ...] = ()
    steps: tuple[StepStartEvent, ...] = ()
    #: by step id, how each step completed
    completed: dict[str, StepCompleteEvent] = field(default_factory=dict)
    #: by tool-call id, each result
    results: dict[str, ToolResultEvent] = field(default_factory=dict)
    plans: int = 0
    live_state: bool = False
    compressions: tuple[CompressionEvent, ...] = ()
    errors: tuple[ErrorEvent, ...] = ()
    session: str = ""
    result: ResultEvent | None = None
    #: every model call of the turn: the result's usage and each compression's
    usage: Usage = field(default_factory=Usage)

    @property
    def number(self) -> int:
        return self.turn.number

    @property
    def answer(self) -> str:
        """The turn's answer ("" without a result)."""
        return self.result.text if self.result is not None else ""

    @property
    def said(self) -> str:
        """What the user said, or ``(approves the pending action)`` for a decision."""
        if self.turn.decision is not None:
            return f"({self.turn.decision}s the pending action)"
        return self.turn.said

    @property
    def planned_calls(self) -> tuple[CallRead, ...]:
        """The calls the agent planned (its live-state re-reads left out)."""
        return tuple(call for call in self.calls if not call.live)


@dataclass(frozen=True)
class RunRead:
    """A whole run as the walker read it."""

    run: str
    scenario: str
    turns: tuple[TurnRead, ...]
    final: RunState | None

    def moments(self) -> Iterator[Moment]:
        """Every event of every turn, in order."""
        for turn in self.turns:
            yield from turn.moments

    def calls(self) -> list[CallRead]:
        """Every tool call of every turn, in order."""
        return [call for turn in self.turns for call in turn.calls]

    def following(self, turn: TurnRead) -> TurnRead | None:
        """The turn after *turn* (None: it is the last)."""
        place = next(n for n, item in enumerate(self.turns) if item is turn)
        return self.turns[place + 1] if place + 1 < len(self.turns) else None


def read_turn(turn: UserTurn | Sequence[AgentEvent], offset: int = 0) -> TurnRead:
    """*turn* read once (a turn of a transcript, or one turn's events as they came); *offset*:
    the position of its first event in the run."""
    kept = turn if isinstance(turn, UserTurn) else UserTurn(number=0, events=list(turn))
    moments: list[Moment] = []
    pending: list[tuple[ToolCallEvent, Moment]] = []
    questions: list[AskUserEvent] = []
    consents: list[AskUserEvent] = []
    steps: list[StepStartEvent] = []
    completed: dict[str, StepCompleteEvent] = {}
    results: dict[str, ToolResultEvent] = {}
    compressions: list[CompressionEvent] = []
    errors: list[ErrorEvent] = []
    plans, live, session = 0, False, ""
    result: ResultEvent | None = None
    usage = Usage()
    for index, event in enumerate(kept.events):
        moment = Moment(kept.number, index, offset + index, event)
        moments.append(moment)
        if isinstance(event, ToolCallEvent):
            pending.append((event, moment))
        elif isinstance(event, ToolResultEvent):
            results[event.id] = event
        elif isinstance(event, AskUserEvent):
            (consents if event.kind == "confirmation" else questions).append(event)
        elif isinstance(event, PlanningEvent):
            live = live or bool(event.live_state)
            plans += 1
        elif isinstance(event, StepStartEvent):
            steps.append(event)
        elif isinstance(event, StepCompleteEvent):
            completed[event.step_id] = event
        elif isinstance(event, CompressionEvent):
            compressions.append(event)
            usage += event.usage
        elif isinstance(event, ErrorEvent):
            errors.append(event)
        elif isinstance(event, SessionEvent):
            session = event.scenario
        elif isinstance(event, ResultEvent):
            result = event
            usage += event.usage
    calls = tuple(CallRead(call, results.get(call.id), at) for call, at in pending)
    return TurnRead(
        turn=kept,
        moments=tuple(moments),
        calls=calls,
        questions=tuple(questions),
        consents=tuple(consents),
        steps=tuple(steps),
        completed=completed,
        results=results,
        plans=plans,
        live_state=live,
        compressions=tuple(compressions),
        errors=tuple(errors),
        session=session,
        result=result,
        usage=usage,
    )


def read_run(transcript: Transcript) -> RunRead:
    """*transcript* read once (see the module docstring)."""
    turns: list[TurnRead] = []
    offset = 0
    for turn in transcript.turns:
        turns.append(read_turn(turn, offset))
        offset += len(turn.events)
    return RunRead(transcript.run, transcript.scenario, tuple(turns), transcript.final)
