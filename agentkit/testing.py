"""Testing your agent: doubles, a switch against accidental model calls, fresh data roots.

A test must never reach a real model by accident — an ``AGENTKIT_MODEL`` or
``OPENAI_BASE_URL`` left in a shell would otherwise leak into the suite::

    from agentkit import testing

    with testing.block_model_requests():      # llama, openai:, acp:, claude-cli all refuse
        ...                                   # ModelRequestsBlockedError, nothing sent

or for a whole run (subprocesses inherit it): ``AGENTKIT_ALLOW_MODEL_REQUESTS=0``. Inside a
block, :func:`allow_model_requests` lets a test that really wants the embedded model use it.
The doubles never check: :class:`FunctionModel`, :class:`ScriptedModel`,
:class:`ScriptedSessionBackend`, ``replay:`` cassettes.

:func:`data_root` makes a fresh data root holding copies of chosen agent folders (without
their conversations), so every test starts from the agents as committed. :func:`clean_env`
removes the variables that choose models, endpoints and data roots.

Nothing here imports pytest; a conftest wires these into fixtures (see the README's
"Testing your agent").
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from agentkit.errors import AgentNotFoundError, ModelRequestsBlockedError
from agentkit.ids import check_id
from agentkit.models._requests import (
    ALLOW_ENV,
    model_requests_allowed,
    set_override,
)
from agentkit.models.function import FunctionModel, tool_call
from agentkit.models.request import ModelRequest
from agentkit.models.scripted import ScriptedModel
from agentkit.models.scripted_session import (
    ScriptedSession,
    ScriptedSessionBackend,
    SessionRequest,
)
from agentkit.models.scripted_signals import scripted_signals

__all__ = [
    "ALLOW_ENV",
    "ENV_PREFIXES",
    "FunctionModel",
    "ModelRequest",
    "ModelRequestsBlockedError",
    "ScriptedModel",
    "ScriptedSession",
    "ScriptedSessionBackend",
    "SessionRequest",
    "scripted_signals",
    "allow_model_requests",
    "block_model_requests",
    "clean_env",
    "data_root",
    "model_requests_allowed",
    "tool_call",
]

#: the variables :func:`clean_env` removes: every one starting with these
ENV_PREFIXES: tuple[str, ...] = ("AGENTKIT_", "OPENAI_")


@contextmanager
def block_model_requests() -> Iterator[None]:
    """Real model backends raise :class:`ModelRequestsBlockedError` inside the block."""
    previous = set_override(False)
    try:
        yield
    finally:
        set_override(previous)


@contextmanager
def allow_model_requests() -> Iterator[None]:
    """Real model backends may be used inside the block (even under a block or the env var)."""
    previous = set_override(True)
    try:
        yield
    finally:
        set_override(previous)


def clean_env(keep: Iterable[str] = (), environ: dict[str, str] | None = None) -> dict[str, str]:
    """Remove every ``AGENTKIT_*`` and ``OPENAI_*`` variable but those in *keep* from
    *environ* (default ``os.environ``); returns what was removed, to put back."""
    target = os.environ if environ is None else environ
    kept = set(keep)
    removed = {
        name: value
        for name, value in target.items()
        if name.startswith(ENV_PREFIXES) and name not in kept
    }
    for name in removed:
        del target[name]
    return removed


def data_root(
    path: Path | str,
    agents: Iterable[str] | None = None,
    *,
    source: Path | str = "data",
) -> Path:
    """A fresh data root at *path* (created; it must not exist or be empty) holding copies of
    the agent folders *agents* (default: every one) from the data root *source*, without their
    conversations, logs or lock files. Returns *path*, ready for ``Agent.open(…, data_dir=…)``
    or ``AGENTKIT_DATA_DIR``."""
    root, origin = Path(path), Path(source) / "agents"
    if root.exists() and any(root.iterdir()):
        raise FileExistsError(f"{root} is not empty: a data root for a test starts empty")
    chosen = (
        sorted(p.name for p in origin.iterdir() if p.is_dir()) if agents is None else list(agents)
    )
    for agent_id in chosen:
        check_id(agent_id, "agent")
        if not (origin / agent_id).is_dir():
            raise AgentNotFoundError(agent_id)
    (root / "agents").mkdir(parents=True, exist_ok=True)
    skipped = shutil.ignore_patterns("conversations", "logs", ".*.lock", "__pycache__")
    for agent_id in chosen:
        shutil.copytree(origin / agent_id, root / "agents" / agent_id, ignore=skipped)
    return root
