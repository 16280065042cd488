"""The world one run runs in: its own data root, the agent as the task ships it, the run's
model (seeded for the repeat, behind the run's budget) and the scenario's starting state.

Independence holds here: every run gets a fresh data root (a temporary folder, or
``keep_dir/{run}``) holding the agent's files as shipped in the task (a remote worker needs no
shared disk), its config.json with the point's parameters, empty memory, and the toolsets'
state seeded from the scenario through the agent's own toolsets (each seeds its own). Nothing
in it is shared with another run.

A run's world is throwaway, so it costs no more than the run needs:

* **RAM-backed**: the temporary data root is made under ``/dev/shm`` (a tmpfs) when there is
  one and ``$TMPDIR`` does not say otherwise (:func:`scratch_dir`). The run's stores write
  and fsync exactly as they always do -- the same code paths, the same journal, the same
  durability points -- but on tmpfs an fsync returns at once and no file ever reaches a
  disk. That stays honest because what a scenario can test is a restart of the agent (a new
  process over the same data root, ``restart: true``), and tmpfs keeps everything a process
  wrote across that exactly as a disk's page cache does after ``kill -9``; no scenario
  pulls the power. ``keep_dir`` runs are written where they were asked to be, to browse.
* **memory in memory**: the agent's memory records (TaskState, ExecutionState, …) go to an
  :class:`~agentkit.store.kv.InMemoryConfigStore` (the reference the SQLite store passes the
  same contract suite against) unless the run needs the database: a scenario that restarts
  the agent (its memory must come back from disk), a kept run (to browse), or a store
  chosen with ``--store`` (PostgreSQL keeps memory in its own database).

Under ``--model scripted`` the run's model is the scenario's own replies
(:class:`ScenarioReplies`, a :class:`~agentkit.models.function.FunctionModel`'s function): by
purpose, in call order — each turn's script for fixed turns, one script for the whole run
with a simulated user.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import JsonValue

from agentkit.agent import Agent
from agentkit.errors import ModelError
from agentkit.eval.budget import BudgetedModel, Meter
from agentkit.eval.scenario import Scenario
from agentkit.eval.task import SCRIPTED, PointTask
from agentkit.eval.transcript import RunState
from agentkit.layout import DataLayout
from agentkit.models.base import ChatModel, Purpose, SessionBackend
from agentkit.models.function import FunctionModel
from agentkit.models.request import ModelRequest
from agentkit.models.spec import create_model
from agentkit.store.choice import FILES, resolve_store_spec
from agentkit.store.kv import ConfigStore, InMemoryConfigStore
from agentkit.types import Message

if TYPE_CHECKING:
    from agentkit.eval.pools import EndpointPools

__all__ = ["RAM_DIR", "RunWorld", "ScenarioReplies", "run_root", "scratch_dir"]


class ScenarioReplies:
    """A scenario's scripted replies, as a function model's function (see the module
    docstring). A purpose whose list runs out repeats its last reply; a purpose without
    replies is a failed model call."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.spec = f"{SCRIPTED}:{scenario.id}"
        self._script: dict[Purpose, list[JsonValue]] | None = (
            dict(scenario.script or {}) if scenario.simulated_user is not None else None
        )
        self._position: dict[str, int] = {}

    def turn(self, index: int) -> None:
        """Fixed turn *index* (0-based) begins: its own script from its first reply."""
        self._script = dict(self.scenario.turns[index].script or {})
        self._position = {}

    def __call__(self, request: ModelRequest) -> str:
        if self._script is None:
            raise ModelError(self.spec, "no turn has begun")
        replies = self._script.get(request.purpose)
        if not replies:
            raise ModelError(
                self.spec, f"the script has no replies for purpose {request.purpose!r}"
            )
        index = self._position.get(request.purpose, 0)
        self._position[request.purpose] = index + 1
        reply = replies[min(index, len(replies) - 1)]
        return reply if isinstance(reply, str) else json.dumps(reply, ensure_ascii=False)

    def model(self) -> FunctionModel:
        model = FunctionModel(self, name=self.spec)
        model.spec = self.spec
        return model


#: the RAM-backed folder preferred for throwaway data roots (Linux's tmpfs)
RAM_DIR = Path("/dev/shm")  # noqa: S108  # mkdtemp makes a private (0700) folder there


def scratch_dir() -> str | None:
    """Where throwaway data roots go: ``$TMPDIR`` when it is set (the user's choice), else
    :data:`RAM_DIR` when it is a writable folder, else the system's temporary folder (None)."""
    if os.environ.get("TMPDIR"):
        return None  # tempfile reads it
    if RAM_DIR.is_dir() and os.access(RAM_DIR, os.W_OK | os.X_OK):
        return str(RAM_DIR)
    return None


