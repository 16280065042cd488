"""The data root and agent folders on disk (seed 16.6).

``{data}/agents/{agentId}/`` holds the agent's markdown files, ``config.json`` and its working
folders. The data root is an argument everywhere; when none is given it is
``$AGENTKIT_DATA_DIR``, else ``./data``. Nothing here runs at import time.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from agentkit.config import AgentConfig, load_agent_config
from agentkit.errors import AgentNotFoundError
from agentkit.filecache import read_text
from agentkit.ids import is_valid_id
from agentkit.layout import AgentPaths, DataLayout

__all__ = [
    "AGENT_SUBDIRS",
    "PROMPT_FILES",
    "AgentFolder",
    "list_agent_ids",
    "resolve_data_dir",
]

PROMPT_FILES: tuple[str, ...] = (
    "identity.md",
    "soul.md",
    "agent.md",
    "user.md",
    "tools.md",
    "heartbeat.md",
)
"""The order in which an agent's markdown files are joined into its system prompt:
who it is, its character, how it works, who it works for, its tools, its routines."""

AGENT_SUBDIRS: tuple[str, ...] = (
    "skills",
    "memory",
    "knowledge",
    "workspace",
    "logs",
    "conversations",
)


def resolve_data_dir(data_dir: Path | str | None = None) -> Path:
    """*data_dir* if given, else ``$AGENTKIT_DATA_DIR``, else ``./data``; made absolute."""
    if data_dir is None:
        data_dir = os.environ.get("AGENTKIT_DATA_DIR") or "data"
    return Path(data_dir).expanduser().absolute()


def list_agent_ids(data_dir: Path) -> list[str]:
    """Ids of the agent folders under *data_dir* (folders with a valid id and a config.json)."""
    agents = DataLayout(data_dir).agents_dir
    if not agents.is_dir():
        return []
    return sorted(
        entry.name
        for entry in agents.iterdir()
        if is_valid_id(entry.name) and AgentPaths(entry).config.is_file()
    )


@dataclass(frozen=True)
class AgentFolder:
    """An agent's folder: its id, where it lives, and its validated config."""

    agent_id: str
    path: Path
    config: AgentConfig

    @classmethod
    def load(cls, data_dir: Path, agent_id: str) -> AgentFolder:
        files = DataLayout(data_dir).agent(agent_id)
        if not files.config.is_file():
            raise AgentNotFoundError(agent_id)
        return cls(agent_id, files.dir, load_agent_config(files.config))

    @property
    def files(self) -> AgentPaths:
        """Where the folder's parts are (prompt overrides, workspace, conversations)."""
        return AgentPaths(self.path)

    @property
    def name(self) -> str:
        return self.config.name or self.agent_id

    def prompt_files(self) -> list[Path]:
        """The markdown files present, in :data:`PROMPT_FILES` order."""
        return [self.path / name for name in PROMPT_FILES if (self.path / name).is_file()]

    def system_prompt(self) -> str:
        """The non-empty markdown files in :data:`PROMPT_FILES` order, blank-line separated."""
        parts = (read_text(self.path / name) for name in PROMPT_FILES)
        return "\n\n".join(text for part in parts if part and (text := part.strip()))
