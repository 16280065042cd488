"""``PlanView``: a planner conversation's ExecutionState as a live table, and its pause.

A thin view: the table and the pending request come from :mod:`lab.plan_table` (plain
functions over an ExecutionState); the buttons call the agent. The state shown is a
:class:`~lab.plan_state.PlanFold`: read from the store when the view is opened, refreshed or
switched to another conversation, then moved on by the events of each turn it follows (its
own, or a ChatPanel's), never re-read per event. Before it acts on a pause (Answer, Approve,
Reject, Edit), the view reads the stored pause again: it may have been answered elsewhere
meanwhile. "A turn is running" comes from the agent (:meth:`~agentkit.Agent.turn_running`):
a turn started elsewhere through the same agent disables the buttons too. Answering a
question sends the answer as the next message; Approve and Reject decide on the pending
approval by its id (a typed decision, source ``widget``, as ``Agent.adecide`` makes: never a
"yes" the planner reads back), and "Edit arguments" opens a form built from the tool's schema
(:mod:`lab.approval_form`) whose values replace the planned ones for that one call. A decision
is single-use: one made elsewhere first (another tab, a typed "yes") makes this one "already
decided", shown as a notice, and nothing runs twice.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Literal

import ipywidgets as widgets
from agentkit import Agent, AgentkitError, ExecutionState
from agentkit.events import AgentEvent

from lab._html import frame_html, message_html, notice_html
from lab._turns import busy, start_decision, start_turn, then, widget_decision
from lab.approval_form import ApprovalForm
from lab.chat_state import TurnView, message_problem
from lab.plan_state import PlanFold
from lab.plan_table import PendingRequest, pending_request, plan_frame, plan_summary

__all__ = ["PlanView"]

SendFunction = Callable[[str], "Future[list[AgentEvent]] | None"]
"""How the view sends a message (a ChatPanel passes its own, so replies show in the chat)."""
DecideFunction = Callable[
    [str, Literal["approve", "reject"], "dict[str, Any] | None"],
    "Future[list[AgentEvent]] | None",
]
"""How the view decides on an approval: ``(approval_id, decision, args)`` (a ChatPanel passes
its own, so the continuation shows in the chat)."""


class PlanView(widgets.VBox):  # type: ignore[misc]  # ipywidgets is untyped
    """The plan steps of *conversation_id* (status, tool, masked arguments, observations)."""

    def __init__(
        self,
        agent: Agent,
        conversation_id: str | None = None,
        *,
        send: SendFunction | None = None,
        decide: DecideFunction | None = None,
    ) -> None:
        self.agent = agent
        self.conversation_id = conversation_id
        self.fold = PlanFold(mask=agent.tools.mask.text)
        self.pending: PendingRequest | None = None
        #: the last turn started from this view, done once the view shows its end
        self.turn: Future[list[AgentEvent]] | None = None
        self._send_text = send
        self._decide_with = decide
        self._own_turn: TurnView | None = None
        self._started: Future[list[AgentEvent]] | None = None

        self.summary = widgets.HTML()
        self.table = widgets.HTML()
        self.notice = widgets.HTML()
        self.reply = widgets.HTML()
        self.refresh_button = widgets.Button(description="Refresh", icon="refresh")
        self.question = widgets.HTML()
        self.answer_box = widgets.Text(placeholder="Your answer", layout={"width": "60%"})
        self.answer_box.add_class("agentkit-plan-answer")
        self.answer_button = widgets.Button(description="Answer", button_style="primary")
        self.answer_button.add_class("agentkit-plan-answer-send")
        self.approve_button = widgets.Button(description="Approve", button_style="success")
        self.approve_button.add_class("agentkit-plan-approve")
        self.reject_button = widgets.Button(description="Reject", button_style="danger")
        self.reject_button.add_class("agentkit-plan-reject")
        self.edit_button = widgets.Button(description="Edit arguments", icon="edit")
        self.edit_button.add_class("agentkit-plan-edit")
        self.approve_edit_button = widgets.Button(
            description="Approve edited", button_style="success"
        )
        self.approve_edit_button.add_class("agentkit-plan-approve-edited")
        self.form: ApprovalForm | None = None
        self.form_box = widgets.VBox([])
        self.answer_row = widgets.HBox([self.answer_box, self.answer_button])
        self.consent_row = widgets.HBox([self.approve_button, self.reject_button, self.edit_button])
        self.pending_box = widgets.VBox([])

        self.refresh_button.on_click(lambda _: self.refresh())
        self.answer_button.on_click(lambda _: self.answer())
        self.approve_button.on_click(lambda _: self.approve())
        self.reject_button.on_click(lambda _: self.reject())
        self.edit_button.on_click(lambda _: self.edit())
        self.approve_edit_button.on_click(lambda _: self.approve_edited())

        header = widgets.HBox([widgets.HTML("<b>Plan</b>"), self.refresh_button])
        super().__init__(
            [header, self.summary, self.table, self.pending_box, self.notice, self.reply]
        )
        self.add_class("agentkit-plan-view")
        self.refresh()

    # -- reading -------------------------------------------------------------------------------

    @property
    def state(self) -> ExecutionState | None:
        """The ExecutionState shown: as stored when last read, moved on by the turns since."""
        return self.fold.state

    @property
    def busy(self) -> bool:
        """A turn of this conversation is running, as the agent says (started here, in a
        ChatPanel, anywhere through the same agent), or this view's own turn has not ended."""
        return busy(self.agent, self.conversation_id, self._started)

    def show(self, conversation_id: str | None) -> None:
        """Follow another conversation (None: none yet); its stored state is read."""
        self.conversation_id = conversation_id
        self.reply.value = ""
        self.refresh()

    def follow(self, conversation_id: str) -> None:
        """The turn being followed started *conversation_id* (a new conversation): follow it
        on from the turn's events, with nothing to read."""
        self.conversation_id = conversation_id
        self.fold.conversation_id = conversation_id

    def refresh(self) -> None:
        """Read the stored ExecutionState again and redraw."""
        state: ExecutionState | None = None
        problem = ""
        if self.conversation_id is not None:
            try:
                loaded = self.agent.execution_state(self.conversation_id)
            except AgentkitError as error:  # unknown conversation, unreadable state
                problem = str(error)
            else:
                state = loaded.value if loaded is not None else None
        self.fold.load(state, self.conversation_id or "")
        self._draw()
        if problem:
            self.notice.value = notice_html(problem, "error")

    def begin(self, text: str) -> None:
        """A turn of the conversation starts from *text* (its events follow, to :meth:`apply`)."""
        self.fold.begin(text)

    def apply(self, event: AgentEvent) -> None:
        """Move the plan on by *event* of the turn being followed; redraw when it changed."""
        if self.fold.apply(event):
            self._draw()

    def ended(self) -> None:
        """The turn being followed is over: redraw the buttons (they follow the agent's
        busy-ness)."""
        self._draw_pending()

    def _draw(self) -> None:
        state = self.state
        self.pending = pending_request(state)
        self.summary.value = f"<small>{plan_summary(state)}</small>"
        self.table.value = frame_html(
            plan_frame(state), empty="No plan steps yet.", css_class="agentkit-plan-table"
        )
        self._draw_pending()

    def _draw_pending(self) -> None:
        pending = self.pending
        busy = self.busy
        for button in (
            self.answer_button,
            self.approve_button,
            self.reject_button,
            self.edit_button,
            self.approve_edit_button,
        ):
            button.disabled = busy
        if pending is None:
            self.pending_box.children = []
            return
        label = "Question" if pending.kind == "question" else "Consent needed"
        self.question.value = f"<b>{label}:</b> " + message_html("assistant", pending.text)
        if pending.kind == "question":
            self.pending_box.children = [self.question, self.answer_row]
        else:
            self.pending_box.children = [self.question, self.consent_row, self.form_box]

    # -- answering -----------------------------------------------------------------------------

    def answer(self, text: str | None = None) -> Future[list[AgentEvent]] | None:
        """Answer the pending question (default: the answer box); None when nothing was sent."""
        text = self.answer_box.value if text is None else text
        problem = message_problem(text)
        if problem:
            self.notice.value = notice_html(problem.replace("a message", "an answer"), "warn")
            return None
        future = self._respond("question", text)
        if future is not None:
            self.answer_box.value = ""
        return future

    def approve(self) -> Future[list[AgentEvent]] | None:
        """Approve the pending tool call as planned (by its approval id)."""
        return self._decide("approve")

    def reject(self) -> Future[list[AgentEvent]] | None:
        """Reject the pending tool call; the flow is cancelled."""
        return self._decide("reject")

    def edit(self) -> None:
        """Open the form of the pending call's arguments (from the tool's schema, which the
        stored approval holds: it is read again)."""
        self.refresh()
        approval = self.state.pending_approval if self.state is not None else None
        if approval is None:
            self.notice.value = notice_html("Nothing is waiting for your consent.", "warn")
            return
        self.form = ApprovalForm(approval)
        buttons = [self.approve_edit_button] if self.form.fields is not None else []
        self.form_box.children = [self.form, *buttons]

    def approve_edited(self) -> Future[list[AgentEvent]] | None:
        """Approve the pending call with the form's arguments instead of the planned ones."""
        if self.form is None:
            return None
        try:
            args = self.form.args()
        except ValueError as error:
            self.notice.value = notice_html(f"Not sent: {error}", "warn")
            return None
        return self._decide("approve", args)

    def _still_pending(self, kind: Literal["question", "confirmation"]) -> bool:
        """Whether the stored flow still waits for *kind* (it is read again: the pause may
        have been answered elsewhere meanwhile); says why not when it does not."""
        if self.busy:
            self.notice.value = notice_html("A turn is still running; wait for it.", "warn")
            return False
        self.refresh()
        if self.pending is None or self.pending.kind != kind or self.conversation_id is None:
            what = "an answer" if kind == "question" else "your consent"
            status = self.state.status if self.state is not None else "no plan"
            self.notice.value = notice_html(
                f"Nothing is waiting for {what} any more (status: {status}); nothing was sent.",
                "warn",
            )
            return False
        self.notice.value = ""
        return True

    def _decide(
        self, decision: Literal["approve", "reject"], args: dict[str, Any] | None = None
    ) -> Future[list[AgentEvent]] | None:
        if not self._still_pending("confirmation"):
            return None
        approval = self.state.pending_approval if self.state is not None else None
        conversation = self.conversation_id
        if approval is None or conversation is None:  # a pause older than approval ids
            self.notice.value = notice_html("Answer it in the chat: yes or no.", "warn")
            return None
        self.form_box.children = []
        if self._decide_with is not None:
            return self._follow(self._decide_with(approval.approval_id, decision, args))
        chosen = widget_decision(approval.approval_id, decision, args)
        self._begin_own(chosen.said)  # shown as the history will show it ("yes" / "no")
        return self._follow(start_decision(self.agent, conversation, chosen, self._on_event))

    def _respond(
        self, kind: Literal["question", "confirmation"], text: str
    ) -> Future[list[AgentEvent]] | None:
        if not self._still_pending(kind):
            return None
        if self._send_text is not None:
            return self._follow(self._send_text(text))
        self._begin_own(text)
        conversation = self.conversation_id
        return self._follow(start_turn(self.agent, conversation, text, self._on_event))

    def _begin_own(self, text: str) -> None:
        self._own_turn = TurnView(user_text=text)
        self.begin(text)

    def _follow(self, started: Future[list[AgentEvent]] | None) -> Future[list[AgentEvent]] | None:
        """Show *started* (a turn this view began) as running until it ends."""
        if started is None:  # refused by whoever sends (it says why)
            return None
        self._started = started
        self._draw_pending()
        self.turn = then(started, self._after_turn)
        return self.turn

    def _on_event(self, event: AgentEvent) -> None:
        turn = self._own_turn
        if turn is None:
            return
        turn.apply(event)
        self.apply(event)
        self.reply.value = message_html("assistant", turn.reply or turn.doing or "…")

    def _after_turn(self, future: Future[list[AgentEvent]]) -> None:
        error = None if future.cancelled() else future.exception()
        if error is not None:
            self.notice.value = notice_html(f"Not sent: {error}", "error")
        self.ended()
