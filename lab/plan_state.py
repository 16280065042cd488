"""The plan a view shows, moved on by the events of the turns it follows: no store read per event.

A :class:`PlanFold` holds a planner conversation's ExecutionState as the view knows it. It
starts from the stored state (read when the view is opened, refreshed or switched to another
conversation); from then on each event of a turn is applied with the planner's own transitions
(ExecutionState's helpers), in the order the events announce them. So a widget turn reads
nothing to draw its plan, however many steps it runs.

Invariant: after a turn, the fold shows what is stored for everything the table and the pause
show (each step's id, type, status, tool, arguments and summary; the flow's status, goal and
pending question or approval). ``tests/test_lab_plan.py`` checks it on every path of the
planner that the events announce. Some changes are announced by what comes after them:

* an answered question: the turn that starts on a ``waiting_user`` pause goes on with it (any
  event but ``planning``, which means a new request): the step is done with the answer;
* a decision: the approved step starts (``step_start``), or the turn ends at once (a
  rejection, an expired approval): the pending steps are skipped and the flow completes;
* a cancel (the ``cancelled`` error): finished steps stay, the rest are skipped, the flow
  fails; another error fails the flow;
* a secret: the planner scrubs the values of a step's secret-named arguments from the whole
  state, the user's own texts included (a key typed in an answer, then planned as
  ``api_key``). Events show those values masked (``****abcd``), so the fold finds them in the
  texts the user sent (a word that masks to what the event shows) and scrubs them the same way.

Not announced, so shown after a Refresh: a write the planner drops in a read-only turn, the
``next_step`` strategy skipping a batch's remaining steps after an answer, ``/clear``, a state
discarded for stale tools, a flow found cut short by a crash.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from agentkit import ExecutionState
from agentkit.calls.secrets import MASK
from agentkit.events import (
    AgentEvent,
    AskUserEvent,
    CompressionEvent,
    ErrorEvent,
    PermissionEvent,
    PlanEvent,
    PlannedStep,
    PlanningEvent,
    ReplanEvent,
    ResultEvent,
    SessionEvent,
    StepCompleteEvent,
    StepStartEvent,
    ThinkingEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from agentkit.memory import Observation, PendingApproval, PlanStep, StepType, Waiting
from agentkit.tools import is_secret_key, mask_secrets, mask_value
from pydantic import JsonValue

__all__ = ["PlanFold"]

#: commands the planner answers without touching the flow (its fast paths)
_COMMANDS = frozenset({"/status", "/clear"})
#: events that say nothing about what a turn does with a pause
_NEUTRAL = (ThinkingEvent, PermissionEvent, CompressionEvent)
#: how many of the user's texts are kept to find the secrets later events show masked
_SAID = 16
_WORD = re.compile(r"[^\s\"'`,;()\[\]{}<>]+")


#: how long an observation the planner keeps is (``agentkit.planning.state``)
_OBSERVATION_CHARS = 1000


def _cut(text: str, limit: int = _OBSERVATION_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _skip_pending(state: ExecutionState, keep: str = "") -> tuple[PlanStep, ...]:
    """The steps, each pending or running one but *keep* skipped (a flow that ends or is
    replanned)."""
    open_ = ("pending", "running")
    return tuple(
        s.model_copy(update={"status": "skipped"}) if s.status in open_ and s.id != keep else s
        for s in state.steps
    )


def _step(planned: PlannedStep) -> PlanStep:
    return PlanStep(
        id=planned.id,
        type=planned.step_type,
        title=planned.title,
        tool_name=planned.tool_name,
        tool_args=planned.tool_args,
    )


def _merged(steps: tuple[PlanStep, ...], new: tuple[PlanStep, ...]) -> tuple[PlanStep, ...]:
    """*steps* with *new* added (a step already there replaced in place)."""
    by_id = {step.id: step for step in new}
    kept = tuple(by_id.pop(step.id, step) for step in steps)
    return (*kept, *(step for step in new if step.id in by_id))


@dataclass
class PlanFold:
    """A conversation's ExecutionState as the view knows it (see the module docstring).

    *mask* masks the user's text as the turn does before it writes it (the agent's
    ``tools.mask.text``): a goal or an answer taken from it is shown as stored.
    """

    state: ExecutionState | None = None
    mask: Callable[[str], str] = field(default=str)
    conversation_id: str = ""
    #: the user's text of the turn being followed
    _text: str = ""
    #: the pause the turn started on, until the turn shows what it does with it
    _paused: ExecutionState | None = None
    #: the user's last texts, and the secrets found in them (see the module docstring)
    _said: list[str] = field(default_factory=list)
    _secrets: set[str] = field(default_factory=set)

    def load(self, state: ExecutionState | None, conversation_id: str = "") -> None:
        """Start over from *state*, as stored."""
        self.state, self.conversation_id, self._paused = state, conversation_id, None

    def begin(self, text: str) -> None:
        """A turn starts with the user's *text* (a message, an answer, "yes" or "no")."""
        self._text = text.strip()
        self._said = [*self._said, self._text][-_SAID:]
        state = self.state
        self._paused = state if state is not None and state.is_waiting else None

    def apply(self, event: AgentEvent) -> bool:
        """Take *event* in; True when the state changed."""
        if isinstance(event, SessionEvent):
            self.conversation_id = event.conversation_id
            return False
        before = self.state
        if self._paused is not None:
            self._settle(event)
        state = self._next(self.state, event)
        if (self._learnt(event) or state is not before) and state is not None and self._secrets:
            # scrubbed as the planner's recorder scrubs what it saves, with the real values
            state = ExecutionState.model_validate(
                mask_secrets(state.model_dump(mode="json"), self._secrets)
            )
        self.state = state
        return state is not before

    def _learnt(self, event: AgentEvent) -> bool:
        """Whether *event* shows masked a secret the user typed that was not known yet (it is
        now)."""
        masked = {mask for args in _arguments(event) for mask in _masked_secrets(args)}
        found = {
            secret
            for said in self._said
            for word in _WORD.findall(said)
            if (secret := word.rstrip(".!?")) not in self._secrets
            and not secret.startswith(MASK)
            and mask_value(secret) in masked
        }
        self._secrets |= found
        return bool(found)

    # -- what the turn did with the pause it started on ------------------------------------------

    def _settle(self, event: AgentEvent) -> None:
        paused = self._paused
        assert paused is not None
        if isinstance(event, _NEUTRAL) or (
            isinstance(event, ToolCallEvent | ToolResultEvent)
            and not any(step.id == event.id for step in paused.steps)
        ):
            return  # a live-state refresh comes before the new request it belongs to
        self._paused = None
        if isinstance(event, PlanningEvent | ErrorEvent):
            return  # a new request (the pause withdrawn), or a failure: applied as such
        if isinstance(event, ResultEvent) and self._text.lower() in _COMMANDS:
            return  # answered without touching the flow (``/clear`` shows after a Refresh)
        if paused.status == "waiting_user":
            self.state = self._answered(paused)
        elif isinstance(event, ResultEvent):  # rejected (or expired): nothing runs
            waiting = paused.waiting
            target = waiting.confirmation_target if waiting else ""
            what = f"not run: {target}" if target else "question withdrawn"
            skipped = paused.with_steps(_skip_pending(paused), plan_id=paused.plan_id)
            self.state = skipped.complete(f"cancelled ({what})")
        # else approved: the step starts (its ``step_start`` resumes the flow)

    def _answered(self, paused: ExecutionState) -> ExecutionState:
        reply = self.mask(self._text)
        question = paused.waiting.question if paused.waiting else ""
        said = f'The user answered the question "{question}": {reply}'
        step_id = paused.current_step_id
        observed = Observation(step_id=step_id, kind="user_reply", content=_cut(said))
        resumed = paused.resume().observe(observed)
        return resumed.mark_step_done(step_id, _cut(reply, 200)) if step_id else resumed

    # -- the planner's transitions, as its events announce them ----------------------------------

    def _next(self, state: ExecutionState | None, event: AgentEvent) -> ExecutionState | None:  # noqa: PLR0911, PLR0912 - one branch per event type
        match event:
            case PlanningEvent():
                return self._fresh(state)
            case PlanEvent():
                state = state or self._fresh(None)
                steps = tuple(_step(planned) for planned in event.steps)
                if state.status != "planning":  # a next batch, added to the flow's steps
                    steps = _merged(state.steps, steps)
                planned_ = state.with_steps(steps, plan_id=state.plan_id)
                return planned_.model_copy(update={"goal": event.goal or state.goal})
            case StepStartEvent():
                state = state or self._fresh(None)
                state = _with_step(state, event.step_id, event.step_type, title=event.title)
                return state.mark_step_running(event.step_id)
            case ToolCallEvent() if state is not None and _has(state, event.id):
                step = state.step(event.id)
                if (step.tool_name, dict(step.tool_args)) == (event.name, event.arguments):
                    return state
                # a step the tool loop added, or arguments edited in the approval
                changed = {"tool_name": event.name, "tool_args": event.arguments}
                return _updated(state, event.id, changed)
            case ToolResultEvent() if state is not None:
                if _has(state, event.id):
                    seen = Observation(step_id=event.id, kind="tool_result", content=event.output)
                else:
                    content = _cut(f"{event.name}: {event.output}")
                    seen = Observation(kind="live_state", content=content)
                return state.observe(seen)
            case StepCompleteEvent() if state is not None:
                name = event.tool_name  # a call the gate held names its tool
                state = _with_step(state, event.step_id, "tool", title=name, tool_name=name)
                if event.status == "done":
                    return state.mark_step_done(event.step_id, event.summary)
                if event.status == "failed":
                    return state.mark_step_failed(event.step_id, event.summary)
                if event.rule:  # a call the gate held: the note it left, as the store has it
                    note = Observation(step_id=event.step_id, kind="note", content=event.summary)
                    state = state.observe(note)
                return _updated(state, event.step_id, {"status": "skipped"})
            case ReplanEvent() if state is not None and event.action != "continue":
                new = tuple(_step(planned) for planned in event.steps)
                kept = _skip_pending(state, keep=state.current_step_id)
                return state.with_steps((*kept, *new), plan_id=state.plan_id)
            case AskUserEvent():
                return self._paused_on(state or self._fresh(None), event)
            case ErrorEvent() if state is not None and state.is_active:
                if event.code == "cancelled":  # finished steps stay, the rest are skipped
                    return state.with_steps(_skip_pending(state)).fail("cancelled")
                return state.fail(event.message)
            case ResultEvent() if state is not None and state.status in ("planning", "running"):
                if event.status == "completed":
                    return state.complete(event.text)
                return state.with_steps(_skip_pending(state)).fail(event.status)
        return state

    def _fresh(self, state: ExecutionState | None) -> ExecutionState:
        """A new request's state (a decided approval stays decided)."""
        return ExecutionState(
            conversation_id=self.conversation_id,
            goal=_cut(self.mask(self._text), 500),
            status="planning",
            decisions=state.decisions if state is not None else (),
        )

    @staticmethod
    def _paused_on(state: ExecutionState, event: AskUserEvent) -> ExecutionState:
        confirmation = event.kind == "confirmation"
        step_id = event.step_id
        if step_id:
            kind: StepType = "tool" if confirmation else "ask_user"
            state = _with_step(
                state,
                step_id,
                kind,
                title=event.tool_name or "Question",
                tool_name=event.tool_name,
                tool_args=event.tool_args,
            )
            state = state.mark_step_running(step_id)
        if not confirmation:
            asked = Waiting(question=event.question, intent="provide_missing_information")
            return state.pause(asked)
        approval = PendingApproval(
            approval_id=event.approval_id,
            tool_name=event.tool_name,
            tool_args=event.tool_args,
            step_id=step_id or state.current_step_id,
            question=event.question,
        )
        shown = json.dumps(event.tool_args, ensure_ascii=False, sort_keys=True)
        waiting = Waiting(
            question=event.question,
            intent="confirm_action",
            confirmation_target=f"{event.tool_name} {shown}",
            approval=approval,
        )
        return state.pause(waiting, confirmation=True)


