"""What the chat panel shows, as plain values built from the typed event stream.

The panel is a thin view: :class:`TurnView` folds a turn's events (``session`` first, then
``result``, then — when the memory upkeep after it compressed the history — ``compression``)
into what is on screen (the scenario, the reply so far, the status, an event log, the
messages the turn added), and the ``*_html`` functions render it. Nothing here touches a
widget, so all of it is tested without a kernel. Invariants: the reply shown is exactly the
``agent_output`` pieces joined (or the ``result`` text when a turn streamed none, e.g. a
planner's question); consecutive ``agent_output`` pieces take one log line; tool arguments in
the log are secret-masked; the messages a turn added are the ones the store holds (the user's
text masked as the turn masks it before writing it), so a view never reloads the history to
show them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from html import escape

from agentkit import ConversationMeta, Message
from agentkit.agent import MAX_MESSAGE_LENGTH
from agentkit.events import (
    AgentEvent,
    AgentOutputEvent,
    AskUserEvent,
    CompressionEvent,
    ErrorEvent,
    PermissionEvent,
    PlanEvent,
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
from agentkit.tools import mask_secrets

from lab._html import message_html

__all__ = [
    "NEW_CONVERSATION",
    "SCENARIO_MEANING",
    "TurnView",
    "badge_html",
    "compression_note",
    "conversation_option",
    "conversation_options",
    "describe_event",
    "message_problem",
    "transcript_html",
]

NEW_CONVERSATION = ""
"""The picker's value for "start a new conversation with the next message"."""

SCENARIO_MEANING = {
    "A": "new conversation: system prompt + message",
    "B": "live session: the message only",
    "C": "restored: system prompt + history summary",
}

_CUT = 160
_SHOWN_MESSAGES = 40


def _cut(text: str, limit: int = _CUT) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def message_problem(text: str) -> str:
    """Why *text* cannot be sent ("" when it can): the checks ``send_message`` would make."""
    stripped = text.strip()
    if not stripped:
        return "Type a message first."
    if len(stripped) > MAX_MESSAGE_LENGTH:
        return (
            f"A message has at most {MAX_MESSAGE_LENGTH} characters (this one has {len(stripped)})."
        )
    return ""


def conversation_options(metas: Iterable[ConversationMeta]) -> list[tuple[str, str]]:
    """Picker options: "new conversation" first, then each conversation (most recent first)."""
    options = [("+ new conversation", NEW_CONVERSATION)]
    options.extend(conversation_option(meta.title, meta.conversation_id) for meta in metas)
    return options


def conversation_option(title: str, conversation_id: str) -> tuple[str, str]:
    """A conversation's picker option: its title (cut) and id."""
    return f"{_cut(title, 50)} · {conversation_id}", conversation_id


def describe_event(event: AgentEvent) -> str:  # noqa: PLR0911, PLR0912 - one line per event type
    """One log line for *event* (tool arguments masked, long text cut)."""
    match event:
        case SessionEvent():
            return (
                f"session: scenario {event.scenario} ({SCENARIO_MEANING[event.scenario]}) · "
                f"{event.conversation_id} · {event.message_id} · model {event.model or '?'}"
            )
        case ThinkingEvent():
            return f"thinking: {_cut(event.text)}"
        case AgentOutputEvent():
            return f"agent_output: {_cut(event.text)}"
        case ToolCallEvent():
            arguments = json.dumps(mask_secrets(event.arguments), ensure_ascii=False)
            return f"tool_call: {event.name} {_cut(arguments)}"
        case ToolResultEvent():
            return (
                f"tool_result: {event.name} {'ok' if event.ok else 'FAILED'}: {_cut(event.output)}"
            )
        case PermissionEvent():
            return f"permission: {event.title} → {event.decision}"
        case ErrorEvent():
            return f"error [{event.code}]: {event.message}"
        case CompressionEvent():
            return (
                f"compression: {event.messages_before}→{event.messages_after} messages, "
                f"{event.tokens_before}→{event.tokens_after} tokens"
            )
        case PlanningEvent():
            live = ", ".join(event.live_state) or "none"
            return f"planning (live state refreshed: {live})"
        case PlanEvent():
            repaired = ", after one repair" if event.repaired else ""
            return f"plan: {_cut(event.goal, 80)} ({len(event.steps)} steps{repaired})"
        case StepStartEvent():
            return f"step_start: {event.step_id} {event.step_type} {_cut(event.title, 80)}"
        case StepCompleteEvent():
            return f"step_complete: {event.step_id} {event.status}: {_cut(event.summary, 100)}"
        case ReplanEvent():
            why = event.reason or event.note
            return f"replan: {event.action}" + (f" — {_cut(why, 100)}" if why else "")
        case AskUserEvent():
            return f"ask_user ({event.kind}): {_cut(event.question)}"
        case ResultEvent():
            usage = event.usage
            return (
                f"result: {event.status} in {event.latency_ms:.0f} ms · tokens "
                f"{usage.input_tokens} in / {usage.output_tokens} out"
            )
    return f"{event.type}"  # pragma: no cover - every type is matched above


