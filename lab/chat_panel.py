"""``ChatPanel``: chat with an agent in a notebook, the reply streaming in as it is written.

A thin view over ``agent.send_message``: the turn runs on the agent's background loop
(:mod:`lab._turns`), each event is folded into a :class:`~lab.chat_state.TurnView` and the
widgets are redrawn from it. For a planner agent the panel embeds a :class:`~lab.plan_view.PlanView`
of the same conversation, moved on by the same events.

Invariant: a turn is drawn from its events only. The messages it added are appended from them
(the ``session`` event names the turn, ``result`` carries the answer; the user's text is masked
as the turn masks it before writing it), the plan moves on by them, the picker gains the new
conversation from them: nothing is read back from the store during or after a turn. The stored
history and plan are read when a conversation is opened or picked, and on Reload. "A turn is
running" is the agent's answer (:meth:`~agentkit.Agent.turn_running`), so a turn started
elsewhere through the same agent (another view, a cell calling ``agent.send``) shows as busy
too; the panel tracks its own turn only until the agent knows of it. A turn's stream may go
on after ``result`` (the ``compression`` event of the memory upkeep after it): it is shown,
and the turn is over when the stream is.

Nothing typed is lost: a message refused before its turn starts (empty, busy conversation,
unknown model spec) stays in the text box with the reason shown.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from html import escape
from typing import Any, Literal

import ipywidgets as widgets
from agentkit import Agent, AgentkitError, Message
from agentkit.events import AgentEvent, SessionEvent
from agentkit.titles import conversation_title

from lab._html import notice_html, pre_html
from lab._turns import busy, start_cancel, start_decision, start_turn, then, widget_decision
from lab.chat_state import (
    NEW_CONVERSATION,
    TurnView,
    badge_html,
    compression_note,
    conversation_option,
    conversation_options,
    message_problem,
    transcript_html,
)
from lab.plan_view import PlanView

__all__ = ["ChatPanel"]

_LOG_LINES = 200


class ChatPanel(widgets.VBox):  # type: ignore[misc]  # ipywidgets is untyped
    """Pick or start a conversation, send messages, watch the reply, the events and the plan."""

    def __init__(
        self, agent: Agent, conversation_id: str | None = None, *, plan: bool | None = None
    ) -> None:
        self.agent = agent
        self.history: Sequence[Message] = (
            agent.load_conversation_history(conversation_id) if conversation_id else []
        )  # raises ConversationNotFoundError for an unknown id, before any widget exists
        self.conversation_id = conversation_id
        #: the last turn sent from this panel, done once the panel shows its end
        self.turn: Future[list[AgentEvent]] | None = None
        self.turn_view: TurnView | None = None
        self.stopping: Future[bool] | None = None
        self.log_lines: list[str] = []
        self._picking = False
        self._started: Future[list[AgentEvent]] | None = None

        title = f"<b>{escape(agent.config.name or agent.id)}</b> · {escape(agent.id)}"
        self.heading = widgets.HTML(f"{title} · engine {escape(agent.config.engine)}")
        self.picker = widgets.Dropdown(
            description="Conversation",
            options=conversation_options(agent.list_conversations()),
            value=conversation_id or NEW_CONVERSATION,
            layout={"width": "70%"},
            style={"description_width": "initial"},
        )
        self.picker.add_class("agentkit-chat-picker")
        self.reload_button = widgets.Button(
            icon="refresh", tooltip="Reload the conversations", layout={"width": "3em"}
        )
        self.badge = widgets.HTML(badge_html(""))
        self.badge.add_class("agentkit-chat-badge")
        self.transcript = widgets.HTML()
        self.transcript.add_class("agentkit-chat-transcript")
        self.input = widgets.Textarea(
            placeholder="Type a message, then Send", layout={"width": "70%", "height": "4em"}
        )
        self.input.add_class("agentkit-chat-input")
        self.send_button = widgets.Button(description="Send", button_style="primary", icon="send")
        self.send_button.add_class("agentkit-chat-send")
        self.stop_button = widgets.Button(description="Stop", icon="stop", disabled=True)
        self.stop_button.add_class("agentkit-chat-stop")
        self.notice = widgets.HTML()
        self.event_log = widgets.HTML(pre_html("(no events yet)"))
        self.event_log.add_class("agentkit-chat-log")
        log_box = widgets.Accordion([self.event_log], titles=("Event log",))

        is_planner = agent.config.engine == "planner"
        self.plan_view: PlanView | None = (
            PlanView(agent, conversation_id, send=self.submit, decide=self.decide)
            if (plan if plan is not None else is_planner)
            else None
        )

        self.picker.observe(self._on_pick, names="value")
        self.reload_button.on_click(lambda _: self.reload())
        self.send_button.on_click(lambda _: self.submit())
        self.stop_button.on_click(lambda _: self.stop())

        children: list[widgets.Widget] = [
            self.heading,
            widgets.HBox([self.picker, self.reload_button]),
            self.badge,
            self.transcript,
            widgets.HBox([self.input, widgets.VBox([self.send_button, self.stop_button])]),
            self.notice,
        ]
        if self.plan_view is not None:
            children.append(self.plan_view)
        children.append(log_box)
        super().__init__(children)
        self.add_class("agentkit-chat-panel")
        self._draw()

    # -- state ---------------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """A turn of the shown conversation is running, as the agent says (sent here or from
        another view of the agent, or its memory upkeep), or the one sent here has not ended."""
        return busy(self.agent, self.conversation_id, self._started)

    def _draw(self) -> None:
        self.transcript.value = transcript_html(self.history, self.turn_view)
        lines = self.log_lines + (self.turn_view.log if self.turn_view is not None else [])
        self.event_log.value = pre_html("\n".join(lines[-_LOG_LINES:]) or "(no events yet)")
        busy = self.busy
        self.send_button.disabled = busy
        self.stop_button.disabled = not busy
        self.picker.disabled = busy

    def _archive_turn(self) -> None:
        """Move the finished turn's log lines to the panel's log; forget the turn view."""
        if self.turn_view is not None:
            self.log_lines.extend(self.turn_view.log)
            del self.log_lines[:-_LOG_LINES]
        self.turn_view = None

    def _set_picker(
        self, conversation_id: str | None, options: list[tuple[str, str]] | None = None
    ) -> None:
        """Show *conversation_id* picked among *options* (default: the agent's conversations,
        read again)."""
        self._picking = True
        try:
            if options is None:
                options = conversation_options(self.agent.list_conversations())
            self.picker.options = options
            self.picker.value = conversation_id or NEW_CONVERSATION
        finally:
            self._picking = False

    def _picked_first(self, conversation_id: str, text: str) -> None:
        """The turn's conversation comes first in the picker, as the most recently updated
        (a new one titled as the agent titles it, from the message): nothing is read."""
        options = list(self.picker.options)
        shown = next((o for o in options if o[1] == conversation_id), None)
        if shown is None:
            title = conversation_title(self.agent.tools.mask.text(text))
            shown = conversation_option(title, conversation_id)
        else:
            options.remove(shown)
        self._set_picker(conversation_id, [options[0], shown, *options[1:]])

    def reload(self) -> None:
        """Reload the conversation list and the current conversation's messages."""
        self._set_picker(self.conversation_id)
        self.history = (
            self.agent.load_conversation_history(self.conversation_id)
            if self.conversation_id
            else []
        )
        if self.plan_view is not None:
            self.plan_view.show(self.conversation_id)
        self._draw()

    def select(self, conversation_id: str | None) -> None:
        """Switch to *conversation_id* (None: the next message starts a new conversation)."""
        self.picker.value = conversation_id or NEW_CONVERSATION

    def _on_pick(self, change: dict[str, Any]) -> None:
        if self._picking:
            return
        chosen = change["new"] or None
        try:
            self.history = self.agent.load_conversation_history(chosen) if chosen else []
        except AgentkitError as error:  # deleted meanwhile
            self.notice.value = notice_html(str(error), "error")
            self._set_picker(self.conversation_id)
            return
        self.conversation_id = chosen
        self._archive_turn()
        self.badge.value = badge_html("")
        self.notice.value = ""
        if self.plan_view is not None:
            self.plan_view.show(chosen)
        self._draw()

    # -- a turn --------------------------------------------------------------------------------

    def submit(self, text: str | None = None) -> Future[list[AgentEvent]] | None:
        """Send *text* (default: the text box); the reply streams in. None when refused."""
        typed = text is None
        text = self.input.value if text is None else text
        problem = message_problem(text)
        if not problem and self.busy:
            problem = "A turn is still running: wait for it, or press Stop."
        if problem:
            self.notice.value = notice_html(problem, "warn")
            return None
        if typed:
            self.input.value = ""
        return self._start(
            text.strip(), lambda: start_turn(self.agent, self.conversation_id, text, self._on_event)
        )

    def decide(
        self,
        approval_id: str,
        decision: Literal["approve", "reject"],
        args: dict[str, Any] | None = None,
    ) -> Future[list[AgentEvent]] | None:
        """Decide on the pending approval *approval_id* (PlanView's buttons); the
        continuation streams into the chat like a reply."""
        if self.busy or self.conversation_id is None:
            self.notice.value = notice_html("A turn is still running: wait for it.", "warn")
            return None
        conversation = self.conversation_id
        chosen = widget_decision(approval_id, decision, args)
        return self._start(  # shown as the history will show it ("yes" / "no")
            chosen.said, lambda: start_decision(self.agent, conversation, chosen, self._on_event)
        )

    def _start(
        self, shown: str, begin: Callable[[], Future[list[AgentEvent]]]
    ) -> Future[list[AgentEvent]]:
        self.notice.value = ""
        self._archive_turn()
        self.turn_view = TurnView(user_text=shown)
        if self.plan_view is not None:
            self.plan_view.begin(shown)
        started = begin()
        self._started = started
        self._draw()
        self.turn = then(started, self._after_turn)
        return self.turn

    def _on_event(self, event: AgentEvent) -> None:
        turn = self.turn_view
        if turn is None:
            return
        turn.apply(event)
        if isinstance(event, SessionEvent):
            self.badge.value = badge_html(event.scenario)
            if self.conversation_id != event.conversation_id:  # the turn started a new one
                self.conversation_id = event.conversation_id
                if self.plan_view is not None:
                    self.plan_view.follow(event.conversation_id)
            self._picked_first(event.conversation_id, turn.user_text)
        if self.plan_view is not None:
            self.plan_view.apply(event)
        if turn.compression is not None and event is turn.compression:
            self.notice.value = notice_html(compression_note(turn.compression), "info")
        self._draw()

    def _after_turn(self, future: Future[list[AgentEvent]]) -> None:
        turn = self.turn_view
        error = None if future.cancelled() else future.exception()
        if turn is not None and error is not None and not turn.message_id:
            # Refused before it started: nothing was written; give the text back.
            turn.fail(error)
            if not self.input.value:
                self.input.value = turn.user_text
            self._archive_turn()
            self.notice.value = notice_html(f"Not sent: {error}", "error")
        elif error is not None:
            self.notice.value = notice_html(f"The view failed to follow the turn: {error}", "error")
        elif turn is not None and turn.status == "cancelled":
            self.notice.value = notice_html("Stopped: the reply was cut short.", "warn")
        elif turn is not None and turn.errors:
            self.notice.value = notice_html("; ".join(turn.errors), "error")
        if turn is not None:  # the messages it added, from its events
            self.history = [*self.history, *turn.messages(self.agent.tools.mask.text)]
        if self.plan_view is not None:
            self.plan_view.ended()
        self._draw()

    def stop(self) -> Future[bool] | None:
        """Ask the conversation's running turn to stop (``agent.cancel``: the one sent here,
        or one started elsewhere in this process); None when no turn is running."""
        if not self.busy:
            self.notice.value = notice_html("No turn is running.", "warn")
            return None
        turn = self.turn_view
        conversation_id = (turn.conversation_id if turn is not None else "") or (
            self.conversation_id
        )
        if not conversation_id:
            self.notice.value = notice_html("The turn is starting; press Stop again.", "warn")
            return None
        self.stopping = then(start_cancel(self.agent, conversation_id), self._after_stop)
        return self.stopping

    def _after_stop(self, future: Future[bool]) -> None:
        error = None if future.cancelled() else future.exception()
        if error is not None:
            self.notice.value = notice_html(f"Stop failed: {error}", "error")
        elif future.result():
            self.notice.value = notice_html("Stop requested.", "info")
        else:
            self.notice.value = notice_html(
                "Nothing to stop: the agent found no running turn it can interrupt here; "
                "this one runs to its end.",
                "warn",
            )
