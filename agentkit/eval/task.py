"""One run to make: a :class:`PointTask`, a plain picklable value a worker executes anywhere
(in this process, a process pool, a Dask worker) without a shared disk — it carries the
agent's files, the point's config and everything the run needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentkit.eval.budget import RunBudget
from agentkit.eval.params import Params
from agentkit.eval.scenario import Scenario
from agentkit.models.base import ChatModel, SessionBackend

__all__ = ["SCRIPTED", "PointTask", "model_label", "run_name", "snapshot_agent"]

#: the model spec that means "each scenario's own scripted replies"
SCRIPTED = "scripted"
_SKIPPED_PARTS = ("conversations", "logs", "workspace")


@dataclass(frozen=True)
class PointTask:
    """Everything a worker needs for one run (picklable; no open files, no paths it must see)."""

    index: int
    point: int
    scenario: Scenario
    agent_files: tuple[tuple[str, bytes], ...]
    config: dict[str, Any]
    params: Params
    #: a spec string, or a model object (runs in this process only: see ``run_eval``)
    model: str | ChatModel | SessionBackend
    keep_dir: str | None = None
    turn_timeout: float | None = None
    retries: int = 0
    #: the sweep span's W3C traceparent: each attempt's span is its child (None: a new trace)
    traceparent: str | None = None
    #: which repeat of this (scenario, point) this is (``--repeat K``: 0 … K-1)
    repeat: int = 0
    #: who plays a simulated user: a spec (``scripted``: the scenario's user_script) or a
    #: model object; None for a scenario with fixed turns
    user_model: str | ChatModel | None = None
    #: what the run may spend
    budget: RunBudget = field(default_factory=RunBudget)
    #: who grades the scenario's judges (a spec, ``scripted``: each judge's script, or a
    #: model object); None: the run's model (a judge's own ``model`` wins over both)
    judge_model: str | ChatModel | None = None

    @property
    def run_name(self) -> str:
        """``{scenario}--p{point}`` (``--r{repeat}`` after it for a repeat past the first)."""
        return run_name(self.scenario.id, self.point, self.repeat)


def run_name(scenario: str, point: int, repeat: int = 0) -> str:
    """A run's name (its id in the results: labels and findings name it), ``{scenario}--p{point}``
    (``--r{repeat}`` after it for a repeat past the first)."""
    name = f"{scenario}--p{point}"
    return f"{name}--r{repeat}" if repeat else name


def model_label(model: str | ChatModel | SessionBackend | None) -> str:
    """The results table's ``model`` value: the spec string, or a model object's spec."""
    if model is None:
        return ""
    return model if isinstance(model, str) else model.spec or type(model).__name__


def snapshot_agent(agent_dir: Path) -> tuple[tuple[str, bytes], ...]:
    """The agent folder's files (prompts, config, tools, skills, knowledge …) as (path, bytes)
    pairs, without its conversations, logs, lock files, compiled Python or working state (a run
    starts from the scenario's state): what ``workspace/`` holds is left out."""
    files: list[tuple[str, bytes]] = []
    for path in sorted(agent_dir.rglob("*")):
        relative = path.relative_to(agent_dir)
        if not path.is_file() or relative.parts[0] in _SKIPPED_PARTS:
            continue
        if path.name.startswith(".") or "__pycache__" in relative.parts:
            continue
        files.append((relative.as_posix(), path.read_bytes()))
    return tuple(files)
