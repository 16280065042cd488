"""The call tracer: the only way agentkit calls a model.

::

    async with turn.tracer.call("plan", messages, schema) as call:
        completion = await call.reply()          # or call.stream(), call.with_tools(), call.score()
        call.read(raw=text, parsed=value)        # what the caller made of it (default: the text)

Every model call anywhere goes through one: a planner turn's and a chat turn's (built from the
turn's context, :meth:`CallTracer.of`), memory upkeep's, and the calls made outside a turn
(compression sweeps, simulated users, judges: :meth:`CallTracer.standalone`).

Leaving the block times the call, counts its usage into the turn's, writes one
:class:`~agentkit.calls.records.CallRecord` (in memory and in the turn's ``calls.jsonl``,
secrets scrubbed) and ends its ``{operation} {model}`` span — whether the call succeeded,
failed, timed out or was cancelled. The block runs under the stage's timeout, and the model's
reply is awaited as a task of its own so that a cancel interrupts it (:class:`CancelScope`).
No other code times or records a model call, so every record has a span and every model span
a record.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextvars import ContextVar
from types import TracebackType
from typing import Any, Protocol, TypeVar

from pydantic import JsonValue

from agentkit.calls.cancel import CancelScope
from agentkit.calls.errors import TurnCancelledError, TurnFailedError
from agentkit.calls.records import CallRecord
from agentkit.calls.secrets import SecretMask
from agentkit.errors import ModelError
from agentkit.models.base import (
    ChatMessage,
    ChatModel,
    Completion,
    JsonSchema,
    ModelEvent,
    ModelRequest,
    Purpose,
    SessionBackend,
    SessionModel,
    ToolSpec,
    final_completion,
)
from agentkit.store.base import CallRecordSink, ConversationStore
from agentkit.store.values import ConversationKey
from agentkit.telemetry import ModelCallSpan, Span, ToolCallPart, TurnTrace
from agentkit.types import Usage

__all__ = ["CallTracer", "ModelCall", "TurnCalls", "current_call", "error_text"]

T = TypeVar("T")


class TurnCalls(Protocol):
    """What a turn's context gives its tracer (a planner or chat turn's
    :class:`~agentkit.planning.state.TurnContext`): the tracer lives beneath the engines and
    knows a turn only by these."""

    @property
    def key(self) -> ConversationKey: ...
    @property
    def store(self) -> ConversationStore: ...
    @property
    def model(self) -> ChatModel | SessionBackend: ...
    @property
    def message_id(self) -> str: ...
    @property
    def mask(self) -> SecretMask: ...
    @property
    def cancel_scope(self) -> CancelScope: ...
    @property
    def records(self) -> list[CallRecord]: ...

    def timeout(self, purpose: str, /) -> float | None: ...


#: the model call in progress in this context (see :func:`current_call`)
_CURRENT: ContextVar[ModelCall | None] = ContextVar("agentkit_model_call", default=None)


def current_call() -> ModelCall | None:
    """The tracer's model call in progress here (None outside one): a model wrapper can check
    that it is called through the tracer (the test that no model call escapes it does)."""
    return _CURRENT.get()


def error_text(error: BaseException) -> str:
    return str(error) or ("timed out" if isinstance(error, TimeoutError) else type(error).__name__)


class CallTracer:
    """Makes, times and traces every model call of one turn (see the module docstring)."""

    def __init__(
        self,
        *,
        model: ChatModel | SessionBackend,
        message_id: str,
        timeout: Callable[[str], float | None],
        mask: SecretMask,
        cancel: CancelScope,
        sink: CallRecordSink | None = None,
        trace: TurnTrace | None = None,
        records: list[CallRecord] | None = None,
    ) -> None:
        self.model = model
        self.message_id = message_id
        self.timeout = timeout
        self.mask = mask
        self.cancel = cancel
        self.trace = trace
        #: every model call of the turn, in order (also appended to ``calls.jsonl``)
        self.records: list[CallRecord] = [] if records is None else records
        #: tokens and calls of every model call made through this tracer
        self.usage = Usage()
        #: where each record goes as it is made (the store's trace of the turn)
        self._sink = sink

    @classmethod
    def of(
        cls, ctx: TurnCalls, trace: TurnTrace | None, *, cancel: CancelScope | None = None
    ) -> CallTracer:
        """The tracer of turn *ctx*: its records in the store's trace of the turn (the file
        store's ``{messageId}/calls.jsonl``) and in ``ctx.records``, its spans in *trace*;
        *cancel*: another switch than the turn's (background upkeep has its own)."""
        return cls(
            model=ctx.model,
            message_id=ctx.message_id,
            timeout=ctx.timeout,
            mask=ctx.mask,
            cancel=ctx.cancel_scope if cancel is None else cancel,
            sink=ctx.store.open_call_records(ctx.key, ctx.message_id),
            trace=trace,
            records=ctx.records,
        )

    @classmethod
    def standalone(
        cls,
        model: ChatModel | SessionBackend,
        *,
        trace: TurnTrace | None = None,
        records: list[CallRecord] | None = None,
        sink: CallRecordSink | None = None,
        mask: SecretMask | None = None,
    ) -> CallTracer:
        """A tracer for model calls made outside a conversation's turn (a compression sweep,
        a simulated user, a judge): no time limit, its own cancel switch."""
        return cls(
            model=model,
            message_id="",
            timeout=_no_limit,
            mask=mask or SecretMask(),
            cancel=CancelScope(),
            sink=sink,
            trace=trace,
            records=records,
        )

    def scrub(self, text: str) -> str:
        return self.mask.text(text)

    def session(
        self,
        session: SessionModel,
        prompt: str,
        sent: Sequence[ChatMessage],
        interruptible: bool,
        *,
        parent: Span | None = None,
    ) -> ModelCall:
        """A chat turn's call: *prompt* sent to a live *session* (*sent*: what the model sees,
        for the record); use it as ``async with`` and read :meth:`ModelCall.stream`. With
        *interruptible* (a stateless model under the session) a cancel interrupts the wait for
        the next piece; a backend session is stopped by its own ``cancel`` instead."""
        return ModelCall(
            self,
            purpose="chat",
            messages=sent,
            schema=None,
            parent=parent,
            operation="chat",
            session=(session, prompt, interruptible),
        )

    def chat_model(self) -> ChatModel:
        """The turn's model; the planner needs a stateless chat model."""
        model = self.model
        if not isinstance(model, ChatModel):
            raise TurnFailedError(
                "unsupported_model", f"the planner needs a chat model, not {model.spec!r}"
            )
        return model

    def call(
        self,
        purpose: Purpose,
        messages: Sequence[ChatMessage] | Sequence[dict[str, str]],
        schema: JsonSchema | None = None,
        *,
        parent: Span | None = None,
        operation: str = "chat",
    ) -> ModelCall:
        """One model call of *purpose* sending *messages*; use it as ``async with``.
        *operation* names the span (``chat``; ``text_completion`` for likelihood scoring)."""
        return ModelCall(
            self,
            purpose=purpose,
            messages=messages,
            schema=schema,
            parent=parent,
            operation=operation,
        )

    def note(self, record: CallRecord) -> None:
        """A record that is no model call (a routing decision taken without one)."""
        self._keep(record)

    def _keep(self, record: CallRecord) -> None:
        self.records.append(record)
        if self._sink is not None:
            self._sink.append(record.to_json_line())

    def close(self) -> None:
        """The turn is over: its ``calls.jsonl`` is closed (a later record opens it again)."""
        if self._sink is not None:
            self._sink.close()


