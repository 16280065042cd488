"""Scoring a run by a checker from outside the harness (a public suite's own).

A scenario's expectations are agentkit's checks. A scenario loaded from a public suite (BFCL,
:mod:`agentkit.eval.bfcl`) is scored by that suite's checker instead: the harness records what
each turn did as a :class:`RunTranscript` — the user's text, the tool calls the agent made
(as the ``tool_call`` events carried them, valid or not), its answer, its usage — and hands
it to :meth:`Scenario.external_score <agentkit.eval.scenario.Scenario.external_score>`, whose
:class:`ExternalScore` decides ``passed`` beside the expectations and adds its own columns to
the row. A run that could not finish is scored too (its transcript so far), so its columns
are there whatever happened.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pydantic import JsonValue

from agentkit.events import AgentEvent, AskUserEvent, ResultEvent, ToolCallEvent

__all__ = [
    "Cell",
    "ExternalScore",
    "RunTranscript",
    "TranscriptTurn",
    "TurnCall",
    "transcript_turn",
]

#: a value of a results-table cell
Cell = str | int | float | bool | None


@dataclass(frozen=True)
class TurnCall:
    """One tool call a turn made: the tool's name and the arguments the agent gave."""

    name: str
    arguments: Mapping[str, JsonValue]


@dataclass(frozen=True)
class TranscriptTurn:
    """What one turn did."""

    user: str
    calls: tuple[TurnCall, ...] = ()
    answer: str = ""
    asked_user: bool = False
    status: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0
    #: the stateful toolsets' snapshots right after the turn, by toolset name (taken for a
    #: scenario scored from outside only: a checker may need what the tools saw, e.g. the
    #: real value of an argument the events show masked)
    tool_state: Mapping[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True)
class RunTranscript:
    """The turns of one run, in order (``error``: why the run stopped early, if it did)."""

    turns: tuple[TranscriptTurn, ...] = ()
    error: str = ""


@dataclass(frozen=True)
class ExternalScore:
    """An outside checker's verdict: ``passed``, the columns it adds to the row, and (when it
    did not pass) ``why``, which joins the row's ``failures``."""

    passed: bool
    columns: Mapping[str, Cell] = field(default_factory=dict)
    why: str = ""


def transcript_turn(
    user: str, events: Sequence[AgentEvent], tool_state: Mapping[str, JsonValue] | None = None
) -> TranscriptTurn:
    """The :class:`TranscriptTurn` of a turn that sent *user* and yielded *events* (and left
    the toolsets in *tool_state*).

    Calls are the agent's own (the planner's argument-free live-state re-reads are left out)."""
    calls = tuple(
        TurnCall(name=event.name, arguments=dict(event.arguments))
        for event in events
        if isinstance(event, ToolCallEvent) and not event.id.startswith("live-")
    )
    result = next((e for e in reversed(events) if isinstance(e, ResultEvent)), None)
    return TranscriptTurn(
        user=user,
        calls=calls,
        answer=result.text if result is not None else "",
        asked_user=any(isinstance(e, AskUserEvent) and e.kind == "question" for e in events),
        status=result.status if result is not None else "",
        input_tokens=result.usage.input_tokens if result is not None else 0,
        output_tokens=result.usage.output_tokens if result is not None else 0,
        latency_ms=result.latency_ms if result is not None else 0.0,
        tool_state=dict(tool_state or {}),
    )