def compression_note(event: CompressionEvent) -> str:
    """What a ``compression`` event after the reply did, in one line for the user."""
    facts = f", {event.facts_added} facts added" if event.facts_added else ""
    return (
        f"History compressed after the reply: {event.messages_before} → "
        f"{event.messages_after} messages, {event.tokens_before} → {event.tokens_after} "
        f"tokens{facts} (older messages summarised into TaskState)."
    )


@dataclass
class TurnView:
    """The turn in progress, folded from its events."""

    user_text: str
    conversation_id: str = ""
    message_id: str = ""
    scenario: str = ""
    reply: str = ""
    status: str = "running"
    errors: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    #: the turn's ``result`` (its answer as stored), once it came
    result: ResultEvent | None = None
    #: the memory upkeep's compression after the result, if it compressed
    compression: CompressionEvent | None = None
    #: what the turn is doing while no reply has come yet (running a tool, writing the answer)
    doing: str = ""
    _pieces: int = 0

    @property
    def done(self) -> bool:
        """The reply is complete (a ``compression`` event may still follow)."""
        return self.status != "running"

    def apply(self, event: AgentEvent) -> None:
        """Take *event* in."""
        if isinstance(event, AgentOutputEvent):
            self.reply += event.text
            self._pieces += 1
            line = f"agent_output: {self._pieces} pieces, {len(self.reply)} characters"
            if self._pieces > 1 and self.log:
                self.log[-1] = line
            else:
                self.log.append(line)
            return
        self._pieces = 0
        self.log.append(describe_event(event))
        self.doing = _doing(event) or self.doing
        if isinstance(event, SessionEvent):
            self.conversation_id = event.conversation_id
            self.message_id = event.message_id
            self.scenario = event.scenario
        elif isinstance(event, ErrorEvent):
            self.errors.append(f"[{event.code}] {event.message}")
        elif isinstance(event, ResultEvent):
            self.result = event
            self.status = event.status
            self.conversation_id = event.conversation_id
            if not self.reply.strip():
                self.reply = event.text
        elif isinstance(event, CompressionEvent):
            self.compression = event

    def messages(self, mask: Callable[[str], str]) -> list[Message]:
        """The messages the turn added to its conversation, as stored: the user's (its text
        through *mask*, the turn's secret masking) once the turn started, the answer once
        ``result`` carried one (a chat turn that failed keeps its partial reply on screen,
        though the store keeps none)."""
        if not self.message_id:
            return []  # refused before it started: nothing was written
        added = [Message.user(mask(self.user_text.strip()), message_id=self.message_id)]
        result = self.result
        if result is not None and result.text:
            added.append(Message.assistant(mask(result.text), message_id=self.message_id))
        return added

    def fail(self, error: BaseException) -> None:
        """The turn could not run at all (e.g. a busy conversation): record why."""
        self.status = "failed"
        message = str(error) or type(error).__name__
        self.errors.append(message)
        self.log.append(f"not sent: {message}")


def badge_html(scenario: str) -> str:
    """The scenario badge: the letter and what it means ("" before the first turn)."""
    if scenario not in SCENARIO_MEANING:
        return '<span class="agentkit-badge" style="color: #78716c">scenario: -</span>'
    return (
        f'<span class="agentkit-badge agentkit-scenario-{scenario}" title="'
        f'{escape(SCENARIO_MEANING[scenario])}" style="background: #1e3a8a; color: white; '
        f'padding: 2px 8px; border-radius: 10px">scenario {scenario}</span> '
        f"<small>{escape(SCENARIO_MEANING[scenario])}</small>"
    )


def _doing(event: AgentEvent) -> str:
    """What the turn is busy with after *event*, in a few words ("" when it says nothing)."""
    if isinstance(event, PlanningEvent):
        return "planning…"
    if isinstance(event, ToolCallEvent):
        return f"running {event.name}…"
    if isinstance(event, ToolResultEvent):
        return f"{event.name} {'done' if event.ok else 'failed'}; writing the answer…"
    if isinstance(event, StepStartEvent) and event.step_type == "respond":
        return "writing the answer…"
    return ""


def transcript_html(messages: Sequence[Message], turn: TurnView | None = None) -> str:
    """The conversation's recent messages, then the turn in progress (its reply so far)."""
    shown = [m for m in messages if m.role in ("user", "assistant")][-_SHOWN_MESSAGES:]
    parts = [message_html(m.role, m.content) for m in shown]
    turn_stored = turn is not None and any(
        m.message_id == turn.message_id and m.role == "assistant" for m in shown
    )
    if turn is not None and not turn_stored:
        if not any(m.message_id == turn.message_id and m.role == "user" for m in shown):
            parts.append(message_html("user", turn.user_text))
        reply = turn.reply or (turn.doing or "…" if not turn.done else "(no reply)")
        parts.append(message_html("assistant", reply, css_class="agentkit-streaming"))
    if not parts:
        return "<i>No messages yet: type one below.</i>"
    return '<div class="agentkit-transcript">' + "".join(parts) + "</div>"
