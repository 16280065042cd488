"""Toolsets: where an agent's tools come from.

A :class:`Toolset` is a named source of tools with a lifetime: Python functions
(:class:`FunctionToolset`), an MCP server (:class:`~agentkit.tools.mcp.McpToolset`), or a
domain of its own (a subclass of :class:`Toolset` that owns its database). Besides
its tools a toolset may offer its *state*: :meth:`Toolset.snapshot` (what the evaluation
harness checks after a run) and :meth:`Toolset.seed` (what a scenario starts from), and the
secret values it stores (scrubbed from every tool result and log).

A Python toolset is named in an agent's config as ``{"python": "tools.py"}`` (a file in the
agent's folder) or ``{"python": "package.module:attribute"}`` (an installed package). What it
provides is, in this order: the attribute given after ``:``; else the module's ``toolset``;
else every :func:`~agentkit.tools.tool`-decorated function in the module. Each of these may
be a :class:`Toolset`, a tool or a list of tools, or a factory called with the agent's
:class:`~agentkit.tools.ToolContext` that returns one of those.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any

from pydantic import BaseModel, JsonValue

from agentkit.errors import UsageError
from agentkit.tools.decorator import ToolContext, ToolFunction, as_tool
from agentkit.tools.registry import Tool, ToolDefinitionError

__all__ = [
    "FunctionToolset",
    "Toolset",
    "ToolsetError",
    "load_python_toolset",
]


class ToolsetError(UsageError):
    """A toolset could not be loaded or started (the loader adds the config file and field)."""


class Toolset(ABC):
    """A named source of tools. Subclasses implement :meth:`tools`; the rest is optional.

    ``state_model`` (optional) is the pydantic model of what :meth:`seed` accepts, so that a
    scenario's starting state is validated before any run.
    """

    name: str = ""
    state_model: type[BaseModel] | None = None

    @abstractmethod
    def tools(self) -> Sequence[Tool[Any]]:
        """The toolset's tools (fixed once it has started)."""

    def secrets(self) -> Iterable[str]:
        """Secret values the toolset stores, to scrub from results and logs."""
        return ()

    def secret_patterns(self) -> Sequence[str]:
        """Regular expressions for the formats of the secrets the toolset's domain uses
        (its key formats): what they match is masked wherever a turn writes or shows text,
        a key the user types in a request included (:class:`~agentkit.tools.SecretMask`)."""
        return ()

    @property
    def has_state(self) -> bool:
        """True when the toolset overrides :meth:`snapshot`."""
        return type(self).snapshot is not Toolset.snapshot

    def snapshot(self) -> JsonValue:
        """The toolset's state now, as plain JSON (for the evaluation harness)."""
        raise UsageError(f"toolset {self.name!r} has no state to snapshot")

    def seed(self, state: JsonValue) -> None:
        """Put *state* in place before a run (a scenario's starting state)."""
        raise UsageError(f"toolset {self.name!r} cannot be seeded")

    def close(self) -> None:  # noqa: B027 - optional: most toolsets hold nothing
        """Release what the toolset holds (files, processes). Idempotent."""

    async def aclose(self) -> None:
        """:meth:`close` for async callers."""
        self.close()

    def __enter__(self) -> Toolset:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class FunctionToolset(Toolset):
    """Tools from Python functions (``@tool``-decorated, plain typed functions, or
    :class:`Tool` values), bound to *context* when they ask for a :class:`ToolContext`.

    The optional callables give it a state: *snapshot* returns it as JSON, *seed* puts a
    starting state in place (validated first by *state_model* when given), *secrets* returns
    the secret values the tools store, *secret_patterns* their formats, *close* releases
    what they hold.
    """

    def __init__(
        self,
        name: str,
        tools: Iterable[object],
        *,
        context: ToolContext | None = None,
        snapshot: Callable[[], JsonValue] | None = None,
        seed: Callable[[JsonValue], None] | None = None,
        state_model: type[BaseModel] | None = None,
        secrets: Callable[[], Iterable[str]] | None = None,
        secret_patterns: Sequence[str] = (),
        close: Callable[[], None] | None = None,
    ) -> None:
        self.name = name
        self._patterns = tuple(secret_patterns)
        self.state_model = state_model
        self._tools = tuple(as_tool(item, context) for item in tools)
        self._snapshot = snapshot
        self._seed = seed
        self._secrets = secrets
        self._close = close

    def __repr__(self) -> str:
        return f"FunctionToolset({self.name!r}, {[tool.name for tool in self._tools]!r})"

    def tools(self) -> Sequence[Tool[Any]]:
        return self._tools

    @property
    def has_state(self) -> bool:
        return self._snapshot is not None

    def snapshot(self) -> JsonValue:
        if self._snapshot is None:
            return super().snapshot()
        return self._snapshot()

    def seed(self, state: JsonValue) -> None:
        if self._seed is None:
            super().seed(state)
            return
        if self.state_model is not None:
            self.state_model.model_validate(state)
        self._seed(state)

    def secrets(self) -> Iterable[str]:
        return self._secrets() if self._secrets is not None else ()

    def secret_patterns(self) -> Sequence[str]:
        return self._patterns

    def close(self) -> None:
        close, self._close = self._close, None
        if close is not None:
            close()


