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
calls, token usage and the turn's checkpoint are persisted in one commit (the one every engine
ends with: :meth:`~agentkit.planning.state.TurnContext.commit`); ``result`` ends the turn. A
backend failure becomes an ``error`` event and status ``failed``, never an exception out of
the stream. The model call is made through the call tracer, as a planner turn's are
(:mod:`agentkit.calls.tracer`): a trace record in the turn's ``calls.jsonl`` and a
``chat {model}`` span under the turn's ``invoke_agent``.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from agentkit.calls.errors import TurnCancelledError
from agentkit.calls.secrets import StreamMask
from agentkit.calls.tracer import CallTracer
from agentkit.errors import ModelError, StoreError
from agentkit.events import (
    AgentEvent,
    AgentOutputEvent,
    ErrorEvent,
    PermissionEvent,
    Scenario,
    SessionEvent,
    ThinkingEvent,
    ToolCallEvent,
)
from agentkit.models.base import (
    ChatMessage,
    ChatModel,
    Completion,
    ModelEvent,
    PermissionRequest,
    SessionModel,
    TextDelta,
    ThinkingDelta,
    ToolCallRequest,
)
from agentkit.planning.state import TurnContext, TurnStatus
from agentkit.sessions import PoolEntry, SessionPool, TranscriptSession, summarize_history
from agentkit.sessions.context import HISTORY_LIMIT
from agentkit.store import off_loop
from agentkit.telemetry import TurnTrace
from agentkit.tools import SecretMask
from agentkit.types import Message, ToolCallRecord, Usage

__all__ = ["ChatEngine"]


@dataclass
class _Reply:
    """What the reply has brought so far."""

    mask: SecretMask
    pieces: list[str] = field(default_factory=list)
    calls: list[ToolCallRecord] = field(default_factory=list)
    final: Completion | None = None
    stream: StreamMask | None = None

    def __post_init__(self) -> None:
        self.stream = self.mask.stream()

    @property
    def text(self) -> str:
        if self.final is not None and self.final.text:
            return self.mask.text(self.final.text)
        return "".join(self.pieces)

    def flush(self) -> AgentEvent | None:
        """What the masker still holds, once the reply has ended."""
        assert self.stream is not None
        rest = self.stream.flush()
        if not rest:
            return None
        self.pieces.append(rest)
        return AgentOutputEvent(text=rest)

    def take(self, event: ModelEvent) -> AgentEvent | None:
        """Record a model event; return the agent event it becomes, if any (secrets masked)."""
        assert self.stream is not None
        match event:
            case TextDelta(text=text):
                shown = self.stream.feed(text)
                if not shown:
                    return None
                self.pieces.append(shown)
                return AgentOutputEvent(text=shown)
            case ThinkingDelta(text=text):
                return ThinkingEvent(text=text)
            case ToolCallRequest(id=call_id, name=name, arguments=arguments):
                masked = self.mask.json(dict(arguments))
                args = masked if isinstance(masked, dict) else {}
                self.calls.append(ToolCallRecord(id=call_id, name=name, arguments=args))
                return ToolCallEvent(id=call_id, name=name, arguments=args)
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


