"""Persistence of TaskState and ExecutionState in the ``system_config`` store.

Keys: ``task_state:{agent_id}:{conversation_id}``,
``execution_state:{agent_id}:{conversation_id}`` and, while a planned step carries secret
arguments, ``step_secrets:{agent_id}:{conversation_id}``; one of each per conversation.

Invariants:

* every write is a compare-and-swap with the version the caller read (:class:`Versioned`;
  version 0 = "not stored yet"): a stale write raises
  :class:`~agentkit.store.kv.VersionConflictError`, it never silently overwrites;
* a stored value is validated on load; one that does not validate raises
  :class:`CorruptStateError` naming the key;
* a TaskState is normalised before it is written; an ExecutionState gets ``updated_at`` = now;
* while a turn runs, the planner stages its ExecutionState here between durability points
  (:meth:`MemoryRepository.stage_execution_state`, written at the next one or at the turn's
  end): :meth:`MemoryRepository.load_execution_state` returns the staged state, so this
  process's readers (the plan view, pending approvals over HTTP and ACP, ``Agent.
  execution_state``) see the live one; another process (a worker, a replica) sees the one
  last written, the state at the turn's last durability point;
* the ExecutionState never holds a secret: the planner masks secret-named step arguments and
  keeps the real values in the ``step_secrets`` record only until the flow ends (so
  ``agentkit state``, the workbench and an exported state show nothing to leak).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from pydantic import BaseModel, JsonValue, ValidationError

from agentkit.errors import CorruptStateError, UsageError
from agentkit.ids import check_id
from agentkit.memory.execution_state import ExecutionState
from agentkit.memory.task_state import TaskState
from agentkit.store import TurnCheckpoint
from agentkit.store.kv import ConfigStore
from agentkit.types import utc_now

__all__ = ["CorruptStateError", "MemoryRepository", "Versioned"]

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class Versioned(Generic[T]):
    """A value and the store version it was read at (0: nothing stored yet)."""

    value: T
    version: int


class MemoryRepository:
    """Loads and saves the memory records of conversations in a :class:`ConfigStore`."""

    def __init__(self, store: ConfigStore) -> None:
        self.store = store
        # ExecutionStates a running turn has moved on to but not written yet (see
        # stage_execution_state), by key: what this process's readers see meanwhile
        self._staged: dict[str, Versioned[ExecutionState]] = {}

    @staticmethod
    def task_state_key(agent_id: str, conversation_id: str) -> str:
        agent, conv = check_id(agent_id, "agent"), check_id(conversation_id, "conversation")
        return f"task_state:{agent}:{conv}"

    @staticmethod
    def execution_state_key(agent_id: str, conversation_id: str) -> str:
        agent, conv = check_id(agent_id, "agent"), check_id(conversation_id, "conversation")
        return f"execution_state:{agent}:{conv}"

    def _load(self, key: str, kind: type[M]) -> Versioned[M] | None:
        entry = self.store.get(key)
        if entry is None:
            return None
        try:
            value = kind.model_validate(entry.value)
        except ValidationError as error:
            problem = error.errors()[0]
            where = ".".join(str(part) for part in problem["loc"]) or "(root)"
            more = error.error_count() - 1
            suffix = f" (and {more} more)" if more else ""
            raise CorruptStateError(key, f"{where}: {problem['msg']}{suffix}") from None
        return Versioned(value, entry.version)

    def load_task_state(self, agent_id: str, conversation_id: str) -> Versioned[TaskState]:
        """The stored TaskState, or an empty one at version 0."""
        key = self.task_state_key(agent_id, conversation_id)
        loaded = self._load(key, TaskState)
        if loaded is None:
            return Versioned(TaskState(), 0)
        return Versioned(loaded.value.normalize(), loaded.version)

    def save_task_state(
        self, agent_id: str, conversation_id: str, state: TaskState, *, expected_version: int
    ) -> Versioned[TaskState]:
        """Write *state* (normalised) if the stored version is still *expected_version*."""
        key = self.task_state_key(agent_id, conversation_id)
        value = state.normalize()
        entry = self.store.set(
            key, value.model_dump(mode="json"), expected_version=expected_version
        )
        return Versioned(value, entry.version)

    def load_execution_state(
        self, agent_id: str, conversation_id: str
    ) -> Versioned[ExecutionState] | None:
        """The stored ExecutionState (or, while a turn of this process runs, the one it has
        moved on to: :meth:`stage_execution_state`), or None when the conversation has none."""
        key = self.execution_state_key(agent_id, conversation_id)
        staged = self._staged.get(key)
        if staged is not None:
            return staged
        return self._load(key, ExecutionState)

    def stage_execution_state(
        self, agent_id: str, conversation_id: str, state: ExecutionState, *, version: int
    ) -> ExecutionState:
        """Make *state* (``updated_at`` = now) the conversation's ExecutionState for this
        process without writing it: the planner's states between durability points, written
        with its next save (which compare-and-swaps against *version*, the stored one). A
        crash loses them, which is their contract; another process sees the stored one."""
        key = self.execution_state_key(agent_id, conversation_id)
        value = state.touched()
        self._staged[key] = Versioned(value, version)
        return value

    def save_execution_state(
        self,
        agent_id: str,
        conversation_id: str,
        state: ExecutionState,
        *,
        expected_version: int,
        durable: bool = True,
    ) -> Versioned[ExecutionState]:
        """Write *state* (``updated_at`` = now) if the stored version is *expected_version*."""
        key = self.execution_state_key(agent_id, conversation_id)
        if state.conversation_id and state.conversation_id != conversation_id:
            raise UsageError(
                f"execution state of conversation {state.conversation_id!r} "
                f"cannot be saved under {conversation_id!r}"
            )
        value = state.touched()
        try:
            entry = self.store.set(
                key, value.model_dump(mode="json"), expected_version=expected_version,
                durable=durable,
            )  # fmt: skip
        finally:  # written, or refused (another writer won): either way the store decides
            self._staged.pop(key, None)
        return Versioned(value, entry.version)

    def unstage_execution_state(self, agent_id: str, conversation_id: str) -> None:
        """Forget a staged state that was never written (a turn that ended without its end
        write, e.g. its stream was closed): readers see the stored one again."""
        self._staged.pop(self.execution_state_key(agent_id, conversation_id), None)

    def delete_execution_state(
        self, agent_id: str, conversation_id: str, *, expected_version: int | None = None
    ) -> bool:
        """Drop the ExecutionState (a finished or abandoned flow); True if there was one."""
        key = self.execution_state_key(agent_id, conversation_id)
        deleted = self.store.delete(key, expected_version=expected_version)
        self._staged.pop(key, None)
        return deleted

    @staticmethod
    def step_secrets_key(agent_id: str, conversation_id: str) -> str:
        agent, conv = check_id(agent_id, "agent"), check_id(conversation_id, "conversation")
        return f"step_secrets:{agent}:{conv}"

    def load_step_secrets(self, agent_id: str, conversation_id: str) -> dict[str, dict[str, Any]]:
        """The unmasked arguments of planned steps whose stored copy is masked, by step id."""
        entry = self.store.get(self.step_secrets_key(agent_id, conversation_id))
        if entry is None or not isinstance(entry.value, dict):
            return {}
        return {
            str(step_id): dict(args)
            for step_id, args in entry.value.items()
            if isinstance(args, dict)
        }

    def save_step_secrets(
        self,
        agent_id: str,
        conversation_id: str,
        secrets: dict[str, dict[str, Any]],
        *,
        durable: bool = True,
    ) -> None:
        """Keep *secrets* apart from the ExecutionState (which holds the masked arguments);
        an empty mapping removes the record."""
        key = self.step_secrets_key(agent_id, conversation_id)
        if secrets:
            self.store.set(key, cast(JsonValue, secrets), durable=durable)
        else:
            self.store.delete(key)

    def turn_checkpoint(
        self, agent_id: str, conversation_id: str, message_id: str
    ) -> TurnCheckpoint:
        """The memory half of finished turn *message_id*'s checkpoint, as stored now (the
        conversation store sets ``messages`` and ``status`` when it writes it)."""
        task = self.store.get(self.task_state_key(agent_id, conversation_id))
        execution = self.store.get(self.execution_state_key(agent_id, conversation_id))
        # built, not validated: the id was checked by the store, the values are JSON as read
        return TurnCheckpoint.model_construct(
            message_id=check_id(message_id, "message"),
            messages=0,
            status="idle",
            at=utc_now(),
            task_state=task.value if task else None,
            task_state_version=task.version if task else 0,
            execution_state=execution.value if execution else None,
            execution_state_version=execution.version if execution else 0,
        )

    def restore_execution_state(
        self, agent_id: str, conversation_id: str, checkpoint: TurnCheckpoint | None
    ) -> bool:
        """Bring back the ExecutionState *checkpoint* holds when the stored one is an older
        write of the same flow (what a power loss leaves: a turn's last ExecutionState write
        is durable through the checkpoint in the conversation's journal, not by itself).
        A state written after the checkpoint (the memory was cleared and a new flow began)
        is left alone. True when restored."""
        if checkpoint is None or checkpoint.execution_state is None:
            return False
        key = self.execution_state_key(agent_id, conversation_id)
        entry = self.store.get(key)
        if entry is None or entry.version >= checkpoint.execution_state_version:
            return False
        if entry.updated_at > checkpoint.at:
            return False
        self.store.set(key, checkpoint.execution_state, expected_version=entry.version)
        return True

    def clear(self, agent_id: str, conversation_id: str) -> None:
        """``/clear``: forget every record of the conversation (unconditionally)."""
        self.store.delete(self.task_state_key(agent_id, conversation_id))
        self._staged.pop(self.execution_state_key(agent_id, conversation_id), None)
        self.store.delete(self.execution_state_key(agent_id, conversation_id))
        self.store.delete(self.step_secrets_key(agent_id, conversation_id))
