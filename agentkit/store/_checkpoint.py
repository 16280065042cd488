"""The checkpoint of a finished turn: what restores a conversation as it stood after it.

Written as a ``checkpoint`` record in the conversation's own journal at the end of every
finished turn, so it is exactly as durable as the turn and shares its order: the history
position is a count of messages (no second copy of the history), and the memory is the
TaskState and ExecutionState *values* with their ``system_config`` versions. The values are
kept because ``system_config`` keeps one row per key (a version number, no history): a version
alone could not bring an older value back. They are small (a few KB) and hold no secret (the
ExecutionState never does; step secrets stay in ``system_config``).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from agentkit.types import ConversationStatus, IdStr, Timestamp

__all__ = ["TurnCheckpoint"]


class TurnCheckpoint(BaseModel):
    """The state after turn ``message_id``: ``messages`` messages of history, the status,
    and the memory records (None: none stored; version 0)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    message_id: IdStr
    messages: int = Field(ge=0)
    status: ConversationStatus
    at: Timestamp
    task_state: JsonValue = None
    task_state_version: int = Field(default=0, ge=0)
    execution_state: JsonValue = None
    execution_state_version: int = Field(default=0, ge=0)
