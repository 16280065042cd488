"""Text templates in files, overridable per agent, so a wording experiment needs no code change.

A template is ``NAME.md`` written as a :class:`string.Template` (``$name`` placeholders; ``$$``
for a literal dollar sign). A package holds the defaults in its ``prompts/`` folder; an agent
overrides one by placing a file of the same name in ``agents/{agentId}/prompts/``. The planner's
prompts, the questions and consents of :mod:`agentkit.language`, the simulated user's and the
judges' prompts all load this way.
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path
from string import Template

from agentkit.filecache import read_text
from agentkit.layout import AgentPaths

__all__ = ["load_template", "render_template"]


def load_template(name: str, agent_dir: Path | None, package: str) -> Template:
    """The template *name*: the agent folder's ``prompts/{name}.md`` if present, else
    *package*'s ``prompts/{name}.md``."""
    if agent_dir is not None:
        override = read_text(AgentPaths(agent_dir).prompt(name))
        if override is not None:
            return _template(override)
    return _package_template(package, name)


def render_template(name: str, agent_dir: Path | None, package: str, **values: str) -> str:
    """Fill *name* with *values*; a placeholder *values* lacks stays as written (an override
    may use fewer or other placeholders without breaking)."""
    return load_template(name, agent_dir, package).safe_substitute(values).strip()


@functools.cache
def _package_template(package: str, name: str) -> Template:
    """The package's own template (it changes only with the installed package)."""
    text = resources.files(package).joinpath(f"prompts/{name}.md").read_text(encoding="utf-8")
    return Template(text)


@functools.lru_cache(maxsize=256)
def _template(text: str) -> Template:
    return Template(text)
