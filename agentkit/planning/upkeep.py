"""Memory upkeep after a completed planner turn: TaskState updates and compression.

* With ``compression.incremental_messages`` > 0 the latest messages are folded into TaskState
  (the seed's incremental update; the window stays as it is).
* When the window is over seed 002's N messages *and* T tokens, its older part is summarised
  into TaskState, the last K kept, and a marker in the history says where it was cut (the
  chat window, :mod:`agentkit.memory.history`, starts there from then on).

Both read the conversation and TaskState the turn read at intake (plus its own two
messages), not the store again. Both are best effort: a failed summary, or a concurrent edit
of TaskState (theirs is kept), is noted in the turn log and the turn stays completed.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentkit.errors import AgentkitError, ModelError
from agentkit.events import CompressionEvent
from agentkit.memory import chat_window, estimator_for, maybe_compress, update_task_state
from agentkit.memory.compression import Summarize
from agentkit.memory.history import compression_marker
from agentkit.memory.repository import Versioned
from agentkit.memory.task_state import TaskState
from agentkit.models.base import ChatMessage, ChatModel, Completion, JsonSchema, validate_structured
from agentkit.planning.state import TurnContext
from agentkit.planning.tracer import CallTracer
from agentkit.telemetry import Span
from agentkit.types import Message, utc_now

__all__ = ["upkeep"]


async def upkeep(
    ctx: TurnContext, calls: CallTracer, turn_messages: Sequence[Message]
) -> CompressionEvent | None:
    """The incremental TaskState update, then compression; the ``compression`` event if the
    window was compressed. *turn_messages*: what this turn added (the user's message and the
    answer). The summarise calls go through the turn's call tracer."""
    config, model = ctx.compression, ctx.model
    if config is None or not isinstance(model, ChatModel):
        return None
    conversation = [*ctx.history, *turn_messages]
    task = ctx.task

    async def summarize(
        messages: list[ChatMessage], schema: JsonSchema, span: Span | None
    ) -> Completion:
        async with calls.call("summarize", messages, schema, parent=span) as call:
            completion = await call.reply()
            value = validate_structured(model.spec, completion.text, schema)
            return completion.model_copy(update={"structured": value})

    if config.incremental_messages:
        task = await _update(ctx, model, conversation, task, summarize)
    return await _compress(ctx, model, conversation, task, summarize)


async def _update(
    ctx: TurnContext,
    model: ChatModel,
    conversation: list[Message],
    task: Versioned[TaskState],
    summarize: Summarize,
) -> Versioned[TaskState]:
    """Fold the latest messages into TaskState (``compression.incremental_messages``)."""
    assert ctx.compression is not None
    last = ctx.compression.incremental_messages
    window = chat_window(conversation[-(last + 4) :])
    parent = ctx.trace.root if ctx.trace is not None else None
    updated = await update_task_state(
        window, task.value, model, last, parent=parent, summarize=summarize
    )
    if isinstance(updated, ModelError):
        ctx.note("ERROR", f"task state update: {updated}")
        return task
    if updated == task.value:
        return task
    key = ctx.key
    try:
        saved = ctx.memory.save_task_state(
            key.agent_id, key.conversation_id, updated, expected_version=task.version
        )
    except AgentkitError as error:  # a concurrent edit of TaskState: keep theirs
        ctx.note("ERROR", f"task state update: {error}")
        return task
    ctx.note("MEMORY", "task state updated from the latest messages")
    return saved


async def _compress(
    ctx: TurnContext,
    model: ChatModel,
    conversation: list[Message],
    task: Versioned[TaskState],
    summarize: Summarize,
) -> CompressionEvent | None:
    """Summarise the older part of an over-long window into TaskState and mark the cut."""
    assert ctx.compression is not None
    config, key, store = ctx.compression, ctx.key, ctx.store
    recent = conversation[-(4 * ctx.max_turns + 2) :]
    if len(recent) <= config.max_messages:  # under the first threshold (the window is no
        return None  # longer than what it is cut from): nothing more to read
    window = chat_window(recent)
    if len(window) <= config.max_messages:
        return None
    parent = ctx.trace.root if ctx.trace is not None else None
    outcome = await maybe_compress(
        window, task.value, model, config, estimator_for(model), parent=parent,
        summarize=summarize,
    )  # fmt: skip
    if outcome is None:
        return None
    if not outcome.compressed or outcome.event is None:
        problem = ctx.scrub(str(outcome.error))
        store.annotate(key, ctx.message_id, "ERROR", f"compression: {problem}")
        return None
    try:
        ctx.memory.save_task_state(
            key.agent_id, key.conversation_id, outcome.task_state, expected_version=task.version
        )
    except AgentkitError as error:  # e.g. a concurrent edit of TaskState: keep theirs
        store.annotate(key, ctx.message_id, "ERROR", f"compression: {error}")
        return None
    marker = compression_marker(len(window) - len(outcome.window), len(outcome.window))
    store.append(
        key, Message(role="system", content=marker, message_id=ctx.message_id, timestamp=utc_now())
    )
    return outcome.event
