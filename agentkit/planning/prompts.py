"""Planner prompts are template files, so a prompt experiment needs no code change.

Each prompt is ``NAME.md`` (see :data:`PROMPT_NAMES`) written as a
:class:`string.Template` (``$name`` placeholders; ``$$`` for a literal dollar sign, JSON braces
need no escaping). The package holds the defaults; an agent overrides one by placing a file of
the same name in ``agents/{agentId}/prompts/``. The same mechanism serves the prompts of
other packages (the evaluation's simulated user and judges): :func:`load_template`.
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path
from string import Template

from agentkit.errors import ConfigError
from agentkit.filecache import read_text
from agentkit.layout import AgentPaths

__all__ = ["PROMPT_NAMES", "load_prompt", "load_template", "render_prompt"]

PROMPT_NAMES: tuple[str, ...] = (
    "plan",
    "replan",
    "next_step",
    "act",
    "classify",
    "reason",
    "respond",
    "repair",
    "route",
    "route_args",
)


def load_prompt(name: str, agent_dir: Path | None = None) -> Template:
    """The template *name*: ``{agent_dir}/prompts/{name}.md`` if present, else the package's."""
    if name not in PROMPT_NAMES:
        raise ConfigError(Path(f"{name}.md"), "", f"is not a planner prompt ({PROMPT_NAMES})")
    return load_template(name, agent_dir)


def load_template(
    name: str, agent_dir: Path | None = None, package: str = "agentkit.planning"
) -> Template:
    """The template *name*: the agent folder's ``prompts/{name}.md`` if present, else
    *package*'s ``prompts/{name}.md``."""
    if agent_dir is not None:
        override = read_text(AgentPaths(agent_dir).prompt(name))
        if override is not None:
            return _template(override)
    return _package_template(package, name)


@functools.cache
def _package_template(package: str, name: str) -> Template:
    """The package's own template (it changes only with the installed package)."""
    text = resources.files(package).joinpath(f"prompts/{name}.md").read_text(encoding="utf-8")
    return Template(text)


@functools.lru_cache(maxsize=256)
def _template(text: str) -> Template:
    return Template(text)


def render_prompt(name: str, agent_dir: Path | None = None, **values: str) -> str:
    """Fill *name* with *values*; a placeholder the template names but *values* lacks stays
    as written (an override may use fewer or different placeholders without breaking)."""
    return load_prompt(name, agent_dir).safe_substitute(values).strip()
