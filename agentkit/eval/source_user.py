"""A scenario source's own simulated user: the second extension point of a scenario source.

A public suite whose user is simulated its own way (its own prompt, its own stop signals, tools
of the user's own) attaches a :class:`SourceUser` to each scenario it makes
(``Scenario(..., source_user=…)``, beside ``scorer``; a scenario file cannot set one). The
run then asks it for the simulator of that run instead of agentkit's
(:class:`~agentkit.eval.simulator.ModelUser`): it gets the model that plays the user
(``--user-model``) and where the run is (:class:`UserContext`), and returns a
:class:`RecordingUser` — the :class:`~agentkit.eval.simulator.UserSimulator` protocol plus the
records of the model calls it made (the transcript's ``user_calls``). Everything else about
the run — turns, consent, budgets, the transcript, the row — stays the harness's own.

A source user travels with its task to worker processes and Dask workers: it must be
picklable (a frozen dataclass of plain values, defined in an importable module).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from agentkit.calls.records import CallRecord
from agentkit.models.base import ChatModel
from agentkit.tools import SecretMask
from agentkit.types import Usage

if TYPE_CHECKING:
    from agentkit.eval.simulator import Move, SimTurn

__all__ = ["RecordingUser", "SourceUser", "UserContext"]


@dataclass(frozen=True, slots=True)
class UserContext:
    """Where the simulated user plays: the run's agent folder, the conversation, the run's
    budget (*on_call* is told each model call's usage) and the mask of the agent's secrets."""

    agent_dir: Path
    language: str
    conversation_id: str
    on_call: Callable[[Usage], None]
    mask: SecretMask | None = None


class RecordingUser(Protocol):
    """A simulated user that keeps the records of its model calls."""

    records: list[CallRecord]

    async def next_move(self, conversation: Sequence[SimTurn]) -> Move: ...


class SourceUser(ABC):
    """Makes the simulated user of a run (see the module docstring)."""

    @abstractmethod
    def simulator(self, model: ChatModel, context: UserContext) -> RecordingUser:
        """The user of one run, played by *model*."""
