"""``agentkit init NAME``: a new agent folder that works at once.

The folder gets the prompt files, a valid config.json and the working folders; a planner agent
also gets ``tools.py`` with two example tools (a read and a side-effecting write, storing
reminders in its workspace) and ``script.json``, replies for the scripted model, so
``agentkit send NAME "what reminders do I have?" --model scripted:script.json`` runs a whole
planner turn with no model at all. The planner uses strategy ``tool_loop`` with longer stage
timeouts, which is what the small embedded model copes with.

Nothing is overwritten: an existing folder is a :class:`~agentkit.errors.UsageError`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from agentkit.agent_folder import AGENT_SUBDIRS
from agentkit.errors import UsageError
from agentkit.layout import DataLayout

__all__ = ["init_agent"]

Engine = Literal["chat", "planner"]

_PROMPTS: dict[str, str] = {
    "identity.md": "# Identity\n\nYou are {name}, an assistant built with agentkit.\n",
    "soul.md": "# Character\n\nHelpful, candid and brief.\n",
    "agent.md": (
        "# How you work\n\n"
        "- Answer directly; ask one clarifying question when a request is ambiguous.\n"
        "- Reply in the language the user writes in.\n"
    ),
    "user.md": "# The user\n\nDescribe who the agent works for here.\n",
    "heartbeat.md": "# Routines\n\nNone: you act only when the user writes.\n",
}
_CHAT_TOOLS = "# Tools\n\nYou have no tools: you answer from the conversation alone.\n"
_PLANNER_TOOLS = (
    "# Tools\n\n"
    "Reads (their answers can change outside the chat): list_reminders.\n\n"
    "Changes (need the user's confirmation): add_reminder.\n"
)

TOOLS_PY = '''"""This agent's tools: typed Python functions made tools with ``@tool``.

The function's name, docstring and type hints are the tool's name, description and argument
schema. ``side_effect=True`` makes the planner ask the user before every call;
``live_state=True`` marks a read whose answer can change outside the chat. A parameter typed
``ToolContext`` is not an argument: it tells the tool where the agent's workspace is.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

from agentkit.tools import ToolContext, tool


def _path(ctx: ToolContext) -> Path:
    return ctx.workspace / "reminders.json"


def _load(ctx: ToolContext) -> list[dict[str, str]]:
    path = _path(ctx)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []


@tool(live_state=True)
def list_reminders(ctx: ToolContext) -> dict[str, list[dict[str, str]]]:
    """List the saved reminders."""
    return {"reminders": _load(ctx)}


@tool(side_effect=True)
def add_reminder(
    ctx: ToolContext,
    text: Annotated[str, "what to remember"],
    when: Annotated[str, "when, in the user's words (e.g. tomorrow 9am)"] = "",
) -> dict[str, object]:
    """Save a reminder."""
    reminders = [*_load(ctx), {"text": text, "when": when}]
    _path(ctx).parent.mkdir(parents=True, exist_ok=True)
    _path(ctx).write_text(json.dumps(reminders, ensure_ascii=False), encoding="utf-8")
    return {"saved": text, "count": len(reminders)}
'''

#: the scripted model's replies for one ``tool_loop`` turn: the router picks the read from the
#: request by itself (its ranking leads clearly), the model then answers from its result
SCRIPT: dict[str, list[object]] = {
    "act": ["You have no reminders yet. Tell me what to remember and I will save it."]
}


def _config(agent_id: str, engine: Engine) -> dict[str, object]:
    config: dict[str, object] = {
        "name": agent_id,
        "description": f"A new {engine} agent (agentkit init).",
        "model": "llama",
        "engine": engine,
        "max_turns": 20,
    }
    if engine == "planner":
        config["toolsets"] = [{"python": "tools.py"}]
        config["planner"] = {
            "strategy": "tool_loop",
            "tool_choice": "router",
            "router_embedder": "wordllama",
            "stage_timeout_scale": 6,
            "for_embedded_model": {"preset": "small_model"},
            "live_state_keywords": ["reminder", "提醒"],
        }
    return config


def init_agent(data_dir: Path, agent_id: str, *, engine: Engine = "planner") -> Path:
    """Create ``{data_dir}/agents/{agent_id}`` (see the module docstring); its path."""
    files = DataLayout(data_dir).agent(agent_id)  # the id is checked
    folder = files.dir
    if folder.exists():
        raise UsageError(f"{folder} already exists; choose another name or remove it")
    folder.mkdir(parents=True)
    for sub in AGENT_SUBDIRS:
        if sub != "conversations":
            (folder / sub).mkdir()
            (folder / sub / ".gitkeep").touch()
    for name, text in _PROMPTS.items():
        (folder / name).write_text(text.format(name=agent_id), encoding="utf-8")
    planner = engine == "planner"
    (folder / "tools.md").write_text(_PLANNER_TOOLS if planner else _CHAT_TOOLS, encoding="utf-8")
    config = json.dumps(_config(agent_id, engine), ensure_ascii=False, indent=2) + "\n"
    files.config.write_text(config, encoding="utf-8")
    if planner:
        (folder / "tools.py").write_text(TOOLS_PY, encoding="utf-8")
        script = json.dumps(SCRIPT, ensure_ascii=False, indent=2) + "\n"
        (folder / "script.json").write_text(script, encoding="utf-8")
    return folder