def _arguments(event: AgentEvent) -> list[dict[str, Any]]:
    """The tool arguments *event* shows (masked)."""
    match event:
        case PlanEvent() | ReplanEvent():
            return [step.tool_args for step in event.steps]
        case AskUserEvent() | ToolCallEvent():
            return [event.tool_args if isinstance(event, AskUserEvent) else event.arguments]
    return []


def _masked_secrets(value: JsonValue) -> Iterable[str]:
    """The masked values under secret-named keys of *value* that keep a tail (``****abcd``:
    a long secret, which a word of the user's can be matched against)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if is_secret_key(key) and isinstance(item, str):
                if len(item) > len(MASK):
                    yield item
            else:
                yield from _masked_secrets(item)
    elif isinstance(value, list):
        for item in value:
            yield from _masked_secrets(item)


def _has(state: ExecutionState, step_id: str) -> bool:
    return any(step.id == step_id for step in state.steps)


def _updated(state: ExecutionState, step_id: str, changes: dict[str, Any]) -> ExecutionState:
    """*state* with step *step_id*'s *changes* (its other steps, its current step kept)."""
    steps = tuple(s.model_copy(update=changes) if s.id == step_id else s for s in state.steps)
    return state.model_copy(update={"steps": steps})


def _with_step(
    state: ExecutionState,
    step_id: str,
    kind: StepType,
    *,
    title: str = "",
    tool_name: str = "",
    tool_args: dict[str, Any] | None = None,
) -> ExecutionState:
    """*state*, with a step *step_id* added when it has none (a step the planner added
    without announcing a plan: the tool loop's, a dropped write's answer)."""
    if _has(state, step_id):
        return state
    added = PlanStep(
        id=step_id,
        type=kind,
        title=title or step_id,
        tool_name=tool_name,
        tool_args=dict(tool_args or {}),
    )
    return state.model_copy(update={"steps": (*state.steps, added)})
