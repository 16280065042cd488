"""An agent's tools: its configured toolsets, loaded and started once, as one registry.

:meth:`AgentTools.load` reads ``toolsets`` and ``tools`` from the agent's config.json and
fails *there*, with a :class:`~agentkit.errors.ConfigError` naming the file and the field,
when a toolset cannot be loaded or started, two toolsets define the same tool name, a flag
override names a tool the toolset lacks, or the allow-list names a tool no toolset has. An
agent without ``toolsets`` has no tools. Tools given in Python (``Agent.open(tools=[…])``)
join them as the toolset ``python``, outside the allow-list.

The registry it builds scrubs every toolset's secrets. :meth:`AgentTools.close` closes every
toolset (an MCP server's process group included).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any

from pydantic import JsonValue

from agentkit._extras import require
from agentkit.agent_folder import AgentFolder
from agentkit.config import (
    McpToolsetConfig,
    McpUrlToolsetConfig,
    PythonToolsetConfig,
    ToolFlags,
    ToolsetConfig,
)
from agentkit.errors import ConfigError, MissingExtraError, UsageError
from agentkit.tools.decorator import ToolContext
from agentkit.tools.registry import (
    DEFAULT_MAX_OUTPUT_CHARS,
    Tool,
    ToolArgumentsError,
    ToolRegistry,
    ToolResult,
)
from agentkit.tools.toolsets import FunctionToolset, Toolset, ToolsetError, load_python_toolset

__all__ = ["PYTHON_TOOLSET", "AgentTools", "agent_tools", "parse_json_args", "run_tool"]

#: the name of the toolset holding tools given in Python (``Agent.open(tools=[…])``)
PYTHON_TOOLSET = "python"


class AgentTools:
    """The started toolsets of one agent and the registry over them (use it as a context
    manager, or call :meth:`close`)."""

    def __init__(
        self,
        toolsets: Sequence[Toolset],
        registry: ToolRegistry,
    ) -> None:
        self.toolsets = tuple(toolsets)
        self.registry = registry
        self._closed = False

    def __repr__(self) -> str:
        names = [toolset.name for toolset in self.toolsets]
        return f"AgentTools(toolsets={names!r}, tools={list(self.registry.names())!r})"

    @classmethod
    def load(
        cls,
        folder: AgentFolder,
        extra: Iterable[object] = (),
        *,
        max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
    ) -> AgentTools:
        """Load and start the toolsets *folder*'s config names, plus *extra* tools (functions
        or tools given in Python). Any failure closes what was started and raises."""
        config_path = folder.files.config
        context = ToolContext(agent_id=folder.agent_id, agent_dir=folder.path)
        started: list[Toolset] = []
        try:
            for index, spec in enumerate(folder.config.toolsets):
                where = f"toolsets.{index}"
                try:
                    toolset = _start(spec, context)
                except MissingExtraError:
                    raise  # one line naming the pip command, not a config problem
                except (ToolsetError, UsageError) as error:
                    raise ConfigError(
                        config_path, where, f"cannot load the toolset: {error}"
                    ) from error
                started.append(toolset)
                _check_flags(toolset, spec.flags, config_path, where)
            tools = _unique_tools(started, folder.config.toolsets, config_path)
            allow = folder.config.tools
            if allow is not None:
                unknown = [name for name in allow if name not in tools]
                if unknown:
                    known = ", ".join(tools) or "(none: the agent has no toolsets)"
                    raise ConfigError(
                        config_path,
                        "tools",
                        f"no toolset has the tool {unknown[0]!r} (known: {known})",
                    )
                tools = {name: tools[name] for name in dict.fromkeys(allow)}
            given = list(extra)
            if given:
                python = FunctionToolset(PYTHON_TOOLSET, given, context=context)
                started.append(python)
                for tool in python.tools():
                    if tool.name in tools:
                        raise UsageError(
                            f"the tool {tool.name!r} given in Python is also defined by "
                            f"toolset {tools[tool.name].source!r}"
                        )
                    tools[tool.name] = tool
        except BaseException:
            for toolset in reversed(started):
                with contextlib.suppress(Exception):
                    toolset.close()
            raise
        everything = tuple(started)

        def secrets() -> Iterator[str]:
            for toolset in everything:
                yield from toolset.secrets()

        patterns = [pattern for toolset in everything for pattern in toolset.secret_patterns()]
        registry = ToolRegistry(
            tools.values(),
            max_output_chars=max_output_chars,
            secrets=secrets,
            secret_patterns=patterns,
        )
        return cls(everything, registry)

    def toolset(self, name: str) -> Toolset:
        """The toolset called *name*."""
        for toolset in self.toolsets:
            if toolset.name == name:
                return toolset
        known = ", ".join(toolset.name for toolset in self.toolsets) or "(none)"
        raise UsageError(f"no toolset named {name!r} (toolsets: {known})")

    def snapshot(self) -> dict[str, JsonValue]:
        """Every stateful toolset's :meth:`~Toolset.snapshot`, by toolset name."""
        return {toolset.name: toolset.snapshot() for toolset in self.toolsets if toolset.has_state}

    def seed(self, states: Mapping[str, JsonValue]) -> None:
        """Seed each named toolset with its state (see :meth:`Toolset.seed`)."""
        for name, state in states.items():
            self.toolset(name).seed(state)

    def run(self, name: str, json_args: str) -> ToolResult:
        """Run one tool with arguments given as JSON text (what ``agentkit tool`` does)."""
        return self.registry.run(name, parse_json_args(name, json_args))

    def close(self) -> None:
        """Close every toolset, last started first (idempotent)."""
        if self._closed:
            return
        self._closed = True
        for toolset in reversed(self.toolsets):
            with contextlib.suppress(Exception):
                toolset.close()

    async def aclose(self) -> None:
        """:meth:`close` for async callers (MCP servers are stopped without blocking)."""
        if self._closed:
            return
        self._closed = True
        for toolset in reversed(self.toolsets):
            with contextlib.suppress(Exception):
                await toolset.aclose()

    def __enter__(self) -> AgentTools:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _start(spec: ToolsetConfig, context: ToolContext) -> Toolset:
    if isinstance(spec, PythonToolsetConfig):
        return load_python_toolset(spec.python, context, spec.name)
    feature = f"the MCP toolset {spec.name!r} of agent {context.agent_id!r}"
    require("mcp", feature, "mcp")
    from agentkit.tools.mcp import McpToolset  # the mcp package loads only when used

    if isinstance(spec, McpToolsetConfig):
        toolset = McpToolset.stdio(
            spec.name, spec.mcp, env=spec.env, cwd=context.agent_dir, timeout=spec.timeout
        )
    else:
        assert isinstance(spec, McpUrlToolsetConfig)
        toolset = McpToolset.http(
            spec.name, spec.mcp_url, headers=spec.headers, timeout=spec.timeout
        )
    toolset.start()
    return toolset