def run_root(task: PointTask) -> Path:
    """A fresh data root for one attempt (under ``keep_dir`` when the runs are kept)."""
    if task.keep_dir is not None:
        root = Path(task.keep_dir) / task.run_name
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        return root
    return Path(tempfile.mkdtemp(prefix="agentkit-eval-", dir=scratch_dir()))


class RunWorld:
    """One run's data root, agent, model and budget meter (one per attempt, used once)."""

    def __init__(self, task: PointTask, root: Path, pools: EndpointPools | None = None) -> None:
        self.task = task
        self.scenario = task.scenario
        self.root = root
        self.pools = pools
        self.files = DataLayout(root).agent(self.scenario.agent)
        self.meter = Meter(task.budget)
        #: the scenario's replies when the run is scripted (None: a real model)
        self.replies = ScenarioReplies(self.scenario) if task.model == SCRIPTED else None
        self._scripted = self.replies.model() if self.replies is not None else None
        self._memory = self._memory_store()

    @property
    def folder(self) -> Path:
        return self.files.dir

    def materialise(self) -> None:
        """Write the agent's files and the point's config.json into the data root."""
        made: set[Path] = set()
        for relative, content in self.task.agent_files:
            path = self.folder / relative
            if path.parent not in made:  # a file-system create each: once per folder
                path.parent.mkdir(parents=True, exist_ok=True)
                made.add(path.parent)
            path.write_bytes(content)
        self.files.config.write_text(
            json.dumps(self.task.config, ensure_ascii=False, indent=2), encoding="utf-8"
        )
        self.files.workspace.mkdir(exist_ok=True)

    def backend(self, spec: str) -> ChatModel | SessionBackend:
        """The model a spec names, for this run (shared pools; the repeat's seed)."""
        if self.pools is not None and spec.startswith("openai:"):
            model: ChatModel | SessionBackend = self.pools.openai_model(spec.partition(":")[2])
        else:
            model = create_model(spec, base_dir=self.folder)
        seed = getattr(model, "seed", None)
        if self.task.repeat and isinstance(seed, int) and not isinstance(seed, bool):
            model.seed = seed + self.task.repeat  # type: ignore[union-attr]  # a backend's seed
        return model

    def _model(self) -> ChatModel | SessionBackend:
        if self._scripted is not None:
            model: ChatModel | SessionBackend = self._scripted
        elif not isinstance(self.task.model, str):
            model = self.task.model  # given as an object: shared by the runs of this process
        else:
            model = self.backend(self.task.model)
        if self.task.budget.is_empty or not isinstance(model, ChatModel):
            return model
        return BudgetedModel(model, self.meter)

    def open(self) -> Agent:
        """The agent, opened on the data root with the run's model (again after a restart)."""
        return Agent.open(
            self.scenario.agent,
            data_dir=self.root,
            model=self._model(),
            config_store=self._memory,
        )

    def _memory_store(self) -> ConfigStore | None:
        """Memory in memory when the run does not need the database (see the module
        docstring); None: the agent opens ``agentkit.db`` (or its store's own)."""
        restarts = any(turn.restart for turn in self.scenario.turns)
        if restarts or self.task.keep_dir is not None or resolve_store_spec(None) != FILES:
            return None
        return InMemoryConfigStore()

    def prepare(self, agent: Agent) -> str:
        """The starting state, the conversation and its earlier messages; its id."""
        scenario = self.scenario
        agent.runtime.load_tools().seed(scenario.state)  # through the agent's own toolsets
        conversation_id = agent.create_conversation(scenario.title or scenario.id).conversation_id
        if scenario.task_state is not None:
            agent.save_task_state(conversation_id, scenario.task_state, expected_version=0)
        turn_id = ""
        for message in scenario.history:
            if message.role == "user" or not turn_id:
                opened = Message.user(message.content)
                turn_id = opened.message_id
                if message.role == "user":
                    agent.append_message(conversation_id, opened)
                    continue
            agent.append_message(
                conversation_id, Message.assistant(message.content, message_id=turn_id)
            )
        return conversation_id

    @staticmethod
    def observe(agent: Agent, conversation_id: str, model_calls: int) -> RunState:
        """The state an expectation reads, now."""
        state = agent.execution_state(conversation_id)
        return RunState(
            status=state.value.status if state is not None else "none",
            task_state=agent.task_state(conversation_id).value,
            state=agent.runtime.load_tools().snapshot(),
            model_calls=model_calls,
        )
