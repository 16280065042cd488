"""Tools agents call: the registry, ``@tool``, toolsets (Python, MCP), secret masking.

``ToolRegistry`` validates arguments before any handler runs and bounds and masks every
result. :func:`tool` makes a typed function a tool; an agent's config.json names its
``toolsets`` (Python files or modules, MCP servers over stdio or streamable HTTP), which
:class:`AgentTools` loads and starts once. ``run_tool(folder, name, json_args)`` runs one
call (what ``agentkit tool`` does). The ``mcp`` package is imported only by
:mod:`agentkit.tools.mcp`, when an agent names an MCP server.
"""

from agentkit.calls.secrets import (
    SecretMask,
    is_secret_key,
    mask_secrets,
    mask_value,
    scrub_text,
)
from agentkit.tools.decorator import ToolContext, ToolFunction, as_tool, tool
from agentkit.tools.registry import (
    DEFAULT_MAX_OUTPUT_CHARS,
    SchemaArgs,
    Tool,
    ToolArgumentsError,
    ToolCrashedError,
    ToolDefinitionError,
    ToolFailedError,
    ToolRegistry,
    ToolResult,
    UnknownToolError,
)
from agentkit.tools.toolbox import AgentTools, agent_tools, parse_json_args, run_tool
from agentkit.tools.toolsets import FunctionToolset, Toolset, ToolsetError

__all__ = [
    "DEFAULT_MAX_OUTPUT_CHARS",
    "AgentTools",
    "FunctionToolset",
    "SchemaArgs",
    "SecretMask",
    "Tool",
    "ToolArgumentsError",
    "ToolContext",
    "ToolCrashedError",
    "ToolDefinitionError",
    "ToolFailedError",
    "ToolFunction",
    "ToolRegistry",
    "ToolResult",
    "Toolset",
    "ToolsetError",
    "UnknownToolError",
    "agent_tools",
    "as_tool",
    "is_secret_key",
    "mask_secrets",
    "mask_value",
    "parse_json_args",
    "run_tool",
    "scrub_text",
    "tool",
]
