"""Approvals as values: a pending side-effecting call has an id, and a decision names it.

A consent request is a :class:`~agentkit.memory.PendingApproval` in the paused flow (tool,
masked arguments, step, question, the tool's schema). A :class:`Decision` — approve (the call
as planned, or with edited arguments) or reject — is a turn's input of its own (beside a
message: :data:`~agentkit.planning.state.TurnInput`), from Python, HTTP, ACP, a widget or eval;
the planner reads it as that value, never as words. The only decision read from text is the
user's own typed reply to the consent question ("yes" / "no", the seed's path:
:func:`from_text`). Every one is
checked here (:func:`check`: the approval exists and is still pending, edited arguments
validate) before anything is written, and again under the conversation's writer lock, and
is consumed atomically with the step's durable ``running`` point (the flow's saved state
records the decision and no longer waits): whoever answers first wins, a second decision on
the same approval is :class:`~agentkit.errors.ApprovalDecidedError`, and the tool runs at
most once. Only the user's own reply to the question is read as text: a tool result, a model
reply or any other message never decides anything.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from agentkit.errors import ApprovalDecidedError, ApprovalNotFoundError, InvalidApprovalArgsError
from agentkit.memory import ApprovalDecision, DecisionSource, ExecutionState, PendingApproval
from agentkit.memory.execution_state import PlanStep
from agentkit.planning import intents
from agentkit.tools import ToolRegistry, mask_secrets
from agentkit.tools.registry import ToolArgumentsError
from agentkit.types import format_timestamp, utc_now

__all__ = ["Decision", "check", "from_text", "is_expired", "new_approval"]


@dataclass(frozen=True)
class Decision:
    """A decision on a pending approval, as a turn's input (never a sentence parsed back)."""

    approval_id: str
    decision: Literal["approve", "reject"]
    source: DecisionSource
    #: the arguments to run the call with instead of the planned ones (approve only)
    args: dict[str, Any] | None = None
    note: str = ""
    kind: Literal["decision"] = field(default="decision", init=False)

    @property
    def said(self) -> str:
        """The decision as the conversation shows it (the user's line in its history, a
        widget's bubble): "yes" or "no", with the note. Made for display only: nothing reads
        it back as a decision."""
        return ("yes" if self.decision == "approve" else "no") + (
            f" — {self.note}" if self.note else ""
        )

    def record(self, approval: PendingApproval, decision: str | None = None) -> ApprovalDecision:
        """The decision as the flow keeps it (edited arguments masked)."""
        shown = mask_secrets(dict(self.args)) if self.args is not None else None
        return ApprovalDecision(
            approval_id=approval.approval_id,
            tool_name=approval.tool_name,
            decision=decision or self.decision,  # type: ignore[arg-type]
            source=self.source,
            args=shown if isinstance(shown, dict) else None,
            note=self.note,
        )


def new_approval(step: PlanStep, tools: ToolRegistry, question: str) -> PendingApproval:
    """The pending approval of a consent request for *step*."""
    args = tools.mask.json(dict(step.tool_args))
    schema = tools.get(step.tool_name).json_schema() if step.tool_name in tools else {}
    return PendingApproval(
        approval_id=f"appr-{uuid.uuid4().hex[:16]}",
        tool_name=step.tool_name,
        tool_args=args if isinstance(args, dict) else {},
        step_id=step.id,
        question=question,
        args_schema=schema,
    )


def is_expired(approval: PendingApproval, ttl: float | None, now: datetime | None = None) -> bool:
    """Whether *approval* is older than *ttl* seconds (None: it never expires)."""
    if ttl is None:
        return False
    return (now or utc_now()) - approval.created_at > timedelta(seconds=ttl)


def from_text(state: ExecutionState, text: str) -> Decision | None:
    """The user's reply to a consent question as a decision ("yes" / 好的 → approve, "no" /
    不要 → reject); None when the reply is neither (a new request cancels the approval)."""
    approval = state.pending_approval
    if approval is None:
        return None
    if intents.is_confirmation(text):
        return Decision(approval.approval_id, "approve", "text")
    if intents.is_refusal(text):
        return Decision(approval.approval_id, "reject", "text")
    return None


def check(
    state: ExecutionState | None, decision: Decision, tools: ToolRegistry, conversation_id: str
) -> PendingApproval:
    """The pending approval *decision* names, or the error that refuses it (nothing written):
    unknown, already decided (saying how and when), or edited arguments that do not validate."""
    if state is not None:
        approval = state.pending_approval
        if approval is not None and approval.approval_id == decision.approval_id:
            if decision.args is not None:
                if decision.decision != "approve":
                    raise InvalidApprovalArgsError(
                        decision.approval_id, approval.tool_name, "only an approval takes arguments"
                    )
                try:
                    tools.validate(approval.tool_name, decision.args)
                except ToolArgumentsError as error:
                    raise InvalidApprovalArgsError(
                        decision.approval_id, approval.tool_name, str(error)
                    ) from None
            return approval
        for past in reversed(state.decisions):
            if past.approval_id == decision.approval_id:
                raise ApprovalDecidedError(
                    past.approval_id, past.decision, past.source, format_timestamp(past.at)
                )
    raise ApprovalNotFoundError(conversation_id, decision.approval_id)
