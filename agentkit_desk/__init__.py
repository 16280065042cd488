"""The desk: an example domain for agentkit's planner — a simulated trading-desk
configuration (model configs, exchange accounts, traders, preferences; no exchange is ever
contacted).

It is a toolset like any other, outside agentkit's core: the desk agents name it in their
config.json (``"toolsets": [{"python": "agentkit_desk:toolset"}]``), their live-state
keywords are in their own config, and the evaluation harness reaches its database only
through the toolset's ``snapshot`` and ``seed``.
"""

from agentkit_desk.database import (
    DESK_FILE,
    DeskDatabase,
    DeskError,
    ExchangeConfig,
    ModelConfig,
    Trader,
    open_desk,
)
from agentkit_desk.toolset import DeskState, DeskToolset, desk_tools, run_desk_tool, toolset

__all__ = [
    "DESK_FILE",
    "DeskDatabase",
    "DeskError",
    "DeskState",
    "DeskToolset",
    "ExchangeConfig",
    "ModelConfig",
    "Trader",
    "desk_tools",
    "open_desk",
    "run_desk_tool",
    "toolset",
]