class ModelCall:
    """One model call in progress (made by :meth:`CallTracer.call`)."""

    def __init__(
        self,
        tracer: CallTracer,
        *,
        purpose: Purpose,
        messages: Sequence[ChatMessage] | Sequence[dict[str, str]],
        schema: JsonSchema | None,
        parent: Span | None,
        operation: str,
        session: tuple[SessionModel, str, bool] | None = None,
    ) -> None:
        self.tracer = tracer
        self.operation = operation
        self._session = session
        self.purpose = purpose
        self.messages = messages
        self.schema = schema
        self.completion: Completion | None = None
        self._read: dict[str, Any] | None = None
        self._parent = parent
        self._span: ModelCallSpan | None = None
        self._deadline: float | None = None
        #: the failure of the model call, even when the caller handled it
        self._failure: BaseException | None = None
        self._started = 0.0
        self._outer: ModelCall | None = None

    @property
    def model(self) -> ChatModel:
        return self.tracer.chat_model()

    # -- the call ------------------------------------------------------------------------------

    async def __aenter__(self) -> ModelCall:
        tracer = self.tracer
        tracer.cancel.check()
        trace = tracer.trace
        if trace is not None:
            self._span = trace.model_call(
                self._parent,
                operation=self.operation,
                model=tracer.model.spec,
                purpose=self.purpose,
                stream=self.purpose in ("respond", "chat"),
            )
            if trace.capture:  # contents only when asked for (masked even then)
                self._span.sent(self._message_dicts())
        limit = tracer.timeout(self.purpose)
        self._deadline = None if limit is None else asyncio.get_running_loop().time() + limit
        self._started = time.perf_counter()
        self._outer = _CURRENT.get()
        _CURRENT.set(self)
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        latency = round((time.perf_counter() - self._started) * 1000, 3)
        # set back, not reset: a generator's block may end in another context than it began
        _CURRENT.set(self._outer)
        self._finish(latency, error if error is not None else self._failure)

    def _finish(self, latency: float, error: BaseException | None) -> None:
        tracer, completion = self.tracer, self.completion
        usage = completion.usage if completion is not None else Usage()
        tracer.usage = Usage(
            input_tokens=tracer.usage.input_tokens + usage.input_tokens,
            output_tokens=tracer.usage.output_tokens + usage.output_tokens,
            calls=tracer.usage.calls + 1,
            cached_tokens=tracer.usage.cached_tokens + usage.cached_tokens,
        )
        read = self._read  # what the caller made of the reply, when it said
        if read is None:
            text = tracer.scrub(completion.text) if completion is not None else ""
            read = {"raw": text, "parsed": text} if completion is not None else {}
            if error is not None and not isinstance(error, GeneratorExit):
                cancelled = isinstance(error, TurnCancelledError | asyncio.CancelledError)
                read["error"] = "cancelled by the user" if cancelled else error_text(error)
        problem = read.get("error", "")
        messages = self._message_dicts()
        # built from our own values (not validated again: the schema stays the agent's object,
        # whose JSON the trace writes once, see CallRecord.to_json_line)
        record = CallRecord.model_construct(
            purpose=self.purpose,
            messages=messages,
            schema_=self.schema,
            raw=read.get("raw", ""),
            parsed=read.get("parsed"),
            error=problem,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            latency_ms=latency,
            route=read.get("route"),
        )
        tracer._keep(record)
        span = self._span
        if span is not None:
            trace = tracer.trace
            if trace is not None and trace.capture and (completion is not None or read.get("raw")):
                asked = completion.tool_calls if completion is not None else ()
                said = tracer.scrub(completion.text) if completion and asked else read.get("raw")
                span.replied(
                    str(said or ""),
                    tool_calls=[
                        ToolCallPart(call.name, tracer.mask.json(call.arguments), call.id)
                        for call in asked
                    ],
                    finish_reason=completion.stop_reason if completion is not None else "error",
                )
            span.usage(usage.input_tokens, usage.output_tokens)
            if completion is not None:
                span.finish_reasons([completion.stop_reason])
            if problem:
                kind = type(error).__name__ if error is not None else "InvalidReply"
                span.fail(kind, problem)
            span.end()

    def read(
        self,
        *,
        raw: str = "",
        parsed: JsonValue = None,
        error: str = "",
        route: JsonValue = None,
    ) -> None:
        """What the caller made of the reply, for the record (*raw* is scrubbed here)."""
        self._read = {
            "raw": self.tracer.scrub(raw),
            "parsed": parsed,
            "error": error,
            "route": route,
        }

    # -- the ways to call --------------------------------------------------------------------

    def _request(self, *, tools: Sequence[ToolSpec] = (), stream: bool = False) -> ModelRequest:
        schema = None if tools else self.schema
        return ModelRequest(
            self.purpose, tuple(self._chat_messages()), schema, tuple(tools), stream=stream
        )

    async def reply(self) -> Completion:
        """The whole reply, its text not yet validated (the caller reads it once)."""
        model = self.model
        whole = final_completion(model.spec or type(model).__name__, model.request(self._request()))
        self.completion = await self._run(whole)
        return self.completion

    async def stream(self) -> AsyncIterator[ModelEvent]:
        """The reply's events as they come, under the stage's time; a cancel interrupts the
        wait for the next one (:class:`~agentkit.calls.errors.TurnCancelledError`)."""
        interruptible = True
        if self._session is not None:
            session, prompt, interruptible = self._session
            events = session.send(prompt)
        else:
            events = self.model.request(self._request(stream=True))
        cancel = self.tracer.cancel
        await _next_loop_turn()
        try:
            async with asyncio.timeout_at(self._deadline):
                while True:
                    try:
                        following = anext(events)
                        event = await (cancel.run(following) if interruptible else following)
                    except StopAsyncIteration:
                        break
                    if isinstance(event, Completion):
                        self.completion = event
                    yield event
        except (ModelError, TimeoutError, TurnCancelledError) as error:
            self._failure = error
            raise
        finally:
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()

    async def with_tools(self, tools: Sequence[ToolSpec]) -> Completion:
        """One call offering *tools* natively: text or tool calls (not yet run)."""
        model = self.model
        request = self._request(tools=tools)
        whole = final_completion(model.spec or type(model).__name__, model.request(request))
        self.completion = await self._run(whole)
        return self.completion

    async def score(self, pairs: Sequence[tuple[str, str]]) -> list[list[float]]:
        """Likelihood scores of *pairs* (a model that :attr:`~ChatModel.scores`: nothing is
        generated)."""
        return await self._run(self.model.score(pairs))

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of *texts* (a model that :attr:`~ChatModel.embeds`: nothing is generated)."""
        return await self._run(self.model.embed(texts))

    async def _run(self, awaitable: Awaitable[T]) -> T:
        """*awaitable* under the stage's time, interruptible by a cancel; a failure is
        remembered for the record even when the caller handles it."""
        await _next_loop_turn()
        try:
            async with asyncio.timeout_at(self._deadline):
                return await self.tracer.cancel.run(awaitable)
        except (ModelError, TimeoutError, RecursionError) as error:
            self._failure = error
            raise

    def _message_dicts(self) -> list[dict[str, str]]:
        mask = self.tracer.mask
        return [
            {"role": m["role"], "content": mask.text(m["content"])}
            for m in (
                m.model_dump() if isinstance(m, ChatMessage) else dict(m) for m in self.messages
            )
        ]

    def _chat_messages(self) -> list[ChatMessage]:
        return [m if isinstance(m, ChatMessage) else ChatMessage(**m) for m in self.messages]  # type: ignore[arg-type]


def _no_limit(purpose: str) -> float | None:
    return None


async def _next_loop_turn() -> None:
    """Let what the loop already has queued run before a model call begins.

    A call is awaited in its turn's own task (:class:`~agentkit.calls.cancel.CancelScope`), so
    a model that blocks (a synchronous model function runs on the loop) would otherwise start
    before callbacks queued ahead of it: after a turn's ``result`` the memory upkeep's first call
    would run before ``Agent.send`` hands the result to its (blocked) caller, who may be what
    the model waits for. One yield per call, not per streamed piece: the pieces of one reply
    still reach the stream together."""
    await asyncio.sleep(0)
