"""One ``session/prompt``: agentkit turns streamed as session updates, consent in between.

A prompt is one or more agentkit turns on the same conversation, through the public
:class:`~agentkit.agent.Agent` API only:

1. ``agent.send_message(conversation, text)``; every event becomes an update
   (:mod:`agentkit.acp_server.updates`); after each plan event the plan is re-read from the
   conversation's ExecutionState, so every entry's status is the stored one (steps finished
   while resuming emit no event of their own).
2. If the turn paused for consent (an ``ask_user`` event of kind ``confirmation``), the
   pending step is shown as a tool call and the client is asked with
   ``session/request_permission``. Allow → the next turn is a decision that approves the
   pending approval by its id (``agent.adecide``, source ``acp``: the planner reads the typed
   decision, never a "yes"; the tool runs, exactly once, and the plan goes on inside this same
   prompt); reject → a decision that rejects it (it never runs). No answer (an error, a
   ``cancelled`` outcome, an unknown option, ``session/cancel``) → nothing runs and the
   question stays pending, shown as the agent's message, so the user can still answer it in
   the chat.
3. A question (``ask_user``) ends the prompt with ``end_turn`` and the question as the agent's
   message; the next prompt is its answer.

``session/cancel`` calls ``agent.cancel`` (again on the next event if the turn had not
registered yet); the prompt then ends with ``cancelled`` and agentkit keeps the partial reply.
The turn runs in its own task, so a client that goes away mid-turn does not cut a write in
half: updates that can no longer be sent are dropped and the turn goes on to its end.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Final, Literal, cast

import acp
from acp.interfaces import Client
from acp.schema import AllowedOutcome, PermissionOption, StopReason, ToolCallUpdate, ToolKind
from pydantic import ValidationError

from agentkit.acp_server.updates import (
    SessionUpdate,
    agent_text,
    consent_call,
    consent_done,
    plan_entries,
    plan_update,
    thought,
    tool_finished,
    tool_started,
)
from agentkit.agent import Agent
from agentkit.calls.secrets import mask_secrets
from agentkit.errors import AgentkitError
from agentkit.events import (
    AgentEvent,
    AgentOutputEvent,
    AskUserEvent,
    CompressionEvent,
    ErrorEvent,
    PermissionEvent,
    PlanEvent,
    ReplanEvent,
    ResultEvent,
    SessionEvent,
    StepCompleteEvent,
    StepStartEvent,
    ThinkingEvent,
    ToolCallEvent,
    ToolResultEvent,
)

__all__ = ["PromptTurn"]

log = logging.getLogger("agentkit.acp")

#: consent round trips one prompt may take before it stops and leaves the question pending
MAX_CONSENTS: Final = 16
ALLOW: Final = "allow"
REJECT: Final = "reject"
_PLAN_EVENTS: Final = (PlanEvent, StepStartEvent, StepCompleteEvent, ReplanEvent, AskUserEvent)
_OPTIONS: Final = [
    PermissionOption(option_id=ALLOW, name="Allow", kind="allow_once"),
    PermissionOption(option_id=REJECT, name="Reject", kind="reject_once"),
]


@dataclass
class _Outcome:
    """What one agentkit turn left behind."""

    result: ResultEvent | None = None
    consent: AskUserEvent | None = None
    streamed: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _shown(event: AgentEvent) -> SessionUpdate | None:
    """The update that shows a text-like event to the user, if it has one."""
    if isinstance(event, AgentOutputEvent):
        return agent_text(event.text)
    if isinstance(event, ThinkingEvent):
        return thought(event.text)
    if isinstance(event, PermissionEvent):
        return thought(f"(the model asked to run {event.title}: {event.decision})")
    if isinstance(event, CompressionEvent):
        before, after = event.messages_before, event.messages_after
        return thought(f"(history compressed: {before} → {after} messages)")
    return None


class PromptTurn:
    """The agentkit turns of one prompt, and their cancellation."""

    def __init__(self, agent: Agent, client: Client, session_id: str, text: str) -> None:
        self.agent = agent
        self.client = client
        self.session_id = session_id
        self.text = text
        self.turns: list[dict[str, Any]] = []  # per agentkit turn: messageId, scenario, status
        self.client_gone = False
        self._cancelled = asyncio.Event()
        self._cancel_delivered = False
        self._planner = agent.config.engine == "planner"
        self._plan_sent: list[Any] | None = None
        self._consent_step = ""  # the step a permission was asked for, and its tool call id
        self._consent_call = ""
        self.task: asyncio.Task[StopReason] | None = None

    # -- control ---------------------------------------------------------------------------

    async def cancel(self) -> None:
        """``session/cancel``: stop the running agentkit turn at its next safe point."""
        self._cancelled.set()
        await self._deliver_cancel()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    async def _deliver_cancel(self) -> None:
        if self._cancel_delivered:
            return
        try:
            self._cancel_delivered = await self.agent.cancel(self.session_id)
        except AgentkitError as error:
            log.warning("cancel of %s failed: %s", self.session_id, error)

    async def start(self) -> None:
        """Run the first agentkit turn up to its first event; errors before it (busy,
        unknown, invalid) propagate, so the prompt is refused with nothing written."""
        stream = self.agent.send_message(self.session_id, self.text)
        first = await anext(aiter(stream))
        self.task = asyncio.create_task(self._run(stream, first), name="acp prompt")

    # -- the prompt ------------------------------------------------------------------------

    async def _run(self, stream: AsyncIterator[AgentEvent], first: AgentEvent) -> StopReason:
        outcome = await self._consume(stream, first)
        for _ in range(MAX_CONSENTS):
            if self.cancelled or (outcome.result and outcome.result.status == "cancelled"):
                return "cancelled"
            consent = outcome.consent
            if consent is None:
                return "end_turn"
            # a consent is decided by its approval's id (a pause without one, older than
            # approval ids, is answered in the chat)
            answer = await self._ask_permission(outcome) if consent.approval_id else None
            if answer is None:
                await self._show_question(outcome)
                return "cancelled" if self.cancelled else "end_turn"
            decision: Literal["approve", "reject"] = "approve" if answer == ALLOW else "reject"
            outcome = await self._follow_up(consent.approval_id, decision)
            await self._close_consent("Not run.")  # still open: the allowed tool never ran
        if outcome.consent is not None:
            await self._show_question(outcome)
        return "cancelled" if self.cancelled else "end_turn"

    async def _follow_up(
        self, approval_id: str, decision: Literal["approve", "reject"]
    ) -> _Outcome:
        """The turn that carries the client's permission answer to the planner: a decision
        on the pending approval by its id (the same path as Python's and HTTP's)."""
        stream = self.agent.adecide(self.session_id, approval_id, decision, source="acp")
        try:
            first = await anext(aiter(stream))
        except (AgentkitError, StopAsyncIteration) as error:
            await self._notify(agent_text(f"\n\nThe answer could not be delivered: {error}"))
            return _Outcome()
        return await self._consume(stream, first)

    async def _consume(self, events: AsyncIterator[AgentEvent], first: AgentEvent) -> _Outcome:
        """Show every event of one agentkit turn; always let the turn run to its end."""
        outcome = _Outcome()
        self._cancel_delivered = False
        stream = cast("AsyncGenerator[AgentEvent, None]", events)  # send_message's generator
        async with contextlib.aclosing(stream):
            try:
                await self._handle(first, outcome)
                async for event in stream:
                    await self._handle(event, outcome)
            except Exception as error:  # the turn itself raised: it is over
                log.exception("turn of %s stopped", self.session_id)
                outcome.errors.append(f"the turn stopped: {type(error).__name__}: {error}")
        await self._finish(outcome)
        return outcome

    async def _handle(self, event: AgentEvent, outcome: _Outcome) -> None:
        """One event; a failure to show it is logged, never allowed to cut the turn short
        (the turn holds the conversation until it ends)."""
        try:
            await self._on_event(event, outcome)
        except Exception:
            log.exception("could not show a %s event of %s", event.type, self.session_id)

    async def _on_event(self, event: AgentEvent, outcome: _Outcome) -> None:
        if self.cancelled and not self._cancel_delivered:
            await self._deliver_cancel()
        self._record(event, outcome)
        if isinstance(event, ToolCallEvent):
            await self._tool_call(event)
        elif isinstance(event, ToolResultEvent):
            await self._notify(tool_finished(self._call_id(event.id), event))
            if event.id == self._consent_step:  # done: a later step may reuse the id
                self._consent_step = self._consent_call = ""
        else:
            update = _shown(event)
            if update is not None:
                await self._notify(update)
        if isinstance(event, _PLAN_EVENTS):
            await self._send_plan()

    def _record(self, event: AgentEvent, outcome: _Outcome) -> None:
        """Note what the end of the turn needs: its reply, errors, consent, result."""
        if isinstance(event, SessionEvent):
            turn = {"messageId": event.message_id, "scenario": event.scenario}
            self.turns.append({**turn, "injected": event.injected})
        elif isinstance(event, AgentOutputEvent):
            outcome.streamed.append(event.text)
        elif isinstance(event, ErrorEvent) and event.code != "cancelled":
            outcome.errors.append(event.message)
        elif isinstance(event, AskUserEvent) and event.kind == "confirmation":
            outcome.consent = event
        elif isinstance(event, ResultEvent):
            outcome.result = event
            if self.turns:
                self.turns[-1]["status"] = event.status

    async def _finish(self, outcome: _Outcome) -> None:
        """Make sure the user sees the turn's answer and any failure."""
        result = outcome.result
        said = "".join(outcome.streamed)
        if result is not None and result.text and not said and outcome.consent is None:
            said = result.text
            await self._notify(agent_text(said))
        failed = result is None or result.status == "failed"
        for problem in outcome.errors if failed else ():
            if problem not in said:
                await self._notify(agent_text(f"\n\n⚠ {problem}"))
        await self._send_plan()

    # -- tool calls and consent ------------------------------------------------------------

    def _call_id(self, event_id: str) -> str:
        if self._consent_step and event_id == self._consent_step:
            return self._consent_call
        message_id = self.turns[-1]["messageId"] if self.turns else "turn"
        return f"{message_id}-{event_id}"

    async def _tool_call(self, event: ToolCallEvent) -> None:
        call_id = self._call_id(event.id)
        if call_id == self._consent_call:  # the call the user just allowed
            await self._notify(acp.update_tool_call(call_id, status="in_progress"))
            return
        kind: ToolKind = "read" if self._planner else "other"  # planner: side effects ask first
        await self._notify(tool_started(call_id, event, kind))

    async def _ask_permission(self, outcome: _Outcome) -> str | None:
        """Show the pending step and ask the client; the chosen option id, or None."""
        consent = outcome.consent
        assert consent is not None
        try:
            state = self.agent.execution_state(self.session_id)
        except AgentkitError as error:
            log.warning("no execution state for consent: %s", error)
            return None
        if state is None or state.value.status != "waiting_confirmation":
            return None
        step_id = state.value.current_step_id
        message_id = self.turns[-1]["messageId"] if self.turns else "turn"
        self._consent_step, self._consent_call = step_id, f"{message_id}-{step_id}"
        args = mask_secrets(dict(consent.tool_args))
        shown = args if isinstance(args, dict) else {}
        await self._notify(
            consent_call(self._consent_call, consent.tool_name, shown, consent.question)
        )
        answer = await self._permission(consent.tool_name, shown)
        if answer != ALLOW:
            await self._close_consent("Rejected: not run." if answer == REJECT else "Not run.")
        return answer

    async def _close_consent(self, note: str) -> None:
        """End the consent tool call without its tool having run."""
        if self._consent_call:
            await self._notify(consent_done(self._consent_call, note))
        self._consent_step = self._consent_call = ""

    async def _permission(self, title: str, args: dict[str, Any]) -> str | None:
        if self.client_gone:
            return None
        request = asyncio.ensure_future(
            self.client.request_permission(
                session_id=self.session_id,
                tool_call=ToolCallUpdate(
                    tool_call_id=self._consent_call,
                    title=title,
                    kind="edit",
                    status="pending",
                    raw_input=args,
                ),
                options=_OPTIONS,
            )
        )
        cancelled = asyncio.ensure_future(self._cancelled.wait())
        try:
            await asyncio.wait({request, cancelled}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            cancelled.cancel()
        if not request.done():
            request.cancel()
            return None
        try:
            response = request.result()
        except (acp.RequestError, ConnectionError, ValidationError, asyncio.CancelledError) as e:
            log.warning("permission request of %s got no answer: %s", self.session_id, e)
            return None
        outcome = response.outcome
        if isinstance(outcome, AllowedOutcome) and outcome.option_id in (ALLOW, REJECT):
            return outcome.option_id
        return None

    async def _show_question(self, outcome: _Outcome) -> None:
        if outcome.consent is not None:
            await self._notify(agent_text(outcome.consent.question))

    # -- updates ---------------------------------------------------------------------------

    async def _send_plan(self) -> None:
        if not self._planner:
            return
        try:
            state = self.agent.execution_state(self.session_id)
        except AgentkitError as error:
            log.warning("plan of %s unreadable: %s", self.session_id, error)
            return
        if state is None:
            return
        entries = plan_entries(state.value)
        if entries and entries != self._plan_sent:
            self._plan_sent = entries
            await self._notify(plan_update(entries))

    async def _notify(self, update: SessionUpdate) -> None:
        if self.client_gone:
            return
        try:
            await self.client.session_update(session_id=self.session_id, update=update)
        except (ConnectionError, OSError) as error:
            self.client_gone = True
            log.warning("client gone; %s goes on without updates: %s", self.session_id, error)

    def meta(self) -> dict[str, Any]:
        """What the prompt response carries in ``_meta``: each agentkit turn's message id,
        scenario (A/B/C) and status."""
        return {"agentkit": {"conversationId": self.session_id, "turns": self.turns}}