def _check_flags(
    toolset: Toolset, flags: Mapping[str, ToolFlags], config_path: Path, where: str
) -> None:
    own = {tool.name for tool in toolset.tools()}
    for name in flags:
        if name not in own:
            raise ConfigError(
                config_path,
                f"{where}.flags.{name}",
                f"toolset {toolset.name!r} has no tool {name!r} (it has: {', '.join(sorted(own))})",
            )


def _unique_tools(
    toolsets: Sequence[Toolset], specs: Sequence[ToolsetConfig], config_path: Path
) -> dict[str, Tool[Any]]:
    """Every tool by name, flags overridden as configured; a name twice is a ConfigError."""
    tools: dict[str, Tool[Any]] = {}
    for index, (toolset, spec) in enumerate(zip(toolsets, specs, strict=True)):
        for tool in toolset.tools():
            if tool.name in tools:
                raise ConfigError(
                    config_path,
                    f"toolsets.{index}",
                    f"the tool {tool.name!r} of toolset {toolset.name!r} is also defined by "
                    f"toolset {tools[tool.name].source!r} (tool names must be unique)",
                )
            flags = spec.flags.get(tool.name)
            flagged = (
                tool
                if flags is None
                else tool.with_flags(side_effect=flags.side_effect, live_state=flags.live_state)
            )
            if flags is not None and flags.examples is not None:
                flagged = replace(flagged, examples=flags.examples)
            if flags is not None and flags.consent is not None:
                flagged = replace(flagged, consent=" ".join(flags.consent.split()))
            tools[tool.name] = _sourced(flagged, toolset)
    return tools


def _sourced(tool: Tool[Any], toolset: Toolset) -> Tool[Any]:
    return tool if tool.source == toolset.name else replace(tool, source=toolset.name)


# -- entry points for the CLI and the runtime ---------------------------------------------------


@contextlib.contextmanager
def agent_tools(folder: AgentFolder) -> Iterator[ToolRegistry]:
    """The agent's tools (its config's toolsets, allow-list applied), closed on exit."""
    with AgentTools.load(folder) as tools:
        yield tools.registry


def parse_json_args(tool: str, json_args: str) -> dict[str, object]:
    """Arguments given as JSON text (``""`` means ``{}``); anything but an object is a
    :class:`ToolArgumentsError`."""
    if not json_args.strip():
        return {}
    try:
        value = json.loads(json_args)
    except (json.JSONDecodeError, RecursionError, ValueError) as error:
        raise ToolArgumentsError(tool, [("", f"not valid JSON ({error})")]) from None
    if not isinstance(value, Mapping):
        raise ToolArgumentsError(tool, [("", "arguments must be a JSON object")])
    return {str(key): item for key, item in value.items()}


def run_tool(folder: AgentFolder, name: str, json_args: str) -> ToolResult:
    """Run one of the agent's tools once, as ``agentkit tool AGENT TOOL 'JSON_ARGS'`` does.

    Raises :class:`~agentkit.tools.UnknownToolError` and
    :class:`~agentkit.tools.ToolArgumentsError` (both usage errors) before anything runs.
    """
    with AgentTools.load(folder) as tools:
        return tools.run(name, json_args)