# -- loading Python toolsets ---------------------------------------------------------------------


def load_python_toolset(spec: str, context: ToolContext, name: str | None = None) -> Toolset:
    """The toolset *spec* names: ``"file.py"`` / ``"file.py:attribute"`` (relative to the
    agent's folder, which it must stay inside) or ``"package.module[:attribute]"``.

    Raises :class:`ToolsetError` saying what went wrong (the file is missing, importing it
    raised, it defines no tools, …).
    """
    target, _, attribute = spec.partition(":")
    target, attribute = target.strip(), attribute.strip()
    if target.endswith(".py"):
        module = _load_file(context.agent_dir, target)
        default_name = Path(target).stem
    else:
        module = _import(target)
        default_name = target.rsplit(".", 1)[-1]
    if attribute:
        if not hasattr(module, attribute):
            raise ToolsetError(f"{target} has no attribute {attribute!r}")
        value: object = getattr(module, attribute)
    elif hasattr(module, "toolset"):
        value = module.toolset
    else:
        value = [item for item in vars(module).values() if isinstance(item, ToolFunction)]
        if not value:
            raise ToolsetError(
                f"{target} defines no tools (decorate functions with @tool, or define 'toolset')"
            )
    toolset = _resolve(value, context, name or default_name, spec)
    if name is not None:
        toolset.name = name
    return toolset


def _resolve(value: object, context: ToolContext, name: str, spec: str) -> Toolset:
    if isinstance(value, Toolset):
        return value
    if isinstance(value, ToolFunction | Tool):
        return FunctionToolset(name, [value], context=context)
    if isinstance(value, list | tuple):
        return FunctionToolset(name, value, context=context)
    if (isinstance(value, type) and issubclass(value, Toolset)) or callable(value):
        value = _call_factory(value, context, spec)
    else:
        raise ToolsetError(f"{spec} is neither a toolset, a tool, a list of tools nor a factory")
    if isinstance(value, Toolset):
        return value
    if isinstance(value, ToolFunction | Tool | list | tuple):
        return _resolve(value, context, name, spec)
    raise ToolsetError(f"the factory {spec} returned {type(value).__name__}, not a toolset")


def _call_factory(
    factory: Callable[[ToolContext], object], context: ToolContext, spec: str
) -> object:
    try:
        return factory(context)
    except UsageError:
        raise
    except Exception as error:
        raise ToolsetError(f"{spec} raised {type(error).__name__}: {error}") from error


def _load_file(agent_dir: Path, relative: str) -> ModuleType:
    """Execute an agent's tools file as a module of its own (registered under a private
    name, so dataclasses and pydantic models in it resolve their annotations)."""
    root = agent_dir.resolve()
    path = (root / relative).resolve()
    if not path.is_relative_to(root):
        raise ToolsetError(f"{relative} is outside the agent's folder")
    if not path.is_file():
        raise ToolsetError(f"{relative} does not exist in {agent_dir}")
    digest = hashlib.sha256(str(path).encode("utf-8")).hexdigest()[:12]
    module_name = f"agentkit_toolset_{path.stem}_{digest}"
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    if module_spec is None or module_spec.loader is None:
        raise ToolsetError(f"{relative} cannot be loaded as Python")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    try:
        module_spec.loader.exec_module(module)
    except ToolDefinitionError as error:
        sys.modules.pop(module_name, None)
        raise ToolsetError(f"{relative}: {error}") from error
    except Exception as error:
        sys.modules.pop(module_name, None)
        raise ToolsetError(f"{relative} raised {type(error).__name__}: {error}") from error
    return module


def _import(module_name: str) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is not None and module_name.startswith(error.name):
            raise ToolsetError(f"no module named {module_name!r} is installed") from None
        raise ToolsetError(f"importing {module_name} failed: {error}") from error
    except ToolDefinitionError as error:
        raise ToolsetError(f"{module_name}: {error}") from error
    except Exception as error:
        raise ToolsetError(
            f"importing {module_name} raised {type(error).__name__}: {error}"
        ) from error
