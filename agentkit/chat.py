"""The chat engine: one turn of a conversation with the seed's three context scenarios.

    A  new conversation, no history      → system prompt + the message
    B  a live session in the pool         → the message only (the session holds the context)
    C  no live session, history exists    → system prompt + a summary of the last ≤ 20
                                            messages + the message (restart, idle, crash);
                                            for a chat model the summary is part of the
                                            system message; or a resumed backend session

Order of a turn, so that nothing acknowledged is lost: the user message is persisted first;
the ``session`` event reports the scenario and what was injected (also written to the turn's
messages.log); the reply streams as ``agent_output`` events; the assistant message, its tool
calls and token usage are persisted; ``result`` ends the turn. A backend failure becomes an
``error`` event and status ``failed``, never an exception out of the stream.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from agentkit.errors import ModelError
from agentkit.events import (
    AgentEvent,
    AgentOutputEvent,
    ErrorEvent,
    PermissionEvent,
    ResultEvent,
    Scenario,
    SessionEvent,
    ThinkingEvent,
    ToolCallEvent,
)
from agentkit.models.base import (
    ChatModel,
    Completion,
    ModelEvent,
    PermissionRequest,
    SessionBackend,
    SessionModel,
    TextDelta,
    ThinkingDelta,
    ToolCallRequest,
)
from agentkit.planning.approvals import Decision
from agentkit.sessions import PoolEntry, SessionPool, TranscriptSession, summarize_history
from agentkit.sessions.context import HISTORY_LIMIT
from agentkit.store import ConversationKey, ConversationStore
from agentkit.telemetry import Telemetry, TurnTrace, provider_name
from agentkit.types import ConversationStatus, Message, ToolCallRecord, Usage

if TYPE_CHECKING:
    from agentkit.engine import AgentRuntime

__all__ = ["ChatEngine", "ChatTurn"]

TurnStatus = Literal["completed", "failed", "cancelled"]


@dataclass
class _Reply:
    """What the reply has brought so far."""

    pieces: list[str] = field(default_factory=list)
    calls: list[ToolCallRecord] = field(default_factory=list)
    final: Completion | None = None

    @property
    def text(self) -> str:
        return self.final.text if self.final and self.final.text else "".join(self.pieces)

    def take(self, event: ModelEvent) -> AgentEvent | None:
        """Record a model event; return the agent event it becomes, if any."""
        match event:
            case TextDelta(text=text):
                self.pieces.append(text)
                return AgentOutputEvent(text=text)
            case ThinkingDelta(text=text):
                return ThinkingEvent(text=text)
            case ToolCallRequest(id=call_id, name=name, arguments=arguments):
                self.calls.append(ToolCallRecord(id=call_id, name=name, arguments=arguments))
                return ToolCallEvent(id=call_id, name=name, arguments=arguments)
            case PermissionRequest():
                return PermissionEvent(
                    tool_call_id=event.tool_call_id,
                    title=event.title,
                    options=list(event.options),
                    decision=event.decision,
                )
            case Completion():
                self.final = event
        return None


async def _stopped_before_sending() -> AsyncIterator[ModelEvent]:
    yield Completion(text="", stop_reason="cancelled")


@dataclass
class ChatTurn:
    """Everything one chat turn needs; :meth:`run` streams its events."""

    key: ConversationKey
    text: str
    store: ConversationStore
    pool: SessionPool
    model: ChatModel | SessionBackend
    system_prompt: str
    workdir: Path
    max_messages: int = 40
    #: with telemetry the turn is a trace: ``invoke_agent`` and its model call
    telemetry: Telemetry | None = None

    def __post_init__(self) -> None:
        self._started = time.perf_counter()
        self._message_id = ""
        self._trace: TurnTrace | None = None
        self._why_c = ""  # why a conversation with a live session is scenario C

    async def _open(self, scenario: Scenario) -> SessionModel:
        if isinstance(self.model, ChatModel):
            return TranscriptSession(self.model, self.system_prompt, max_messages=self.max_messages)
        resume_id = None
        if scenario == "C":
            resume_id = self.pool.resume_id(self.key.agent_id, self.key.conversation_id)
        return await self.model.open(
            system_prompt=self.system_prompt, workdir=self.workdir, resume_id=resume_id
        )

    def _session_event(self, scenario: Scenario, injected: str, summarised: int) -> SessionEvent:
        return SessionEvent(
            agent_id=self.key.agent_id,
            conversation_id=self.key.conversation_id,
            message_id=self._message_id,
            scenario=scenario,
            injected=injected,
            history_messages=summarised,
            model=self.model.spec,
        )

    def _result(self, status: TurnStatus, text: str, usage: Usage) -> ResultEvent:
        trace = self._trace
        if trace is not None:
            error = None if status != "failed" else "model_error"
            trace.end(
                status,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                error_type=error,
            )
        return ResultEvent(
            conversation_id=self.key.conversation_id,
            message_id=self._message_id,
            status=status,
            text=text,
            usage=usage,
            latency_ms=round((time.perf_counter() - self._started) * 1000, 3),
            trace_id=trace.trace_id if trace is not None else "",
        )

    async def run(self) -> AsyncIterator[AgentEvent]:
        agent_id, conversation_id = self.key.agent_id, self.key.conversation_id
        entry = await self._live_entry()
        history = [] if entry is not None else self.store.recent(self.key, HISTORY_LIMIT)
        scenario: Scenario = "B" if entry is not None else ("C" if history else "A")

        question = Message.user(self.text)
        self._message_id = question.message_id
        self.store.append(self.key, question, status="running")  # durable before the model
        self._trace = self._start_trace(scenario)

        if entry is None:
            try:
                entry = await self.pool.put(agent_id, conversation_id, await self._open(scenario))
            except ModelError as error:
                yield self._session_event(scenario, "nothing: no session could be opened", 0)
                async for event in self._fail(error, _Reply()):
                    yield event
                return
        session = entry.session
        stopped = await self._stop_with(session)
        prompt, injected, summarised = self._prompt(scenario, session, history)
        note = f"scenario {scenario}: {injected}"
        self.store.annotate(self.key, self._message_id, "SESSION", note)
        yield self._session_event(scenario, injected, summarised)

        reply = _Reply()
        # a cancel that came before the session was known ends the turn before it is sent
        events = _stopped_before_sending() if stopped else self._traced(session.send(prompt))
        try:
            async for model_event in events:
                agent_event = reply.take(model_event)
                if agent_event is not None:
                    yield agent_event
        except ModelError as error:
            await self.pool.drop(agent_id, conversation_id)
            async for event in self._fail(error, reply):
                yield event
            return
        except asyncio.CancelledError:
            await session.cancel()
            self._persist_reply(reply, Usage(), "idle")
            raise
        except Exception as error:  # the turn boundary: a backend bug must not leave "running"
            await self.pool.drop(agent_id, conversation_id)
            detail = f"{type(error).__name__}: {error}"
            self.store.annotate(self.key, self._message_id, "ERROR", f"backend crashed: {detail}")
            crashed = ModelError(
                self.model.spec,
                f"the model backend failed unexpectedly ({type(error).__name__}); "
                "the details are in the turn log",
            )
            async for event in self._fail(crashed, reply):
                yield event
            return
        if reply.final is None:
            missing = ModelError(self.model.spec, "the reply ended without a result")
            async for event in self._fail(missing, reply):
                yield event
            return
        entry.message_count += 1
        cancelled = reply.final.stop_reason == "cancelled"
        self._persist_reply(reply, reply.final.usage, "idle" if cancelled else "completed")
        yield self._result("cancelled" if cancelled else "completed", reply.text, reply.final.usage)

    def _start_trace(self, scenario: Scenario) -> TurnTrace | None:
        if self.telemetry is None:
            return None
        return self.telemetry.turn(
            conversation_id=self.key.conversation_id,
            message_id=self._message_id,
            scenario=scenario,
            provider=provider_name(self.model.spec),
            model=self.model.spec,
        )

    async def _traced(self, events: AsyncIterator[ModelEvent]) -> AsyncIterator[ModelEvent]:
        """The session's reply, as the span of the turn's one model call when traced."""
        trace = self._trace
        if trace is None:
            async for event in events:
                yield event
            return
        span = trace.model_call(None, model=self.model.spec, purpose="chat", stream=True)
        with span:  # a failure (raised on) sets error.type and ends it
            async for event in events:
                if isinstance(event, Completion):
                    span.usage(event.usage.input_tokens, event.usage.output_tokens)
                    span.finish_reasons([event.stop_reason])
                yield event

    async def _stop_with(self, session: SessionModel) -> bool:
        """A cancel of this turn (``Agent.cancel``) stops the session's reply from now on;
        True when one was asked for already."""
        running = self.pool.turns.running(self.key.agent_id, self.key.conversation_id)
        if running is None:
            return False
        await running.on_cancel(session.cancel)
        return running.cancel_requested

    def _prompt(
        self, scenario: Scenario, session: SessionModel, history: list[Message]
    ) -> tuple[str, str, int]:
        """The text to send, what it injects besides the message, how many messages summarised."""
        if scenario == "A":
            return self.text, "system prompt", 0
        if scenario == "B":
            return self.text, "nothing (live session)", 0
        if session.resumed:
            return self.text, f"resumed backend session {session.session_id}{self._why_c}", 0
        injected = f"system prompt + summary of the last {len(history)} messages{self._why_c}"
        if isinstance(session, TranscriptSession):  # a chat model: the summary in its system
            session.restore(summarize_history(history, closing=False))
            return self.text, injected, len(history)
        return f"{summarize_history(history)}\n\n{self.text}", injected, len(history)

    async def _live_entry(self) -> PoolEntry | None:
        """The conversation's live session, if it is current: one that has not seen every
        message (written since its last turn by another process sharing the store, e.g. a
        replica) is closed, and the turn is scenario C. Read under the writer lock; the
        history is append-only, so the count tells."""
        agent_id, conversation_id = self.key.agent_id, self.key.conversation_id
        entry = await self.pool.get(agent_id, conversation_id)
        if entry is None or entry.store_messages is None:
            return entry
        stored = self.store.meta(self.key).stats.message_count
        if stored == entry.store_messages:
            return entry
        missed = max(1, stored - entry.store_messages)
        self._why_c = f" (the live session here missed {missed} messages written elsewhere)"
        await self.pool.drop(agent_id, conversation_id)
        return None

    def _persist_reply(self, reply: _Reply, usage: Usage, status: ConversationStatus) -> None:
        if reply.text or reply.calls:  # the reply and the final status: one durable commit
            answer = Message.assistant(
                reply.text, message_id=self._message_id, tool_calls=tuple(reply.calls), usage=usage
            )
            meta = self.store.append(self.key, answer, status=status)
        else:
            meta = self.store.set_status(self.key, status)
        entry = self.pool.peek(self.key.agent_id, self.key.conversation_id)
        if entry is not None:  # what the session has seen, for the next turn's check
            entry.store_messages = meta.stats.message_count

    async def _fail(self, error: ModelError, reply: _Reply) -> AsyncIterator[AgentEvent]:
        yield ErrorEvent(message=str(error), code="model_error", retryable=error.retryable)
        partial = "".join(reply.pieces)
        note = f"{error}\n(partial reply: {partial})" if partial else str(error)
        self.store.annotate(self.key, self._message_id, "ERROR", note)
        self.store.set_status(self.key, "failed")
        yield self._result("failed", partial, Usage())


class ChatEngine:
    """Engine ``chat`` (:class:`agentkit.engine.Engine`): the conversation goes to the agent's
    model as a session from the pool, with the seed's three context scenarios."""

    writes_checkpoints = False

    async def run_turn(
        self,
        runtime: AgentRuntime,
        key: ConversationKey,
        text: str,
        decision: Decision | None = None,
    ) -> AsyncIterator[AgentEvent]:
        turn = ChatTurn(
            key=key,
            text=text,
            store=runtime.store,
            pool=runtime.pool,
            model=runtime.model,
            system_prompt=runtime.system_prompt(),
            workdir=runtime.folder.files.workspace,
            max_messages=2 * runtime.config.max_turns,
            telemetry=runtime.telemetry,
        )
        async for event in turn.run():
            yield event
