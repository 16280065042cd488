"""A run's transcript as a person reads it: turns of entries (what the user said or decided,
the plan and its steps with their status, each tool call with its arguments and result,
consent requests with the decision that answered them, compressions, errors, the answer).

Every view of a kept run — the run browser, the side-by-side view, the HTML report — reads a
:class:`Timeline`, so they show the same thing and mark the same divergence
(:mod:`agentkit.eval.pairs`). It computes nothing new: it regroups the
:class:`~agentkit.eval.transcript.Transcript`'s events.

Invariant: nothing in a timeline shows a secret. The events a run kept are already masked by
the turn's :class:`~agentkit.tools.SecretMask`; the user's own words are kept as typed, so
every text and argument goes through a mask here as well: the values of secret-named keys,
and a value written after a secret word ("api key …", "secret: …", "token=…").

Each entry remembers the event it came from (``turn``, ``index`` in the turn's events, and
``event`` in the whole run's), so a finding that points at an event can be shown beside it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import JsonValue

from agentkit.calls.secrets import SecretMask
from agentkit.eval.reading import TurnRead, read_run
from agentkit.eval.transcript import Transcript, UserTurn
from agentkit.events import (
    AgentEvent,
    AskUserEvent,
    CompressionEvent,
    ErrorEvent,
    PermissionEvent,
    PlanEvent,
    PlannedStep,
    ReplanEvent,
    ResultEvent,
    SessionEvent,
    StepCompleteEvent,
    StepStartEvent,
    ToolCallEvent,
    ToolResultEvent,
)

__all__ = [
    "MISSING_TRANSCRIPT",
    "Entry",
    "EntryKind",
    "Timeline",
    "TurnView",
    "default_mask",
    "timeline",
]

EntryKind = Literal[
    "user",
    "decision",
    "restart",
    "plan",
    "replan",
    "step",
    "tool",
    "question",
    "consent",
    "compression",
    "error",
    "answer",
]

#: what a view says for a row that kept no transcript (a table written before they were kept)
MISSING_TRANSCRIPT = (
    "no transcript kept for this run (a results table written before transcripts were "
    "kept, or a run that did not start): run the sweep again to see its turns"
)

# A value after a secret word: "api key ABC123", "secret: xyz", "token=…", "password is …".
_SECRET_WORDS = "|".join(
    [
        r"api[ _-]?key",
        r"secret(?:[ _-]?key)?",
        r"access[ _-]?key",
        r"private[ _-]?key",
        "token",
        "password",
        "passphrase",
    ]
)
_SECRET_PHRASE = rf"(?i)\b(?:{_SECRET_WORDS})\b(?:\s+is)?\s*[:=]?\s*[\"']?([^\s\"',;]{{4,}})"


def default_mask() -> SecretMask:
    """The mask a timeline applies unless given one (see the module docstring)."""
    return SecretMask(patterns=SecretMask.compile([_SECRET_PHRASE]))


@dataclass(frozen=True)
class Entry:
    """One thing that happened in a turn, ready to show."""

    kind: EntryKind
    #: the main text: what was said, the step's title, the tool's name, the answer …
    text: str
    #: the tool's name, the step's id, the error's code (kind-specific; "" when none)
    name: str = ""
    #: a step's status (done, failed, skipped, not finished), a tool's (ok, failed), a
    #: consent's decision (approved, rejected, edited, no decision), an answer's turn status
    status: str = ""
    #: arguments (JSON, masked), a plan's steps, a step's summary
    detail: str = ""
    #: a tool's result (masked)
    result: str = ""
    #: where it came from: the event's index in its turn and in the whole run (None: from
    #: what the user did, not from an event)
    index: int | None = None
    event: int | None = None

    @property
    def signature(self) -> str:
        """What two runs must share for this entry to count as the same step (the volatile
        parts — ids, timestamps in tool results — left out)."""
        if self.kind in ("tool", "consent"):
            return f"{self.kind}:{self.name}:{self.detail}"
        if self.kind == "step":
            return f"step:{self.name}:{self.text}:{self.status}"
        if self.kind in ("plan", "replan"):
            return f"{self.kind}:{self.text}:{self.detail}"
        if self.kind == "error":
            return f"error:{self.name}"
        return f"{self.kind}:{self.text}:{self.status}"


@dataclass(frozen=True)
class TurnView:
    """One turn: its number and its entries (the user's first)."""

    number: int
    entries: tuple[Entry, ...]

    @property
    def answer(self) -> str:
        return next((e.text for e in reversed(self.entries) if e.kind == "answer"), "")


@dataclass(frozen=True)
class Timeline:
    """A run as a person reads it; ``missing`` says why there is nothing to read."""

    run: str
    scenario: str
    turns: tuple[TurnView, ...] = ()
    final_status: str = ""
    #: the state the expectations read at the end, as masked JSON ("" when none)
    final_state: str = ""
    missing: str = ""
    #: how many events were not shown as entries (thinking, streamed pieces, session)
    folded: int = field(default=0, compare=False)

    def entries(self) -> list[Entry]:
        return [entry for turn in self.turns for entry in turn.entries]


def timeline(
    transcript: Transcript | None, *, run: str = "", mask: SecretMask | None = None
) -> Timeline:
    """*transcript* as a :class:`Timeline` (a missing transcript gives an empty one whose
    ``missing`` says so; *run* names it then)."""
    if transcript is None:
        return Timeline(run=run, scenario="", missing=MISSING_TRANSCRIPT)
    masker = mask if mask is not None else default_mask()
    turns: list[TurnView] = []
    folded = 0
    read = read_run(transcript)
    for turn in read.turns:
        following = read.following(turn)
        entries, skipped = _turn_entries(turn, following.turn if following else None, masker)
        turns.append(TurnView(turn.number, tuple(entries)))
        folded += skipped
    final = transcript.final
    return Timeline(
        run=transcript.run or run,
        scenario=transcript.scenario,
        turns=tuple(turns),
        final_status=final.status if final is not None else "",
        final_state=_json(masker, final.state) if final is not None and final.state else "",
        folded=folded,
    )


def _json(mask: SecretMask, value: JsonValue) -> str:
    if value in ({}, [], None):
        return ""
    return json.dumps(mask.json(value), ensure_ascii=False, sort_keys=True)


def _steps(mask: SecretMask, steps: Sequence[PlannedStep]) -> str:
    lines = []
    for step in steps:
        what = step.tool_name or step.step_type
        args = _json(mask, step.tool_args)
        title = f" {mask.text(step.title)}" if step.title else ""
        lines.append(f"{step.id} [{what}]{title}" + (f" {args}" if args else ""))
    return "\n".join(lines)


def _decision(turn: UserTurn | None, asked: AskUserEvent) -> str:
    """How the consent request *asked* was answered, read from the next turn."""
    if turn is None:
        return "no decision"
    if turn.decision is not None:
        if turn.decision == "reject":
            return "rejected"
        return "approved, edited" if turn.args is not None else "approved"
    for event in turn.events:
        if isinstance(event, ToolCallEvent) and event.name == asked.tool_name:
            return f"approved ({turn.said!r})"
        if (
            isinstance(event, StepCompleteEvent)
            and event.step_id == asked.step_id
            and event.status == "skipped"
        ):
            return f"rejected ({turn.said!r})"
        if isinstance(event, PlanEvent):
            break
    return f"no decision ({turn.said!r} was taken as a new request)"


def _turn_entries(
    read: TurnRead, following: UserTurn | None, mask: SecretMask
) -> tuple[list[Entry], int]:
    turn = read.turn
    entries: list[Entry] = []
    if turn.restart:
        entries.append(Entry("restart", "the agent was opened afresh (a new process)"))
    if turn.decision is not None:
        args = _json(mask, turn.args) if turn.args is not None else ""
        entries.append(Entry("decision", turn.decision, detail=args))
    else:
        entries.append(Entry("user", mask.text(turn.said)))
    skipped = 0
    for moment in read.moments:
        entry = _entry(moment.event, read.results, read.completed, following, mask)
        if entry is None:
            skipped += 1
            continue
        entries.append(_placed(entry, moment.index, moment.position - moment.index))
    return entries, skipped


def _placed(entry: Entry, index: int, offset: int) -> Entry:
    return Entry(
        entry.kind,
        entry.text,
        entry.name,
        entry.status,
        entry.detail,
        entry.result,
        index,
        offset + index,
    )


def _entry(  # noqa: PLR0911, PLR0912 - one case per event type
    event: AgentEvent,
    results: dict[str, ToolResultEvent],
    completed: dict[str, StepCompleteEvent],
    following: UserTurn | None,
    mask: SecretMask,
) -> Entry | None:
    if isinstance(event, ToolCallEvent):
        result = results.get(event.id)
        status = "no result" if result is None else ("ok" if result.ok else "failed")
        return Entry(
            "tool",
            event.name,
            name=event.name,
            status=status,
            detail=_json(mask, event.arguments) or "{}",
            result=mask.text(result.output) if result is not None else "",
        )
    if isinstance(event, PlanEvent):
        repaired = " (after a repair round)" if event.repaired else ""
        return Entry("plan", mask.text(event.goal) + repaired, detail=_steps(mask, event.steps))
    if isinstance(event, ReplanEvent):
        reason = f": {mask.text(event.reason)}" if event.reason else ""
        return Entry(
            "replan", event.action + reason, name=event.action, detail=_steps(mask, event.steps)
        )
    if isinstance(event, StepStartEvent):
        done = completed.get(event.step_id)
        return Entry(
            "step",
            mask.text(event.title) or event.step_type,
            name=event.step_id,
            status=done.status if done is not None else "not finished",
            detail=mask.text(done.summary) if done is not None else "",
        )
    if isinstance(event, AskUserEvent):
        if event.kind == "confirmation":
            return Entry(
                "consent",
                mask.text(event.question),
                name=event.tool_name,
                status=_decision(following, event),
                detail=_json(mask, event.tool_args) or "{}",
            )
        held = f"held by {event.rule}: {mask.text(event.reason)}" if event.rule else ""
        return Entry("question", mask.text(event.question), name=event.step_id, detail=held)
    if isinstance(event, StepCompleteEvent) and event.rule:  # a call the gate refused
        return Entry(
            "step",
            f"{event.step_id} not run",
            name=event.step_id,
            status="skipped",
            detail=f"held by {event.rule}: {mask.text(event.reason)}",
        )
    if isinstance(event, PermissionEvent):
        return Entry(
            "consent", mask.text(event.title), name=event.tool_call_id, status=event.decision
        )
    if isinstance(event, CompressionEvent):
        text = (
            f"{event.messages_before} → {event.messages_after} messages, "
            f"{event.tokens_before} → {event.tokens_after} tokens ({event.strategy})"
        )
        facts = f"facts +{event.facts_added} -{event.facts_removed}"
        if event.facts_ungrounded:
            facts += f", {event.facts_ungrounded} ungrounded dropped"
        return Entry("compression", text, detail=facts)
    if isinstance(event, ErrorEvent):
        return Entry("error", mask.text(event.message), name=event.code)
    if isinstance(event, ResultEvent):
        return Entry("answer", mask.text(event.text), status=event.status)
    if isinstance(event, SessionEvent | ToolResultEvent | StepCompleteEvent):
        return None  # shown with their call / step; the session is the turn itself
    return None  # thinking, streamed pieces (the answer holds them)
