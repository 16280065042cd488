"""ExecutionState: where the current workflow of one conversation stands (seed 002).

One ExecutionState per conversation, so a user can run several workflows at once (one per
conversation). It holds the plan steps, the observations gathered, and, when paused, what the
flow is waiting for. It is persisted after every change (``execution_state:{agent}:{conv}``).

Invariants (checked on construction, so also on load):

* a pause is a value: ``waiting`` is set exactly when ``status`` is ``waiting_user`` or
  ``waiting_confirmation``; :attr:`ExecutionState.is_waiting` is derived from ``status``;
* step ids are unique; ``current_step_id`` is empty or names a step;
* values are immutable: the helpers return a new state with ``updated_at`` refreshed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from agentkit.errors import UsageError
from agentkit.types import Timestamp, utc_now

__all__ = [
    "MAX_DECISIONS",
    "ApprovalDecision",
    "DecisionSource",
    "ExecutionState",
    "ExecutionStatus",
    "Observation",
    "PendingApproval",
    "PlanStep",
    "StepStatus",
    "StepType",
    "Verdict",
    "Waiting",
]

ExecutionStatus = Literal[
    "planning", "running", "waiting_user", "waiting_confirmation", "completed", "failed"
]
StepType = Literal["tool", "reason", "ask_user", "respond"]
StepStatus = Literal["pending", "running", "done", "failed", "skipped"]

WAITING_STATUSES: frozenset[str] = frozenset({"waiting_user", "waiting_confirmation"})
ACTIVE_STATUSES: frozenset[str] = frozenset({"planning", "running", *WAITING_STATUSES})


class _Value(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PlanStep(_Value):
    """One step of a plan. ``tool_*`` apply to ``tool`` steps; ``instruction`` holds the
    reasoning task, the exact question (``ask_user``) or the response instruction."""

    id: str = Field(min_length=1)
    type: StepType
    title: str = ""
    tool_name: str = ""
    tool_args: dict[str, JsonValue] = Field(default_factory=dict)
    instruction: str = ""
    requires_confirmation: bool = False
    status: StepStatus = "pending"
    result_summary: str = ""
    error: str = ""


class Observation(_Value):
    """Something learnt while executing: ``kind`` is e.g. tool_result, user_reply, live_state,
    reasoning or error."""

    step_id: str = ""
    kind: str = Field(min_length=1)
    content: str
    at: Timestamp = Field(default_factory=utc_now)


#: approval decisions an ExecutionState remembers
MAX_DECISIONS = 20


class PendingApproval(_Value):
    """A side-effecting tool call waiting for the user's decision: the value every edge
    (text, Python, HTTP, ACP, widgets, eval) decides on, by its id."""

    kind: Literal["approval"] = "approval"
    approval_id: str
    tool_name: str
    #: the planned arguments, secret-named ones masked
    tool_args: dict[str, JsonValue] = Field(default_factory=dict)
    step_id: str
    #: the question shown to the user
    question: str = ""
    created_at: Timestamp = Field(default_factory=utc_now)
    #: the tool's argument schema (JSON Schema), for an edit before approving
    args_schema: dict[str, JsonValue] = Field(default_factory=dict)


Verdict = Literal["approve", "reject", "expired"]
DecisionSource = Literal["text", "python", "http", "acp", "widget", "eval", "ttl"]


class ApprovalDecision(_Value):
    """How a pending approval was decided (kept in the flow: a second decision on the same
    approval is refused, naming this one)."""

    kind: Literal["decision"] = "decision"
    approval_id: str
    tool_name: str
    decision: Verdict
    source: DecisionSource
    #: the arguments the approved call ran with (masked), when they were edited
    args: dict[str, JsonValue] | None = None
    note: str = ""
    at: Timestamp = Field(default_factory=utc_now)


class Waiting(_Value):
    """What a paused flow waits for: an answer (``waiting_user``) or a confirmation."""

    question: str = ""
    intent: str = ""
    pending_fields: tuple[str, ...] = ()
    confirmation_target: str = ""
    created_at: Timestamp = Field(default_factory=utc_now)
    #: the pending approval of a ``waiting_confirmation`` pause
    approval: PendingApproval | None = None


class ExecutionState(_Value):
    """The working state of the planner for one conversation."""

    v: Literal[1] = 1
    session_id: str = ""
    conversation_id: str = ""
    goal: str = ""
    status: ExecutionStatus = "planning"
    plan_id: str = ""
    steps: tuple[PlanStep, ...] = ()
    current_step_id: str = ""
    observations: tuple[Observation, ...] = ()
    waiting: Waiting | None = None
    final_answer: str = ""
    last_error: str = ""
    #: the flow's approval decisions, the latest last (at most ``MAX_DECISIONS``)
    decisions: tuple[ApprovalDecision, ...] = ()
    capability_signature: str = Field(
        default="", description="fingerprint of the tools the plan was made with"
    )
    updated_at: Timestamp = Field(default_factory=utc_now)

    @model_validator(mode="after")
    def _check(self) -> Self:
        return self._checked()

    def _checked(self) -> Self:
        """*self*, if it keeps the invariants a load checks (raises ``ValueError`` if not)."""
        waiting_status = self.status in WAITING_STATUSES
        if waiting_status and self.waiting is None:
            raise ValueError(f"status {self.status!r} needs 'waiting' (what it waits for)")
        if not waiting_status and self.waiting is not None:
            raise ValueError(f"status {self.status!r} must not carry 'waiting'")
        ids = [step.id for step in self.steps]
        if len(ids) != len(set(ids)):
            raise ValueError("step ids must be unique")
        if self.current_step_id and self.current_step_id not in ids:
            raise ValueError(f"current_step_id {self.current_step_id!r} names no step")
        return self

    @property
    def is_waiting(self) -> bool:
        """Paused for the user (an answer or a confirmation); derived from ``status``."""
        return self.status in WAITING_STATUSES

    @property
    def is_active(self) -> bool:
        """Planning, running or waiting (not completed or failed)."""
        return self.status in ACTIVE_STATUSES

    def step(self, step_id: str) -> PlanStep:
        for step in self.steps:
            if step.id == step_id:
                return step
        raise UsageError(f"execution state has no step {step_id!r}")

    def next_pending_step(self) -> PlanStep | None:
        """The first step still ``pending``, in plan order."""
        return next((step for step in self.steps if step.status == "pending"), None)

    @property
    def pending_approval(self) -> PendingApproval | None:
        """The approval the flow waits for, if it waits for one."""
        if self.status != "waiting_confirmation" or self.waiting is None:
            return None
        return self.waiting.approval

    def decided(self, decision: ApprovalDecision) -> ExecutionState:
        """The same state with *decision* recorded (the last ``MAX_DECISIONS`` kept)."""
        kept = (*self.decisions, decision)[-MAX_DECISIONS:]
        return self._updated(decisions=kept)

    def _updated(self, **changes: object) -> ExecutionState:
        # A copy checked by the same invariants as a load; the changed fields' types are the
        # helpers' own signatures' (a full validation cost a turn ~40 µs)
        return self.model_copy(update={**changes, "updated_at": utc_now()})._checked()

    def _with_step(self, step_id: str, **changes: object) -> tuple[PlanStep, ...]:
        self.step(step_id)  # raises for an unknown id
        return tuple(
            step.model_copy(update=changes) if step.id == step_id else step for step in self.steps
        )

    def mark_step_running(self, step_id: str) -> ExecutionState:
        """*step_id* runs now and becomes the current step."""
        return self._updated(
            status="running",
            waiting=None,
            steps=self._with_step(step_id, status="running"),
            current_step_id=step_id,
        )

    def mark_step_done(self, step_id: str, result_summary: str = "") -> ExecutionState:
        return self._updated(
            steps=self._with_step(step_id, status="done", result_summary=result_summary, error="")
        )

    def mark_step_failed(self, step_id: str, error: str) -> ExecutionState:
        """The step failed; ``last_error`` records why (the state's status is the caller's)."""
        return self._updated(
            steps=self._with_step(step_id, status="failed", error=error), last_error=error
        )

    def observe(self, observation: Observation) -> ExecutionState:
        return self._updated(observations=(*self.observations, observation))

    def pause(self, waiting: Waiting, *, confirmation: bool = False) -> ExecutionState:
        """Wait for the user's answer, or (``confirmation``) for a confirmation."""
        status = "waiting_confirmation" if confirmation else "waiting_user"
        return self._updated(status=status, waiting=waiting)

    def resume(self) -> ExecutionState:
        """Back to ``running``; the waiting record is cleared."""
        return self._updated(status="running", waiting=None)

    def complete(self, final_answer: str) -> ExecutionState:
        return self._updated(status="completed", waiting=None, final_answer=final_answer)

    def fail(self, error: str) -> ExecutionState:
        return self._updated(status="failed", waiting=None, last_error=error)

    def with_steps(self, steps: tuple[PlanStep, ...], *, plan_id: str = "") -> ExecutionState:
        """Replace the plan's steps (a new plan or a replan)."""
        return self._updated(steps=steps, plan_id=plan_id or self.plan_id, current_step_id="")

    def touched(self, now: datetime | None = None) -> ExecutionState:
        """The same state with ``updated_at`` set to *now* (for saving)."""
        return self.model_copy(update={"updated_at": now or utc_now()})
