"""Branches: a checkpoint at the end of every turn, and forks of a conversation at any turn.

Every finished turn ends with a checkpoint in the conversation's own journal
(:class:`~agentkit.store.TurnCheckpoint`: how many messages, the status, and the TaskState and
ExecutionState as they stood, with their ``system_config`` versions). A fork
(:func:`fork_conversation`, ``Agent.fork``) is a new conversation holding the source's history
up to and including one turn, with that turn's memory restored under the new conversation's
keys and ``forkedFrom`` in its ``meta.json``. The source is never written to.

A planner turn writes its checkpoint in the same journal commit as its answer, before memory
upkeep: a fork at that turn starts from the window as it was before any compression, and
compresses again when it needs to.

Why the memory *values* are in the checkpoint: ``system_config`` keeps one row per key (the
version counts writes, it keeps no history), so a version number alone cannot bring an older
value back. The values are small and secret-free (see :mod:`agentkit.store._checkpoint`).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, cast

from pydantic import JsonValue

from agentkit.errors import UsageError
from agentkit.ids import check_id, new_conversation_id
from agentkit.memory import MemoryRepository
from agentkit.store import ConversationKey, TurnCheckpoint
from agentkit.store.forks import Prepare
from agentkit.types import ConversationMeta

if TYPE_CHECKING:
    from agentkit.runtime import AgentRuntime

__all__ = ["fork_conversation", "record_turn_checkpoint"]

MAX_TITLE_LENGTH = 200


def record_turn_checkpoint(runtime: AgentRuntime, key: ConversationKey, message_id: str) -> None:
    """Write the checkpoint of turn *message_id*, which has just finished (the turn's lock is
    held by the caller), unless the turn's final commit already carried it (planner turns)."""
    last = runtime.store.last_checkpoint(key)
    if last is not None and last.message_id == message_id:
        return
    memory = runtime.memory
    checkpoint = memory.turn_checkpoint(key.agent_id, key.conversation_id, message_id)
    runtime.store.record_checkpoint(key, checkpoint)


def _restore(
    memory: MemoryRepository, source: ConversationKey, target: ConversationKey
) -> tuple[list[str], Prepare]:
    """The function that writes a checkpoint's memory under *target*, and the keys it wrote."""
    written: list[str] = []

    def restore(checkpoint: TurnCheckpoint | None) -> None:
        if checkpoint is None:
            return
        agent, conv = target.agent_id, target.conversation_id
        if checkpoint.task_state is not None:
            key = memory.task_state_key(agent, conv)
            memory.store.set(key, checkpoint.task_state, expected_version=0)
            written.append(key)
        if checkpoint.execution_state is not None:
            value = checkpoint.execution_state
            if isinstance(value, dict) and value.get("conversation_id"):
                value = {**value, "conversation_id": conv}
            key = memory.execution_state_key(agent, conv)
            memory.store.set(key, value, expected_version=0)
            written.append(key)
            _copy_step_secrets(memory, source, target, checkpoint, written)

    return written, restore


def _copy_step_secrets(
    memory: MemoryRepository,
    source: ConversationKey,
    target: ConversationKey,
    checkpoint: TurnCheckpoint,
    written: list[str],
) -> None:
    """A paused step's secret arguments live apart from the ExecutionState (never in a
    checkpoint); they are carried over when the source still holds that very flow state."""
    current = memory.store.get(memory.execution_state_key(source.agent_id, source.conversation_id))
    if current is None or current.version != checkpoint.execution_state_version:
        return
    secrets = memory.load_step_secrets(source.agent_id, source.conversation_id)
    if secrets:
        memory.save_step_secrets(
            target.agent_id, target.conversation_id, cast(dict[str, dict[str, JsonValue]], secrets)
        )
        written.append(memory.step_secrets_key(target.agent_id, target.conversation_id))


def fork_conversation(
    runtime: AgentRuntime,
    source: ConversationKey,
    *,
    at: str | None = None,
    title: str | None = None,
) -> ConversationMeta:
    """Fork *source* at turn *at* (a message id; None: its last finished turn) into a new
    conversation with that turn's history and memory; returns the fork's metadata (*at*
    ``FORK_START``: before the first message)."""
    if at:
        check_id(at, "message")
    if title is not None:
        title = " ".join(title.split())
        if len(title) > MAX_TITLE_LENGTH:
            raise UsageError(f"a title has at most {MAX_TITLE_LENGTH} characters")
    store = runtime.store
    if not title:
        base = store.meta(source).title
        title = f"{base} (fork)"[:MAX_TITLE_LENGTH]
    target = ConversationKey(source.agent_id, new_conversation_id())
    memory = runtime.memory
    written, restore = _restore(memory, source, target)
    try:
        return store.fork(source, target, title=title, at=at, prepare=restore)
    except BaseException:
        for key in written:  # the fork is not there: neither is its memory
            with contextlib.suppress(Exception):
                memory.store.delete(key)
        raise
