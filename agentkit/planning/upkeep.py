"""Memory upkeep after a completed planner turn: TaskState updates and compression.

* With ``compression.incremental_messages`` > 0 the latest messages are folded into TaskState
  (the seed's incremental update; the window stays as it is).
* When the window is over seed 002's N messages *and* T tokens, its older part is summarised
  into TaskState, the last K kept, and a marker in the history says where it was cut (the
  chat window, :mod:`agentkit.memory.history`, starts there from then on).

Both are best effort: a failed summary, or a concurrent edit of TaskState (theirs is kept), is
noted in the turn log and the turn stays completed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from agentkit.errors import AgentkitError, ModelError
from agentkit.events import AgentEvent
from agentkit.memory import chat_window, estimator_for, maybe_compress, update_task_state
from agentkit.memory.history import compression_marker
from agentkit.models.base import ChatModel
from agentkit.planning.state import TurnState
from agentkit.types import Message, utc_now

__all__ = ["maybe_compress_window", "update_task_state_from_window"]


async def update_task_state_from_window(turn: TurnState) -> None:
    """Fold the latest messages into TaskState (``compression.incremental_messages``)."""
    deps = turn.deps
    config, model = deps.compression, deps.model
    if config is None or not config.incremental_messages or not isinstance(model, ChatModel):
        return
    key = deps.key
    window = chat_window(deps.store.recent(key, config.incremental_messages + 4))
    task = deps.memory.load_task_state(key.agent_id, key.conversation_id)
    updated = await update_task_state(window, task.value, model, config.incremental_messages)
    if isinstance(updated, ModelError):
        turn.note("ERROR", f"task state update: {updated}")
        return
    if updated == task.value:
        return
    try:
        deps.memory.save_task_state(
            key.agent_id, key.conversation_id, updated, expected_version=task.version
        )
    except AgentkitError as error:  # a concurrent edit of TaskState: keep theirs
        turn.note("ERROR", f"task state update: {error}")
        return
    turn.note("MEMORY", "task state updated from the latest messages")


async def maybe_compress_window(turn: TurnState) -> AsyncIterator[AgentEvent]:
    """Summarise the older part of an over-long window into TaskState and mark the cut."""
    deps = turn.deps
    config, model, key, store = deps.compression, deps.model, deps.key, deps.store
    if config is None or not isinstance(model, ChatModel):
        return
    recent = store.recent(key, 4 * deps.max_turns + 2)
    if len(recent) <= config.max_messages:  # under the first threshold (the window is no
        return  # longer than what it is cut from): nothing more to read
    window = chat_window(recent)
    if len(window) <= config.max_messages:
        return
    task = deps.memory.load_task_state(key.agent_id, key.conversation_id)
    outcome = await maybe_compress(window, task.value, model, config, estimator_for(model))
    if outcome is None:
        return
    if not outcome.compressed or outcome.event is None:
        problem = turn.scrub(str(outcome.error))
        store.annotate(key, turn.message_id, "ERROR", f"compression: {problem}")
        return
    try:
        deps.memory.save_task_state(
            key.agent_id, key.conversation_id, outcome.task_state, expected_version=task.version
        )
    except AgentkitError as error:  # e.g. a concurrent edit of TaskState: keep theirs
        store.annotate(key, turn.message_id, "ERROR", f"compression: {error}")
        return
    marker = compression_marker(len(window) - len(outcome.window), len(outcome.window))
    store.append(
        key, Message(role="system", content=marker, message_id=turn.message_id, timestamp=utc_now())
    )
    yield outcome.event
