"""Planner prompts are template files, so a prompt experiment needs no code change.

Each prompt is ``NAME.md`` (see :data:`PROMPT_NAMES`) written as a
:class:`string.Template` (``$name`` placeholders; ``$$`` for a literal dollar sign, JSON braces
need no escaping). The package holds the defaults; an agent overrides one by placing a file of
the same name in ``agents/{agentId}/prompts/``. The same mechanism serves the prompts of
other packages (the evaluation's simulated user and judges): :func:`load_template`.
"""

from __future__ import annotations

from pathlib import Path
from string import Template

from agentkit.errors import ConfigError
from agentkit.templates import load_template as _load

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
    """The template *name* of *package* (:func:`agentkit.templates.load_template`)."""
    return _load(name, agent_dir, package)


def render_prompt(name: str, agent_dir: Path | None = None, **values: str) -> str:
    """Fill *name* with *values*; a placeholder the template names but *values* lacks stays
    as written (an override may use fewer or different placeholders without breaking)."""
    return load_prompt(name, agent_dir).safe_substitute(values).strip()