@dataclass
class _ChatTurn:
    """One chat turn over its context: the scenario, the session, the call, the commit."""

    ctx: TurnContext
    trace: TurnTrace | None = None
    why_c: str = ""  # why a conversation with a live session is scenario C

    @property
    def pool(self) -> SessionPool:
        assert self.ctx.pool is not None
        return self.ctx.pool

    async def run(self) -> AsyncIterator[AgentEvent]:
        ctx = self.ctx
        entry = await self._live_entry()
        history = [] if entry is not None else await ctx.store.arecent(ctx.key, HISTORY_LIMIT)
        scenario: Scenario = "B" if entry is not None else ("C" if history else "A")
        # durable before the model (in a store thread: other turns go on meanwhile)
        await ctx.store.aappend(ctx.key, ctx.question, status="running")
        self.trace = ctx.start_trace(scenario)
        tracer = CallTracer.of(ctx, self.trace)
        try:
            async for event in self._turn(entry, history, scenario, tracer):
                yield event
        finally:
            tracer.close()

    async def _turn(
        self,
        entry: PoolEntry | None,
        history: list[Message],
        scenario: Scenario,
        tracer: CallTracer,
    ) -> AsyncIterator[AgentEvent]:
        ctx = self.ctx
        key = ctx.key
        reply = _Reply(ctx.mask)
        if entry is None:
            try:
                opened = await self._open(scenario)
            except ModelError as error:
                yield self._session_event(scenario, "nothing: no session could be opened", 0)
                async for event in self._fail(error, reply, tracer):
                    yield event
                return
            entry = await self.pool.put(key.agent_id, key.conversation_id, opened)
        session = entry.session
        stopped = await self._stop_with(session)
        prompt, injected, summarised = self._prompt(scenario, session, history)
        ctx.store.annotate(key, ctx.message_id, "SESSION", f"scenario {scenario}: {injected}")
        yield self._session_event(scenario, injected, summarised)
        try:
            async for event in self._reply(session, prompt, reply, tracer, stopped):
                yield event
        except ModelError as error:
            await self.pool.drop(key.agent_id, key.conversation_id)
            async for event in self._fail(error, reply, tracer):
                yield event
            return
        except asyncio.CancelledError:
            await session.cancel()
            await self._commit(reply, tracer.usage, "cancelled")
            raise
        except StoreError:  # the store went away (writing the call's trace): its error, not
            raise  # the model's (the edge says so: HTTP 503 / store_unavailable)
        except Exception as error:  # the turn boundary: a backend bug must not leave "running"
            await self.pool.drop(key.agent_id, key.conversation_id)
            ctx.note("ERROR", f"backend crashed: {type(error).__name__}: {error}")
            crashed = ModelError(
                ctx.model.spec,
                f"the model backend failed unexpectedly ({type(error).__name__}); "
                "the details are in the turn log",
            )
            async for event in self._fail(crashed, reply, tracer):
                yield event
            return
        if reply.final is None:
            missing = ModelError(ctx.model.spec, "the reply ended without a result")
            async for event in self._fail(missing, reply, tracer):
                yield event
            return
        entry.message_count += 1
        status: TurnStatus = "cancelled" if reply.final.stop_reason == "cancelled" else "completed"
        await self._commit(reply, tracer.usage, status)
        yield ctx.result(status, reply.text, tracer.usage, self.trace)

    async def _reply(
        self,
        session: SessionModel,
        prompt: str,
        reply: _Reply,
        tracer: CallTracer,
        stopped: bool,
    ) -> AsyncIterator[AgentEvent]:
        """The one model call: *prompt* to *session*, its events as the turn's (masked)."""
        if stopped:  # a cancel that came before the session was known: nothing is sent
            reply.final = Completion(text="", stop_reason="cancelled")
            return
        interruptible = isinstance(session, TranscriptSession)
        sent = self._sent(session, prompt)
        async with tracer.session(session, prompt, sent, interruptible) as call:
            try:
                async for model_event in call.stream():
                    agent_event = reply.take(model_event)
                    if agent_event is not None:
                        yield agent_event
            except TurnCancelledError:  # stopped: what was said so far is kept
                await session.cancel()
                reply.final = Completion(text="", stop_reason="cancelled")
            rest = reply.flush()
            if rest is not None:
                yield rest
            call.read(raw=reply.text, parsed=reply.text)

    async def _stop_with(self, session: SessionModel) -> bool:
        """A cancel of this turn (``Agent.cancel``) stops the session's reply — and a wait
        for the model's next piece — from now on; True when one was asked for already."""
        running = self.ctx.running
        if running is None:
            return self.ctx.cancel_scope.requested
        scope = self.ctx.cancel_scope

        async def stop() -> None:
            await session.cancel()
            scope.cancel()

        await running.on_cancel(stop)
        return running.cancel_requested

    async def _open(self, scenario: Scenario) -> SessionModel:
        ctx = self.ctx
        if isinstance(ctx.model, ChatModel):
            return TranscriptSession(ctx.model, ctx.system_prompt, max_messages=2 * ctx.max_turns)
        resume_id = None
        if scenario == "C":
            resume_id = self.pool.resume_id(ctx.key.agent_id, ctx.key.conversation_id)
        assert ctx.workdir is not None, "a session backend runs in the agent's workspace"
        return await ctx.model.open(
            system_prompt=ctx.system_prompt, workdir=ctx.workdir, resume_id=resume_id
        )

    @staticmethod
    def _sent(session: SessionModel, prompt: str) -> list[ChatMessage]:
        """What the model is sent for *prompt*, for the record: a chat model's whole context,
        a session backend's new message."""
        if isinstance(session, TranscriptSession):
            return session.context(prompt)
        return [ChatMessage(role="user", content=prompt)]

    def _session_event(self, scenario: Scenario, injected: str, summarised: int) -> SessionEvent:
        ctx = self.ctx
        return SessionEvent(
            agent_id=ctx.key.agent_id,
            conversation_id=ctx.key.conversation_id,
            message_id=ctx.message_id,
            scenario=scenario,
            injected=injected,
            history_messages=summarised,
            model=ctx.model.spec,
        )

    def _prompt(
        self, scenario: Scenario, session: SessionModel, history: list[Message]
    ) -> tuple[str, str, int]:
        """The text to send, what it injects besides the message, how many messages summarised."""
        text = self.ctx.text
        if scenario == "A":
            return text, "system prompt", 0
        if scenario == "B":
            return text, "nothing (live session)", 0
        if session.resumed:
            return text, f"resumed backend session {session.session_id}{self.why_c}", 0
        injected = f"system prompt + summary of the last {len(history)} messages{self.why_c}"
        if isinstance(session, TranscriptSession):  # a chat model: the summary in its system
            session.restore(summarize_history(history, closing=False))
            return text, injected, len(history)
        return f"{summarize_history(history)}\n\n{text}", injected, len(history)

    async def _live_entry(self) -> PoolEntry | None:
        """The conversation's live session, if it is current: one that has not seen every
        message (written since its last turn by another process sharing the store, e.g. a
        replica) is closed, and the turn is scenario C. Read under the writer lock; the
        history is append-only, so the count tells."""
        key = self.ctx.key
        entry = await self.pool.get(key.agent_id, key.conversation_id)
        if entry is None or entry.store_messages is None:
            return entry
        stored = self.ctx.store.meta(key).stats.message_count
        if stored == entry.store_messages:
            return entry
        missed = max(1, stored - entry.store_messages)
        self.why_c = f" (the live session here missed {missed} messages written elsewhere)"
        await self.pool.drop(key.agent_id, key.conversation_id)
        return None

    async def _commit(self, reply: _Reply, usage: Usage, status: TurnStatus) -> None:
        """The reply, the final status and the turn's checkpoint: the turn's one commit
        (:meth:`TurnContext.commit`, in a store thread)."""
        ctx = self.ctx
        key = ctx.key
        _, meta = await off_loop(
            ctx.commit, reply.text, status, usage=usage, tool_calls=tuple(reply.calls)
        )
        entry = self.pool.peek(key.agent_id, key.conversation_id)
        if entry is not None:  # what the session has seen, for the next turn's check
            entry.store_messages = meta.stats.message_count

    async def _fail(
        self, error: ModelError, reply: _Reply, tracer: CallTracer
    ) -> AsyncIterator[AgentEvent]:
        yield ErrorEvent(
            message=self.ctx.scrub(str(error)), code="model_error", retryable=error.retryable
        )
        partial = "".join(reply.pieces)
        note = f"{error}\n(partial reply: {partial})" if partial else str(error)
        self.ctx.note("ERROR", note)
        await off_loop(self.ctx.commit, "", "failed", usage=tracer.usage)  # nothing kept
        yield self.ctx.result("failed", partial, tracer.usage, self.trace, "model_error")


class ChatEngine:
    """Engine ``chat`` (:class:`agentkit.runtime.Engine`): the conversation goes to the agent's
    model as a session from the pool, with the seed's three context scenarios."""

    def run_turn(self, ctx: TurnContext) -> AsyncIterator[AgentEvent]:
        if ctx.pool is None:  # a turn no Agent runs: a pool of its own
            ctx = dataclasses.replace(ctx, pool=SessionPool())
        return _ChatTurn(ctx).run()
