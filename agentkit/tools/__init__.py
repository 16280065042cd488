"""Tools agents call: the registry, secret masking, and the (simulated) desk domain.

``ToolRegistry`` validates arguments before any handler runs and bounds and masks every
result; ``desk_tools(open_desk(workspace))`` is the desk agent's tool set, and
``run_tool(folder_or_workspace, name, json_args)`` runs one call (what the CLI does).
"""

from agentkit.tools.desk import (
    DeskDatabase,
    DeskError,
    agent_tools,
    desk_tools,
    open_desk,
    parse_json_args,
    run_tool,
)
from agentkit.tools.registry import (
    DEFAULT_MAX_OUTPUT_CHARS,
    Tool,
    ToolArgumentsError,
    ToolCrashedError,
    ToolDefinitionError,
    ToolFailedError,
    ToolRegistry,
    ToolResult,
    UnknownToolError,
)
from agentkit.tools.secrets import is_secret_key, mask_secrets, mask_value, scrub_text

__all__ = [
    "DEFAULT_MAX_OUTPUT_CHARS",
    "DeskDatabase",
    "DeskError",
    "Tool",
    "ToolArgumentsError",
    "ToolCrashedError",
    "ToolDefinitionError",
    "ToolFailedError",
    "ToolRegistry",
    "ToolResult",
    "UnknownToolError",
    "agent_tools",
    "desk_tools",
    "is_secret_key",
    "mask_secrets",
    "mask_value",
    "open_desk",
    "parse_json_args",
    "run_tool",
    "scrub_text",
]
