"""The MCP servers an ACP client passes in ``session/new`` or ``session/load`` (``mcpServers``):
started for that session and added to its tools.

* Each server becomes an :class:`~agentkit.tools.mcp.McpToolset` (stdio: ``command`` plus
  ``args``, no shell, the listed ``env`` over the minimal environment, run in the session's
  cwd; streamable HTTP: ``url`` and ``headers``), with the process hygiene of the agent's own
  MCP toolsets. SSE (and ACP-transport) servers are refused: initialize does not offer them.
* They start when the session is created, so a server that does not start, or a tool name the
  agent or another server already has, refuses the request (``-32602``) with everything that
  was started closed again, never a failure mid-turn.
* **The agent's policy decides** (``acp.client_mcp`` in its ``config.json``,
  :class:`~agentkit.config.ClientMcpConfig`): ``off`` (the default) starts none, ``all``
  every one, ``allow`` only the servers it names, and of those only the tools it lists.
  Tools named in ``read_only`` run without consent (a client's read tools often carry no
  ``readOnlyHint``). Chat-engine agents never start them: they use no tools. A server left
  out is logged, never an error: the client offers, the agent chooses.
* The session's prompts run on an :class:`~agentkit.agent.Agent` of their own: the served
  agent's folder, conversation store, config store (its memory records stay where the
  agent's are: PostgreSQL with ``--store``) and model, its configured toolsets, plus the
  servers' tools.
  :meth:`SessionTools.aclose` ends it (its live sessions, its toolsets, the servers' process
  groups) but not the model, which stays the served agent's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import acp
from acp.schema import HttpMcpServer, McpServerStdio

from agentkit.agent import Agent
from agentkit.config import ClientMcpConfig
from agentkit.errors import UsageError
from agentkit.runtime import AgentRuntime
from agentkit.tools import Tool
from agentkit.tools.mcp import McpToolset

__all__ = ["SessionTools", "allowed_servers", "open_session_tools", "policy_tools"]

log = logging.getLogger("agentkit.acp")


@dataclass
class SessionTools:
    """A session's own agent and the client's MCP servers its tools come from."""

    agent: Agent
    toolsets: tuple[McpToolset, ...]
    _closed: bool = field(default=False, repr=False)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        runtime = self.agent.runtime
        await runtime.pool.close_all()  # not agent.aclose(): the model is the served agent's
        await runtime.load_tools().aclose()
        runtime.close_resources()
        await _close(self.toolsets)


def _toolset(server: object, cwd: str) -> McpToolset:
    if isinstance(server, McpServerStdio):
        env = {variable.name: variable.value for variable in server.env}
        return McpToolset.stdio(server.name, [server.command, *server.args], env=env, cwd=cwd)
    if isinstance(server, HttpMcpServer):
        headers = {header.name: header.value for header in server.headers}
        return McpToolset.http(server.name, server.url, headers=headers)
    kind = getattr(server, "type", None)
    raise acp.RequestError.invalid_params(
        {
            "code": "invalid_request",
            "message": f"MCP servers of type {kind!r} are not supported (stdio and http are)",
        }
    )


def _check_names(agent: Agent, tools: Sequence[Tool[Any]]) -> None:
    """A tool name may come from one place only: the agent or one of the servers."""
    owners = dict.fromkeys(agent.tools.names(), "the agent")
    for tool in tools:
        if tool.name in owners:
            raise UsageError(
                f"the MCP server {tool.source!r} has a tool named {tool.name!r}, "
                f"and so has {owners[tool.name]}"
            )
        owners[tool.name] = f"the MCP server {tool.source!r}"


def allowed_servers(policy: ClientMcpConfig, servers: Sequence[object]) -> list[object]:
    """The client's *servers* the policy lets start, in the client's order."""
    if policy.mode == "off":
        log.info("client MCP servers not started (acp.client_mcp.mode is 'off')")
        return []
    if policy.mode == "all":
        return list(servers)
    kept = [server for server in servers if getattr(server, "name", None) in policy.servers]
    left = [str(getattr(server, "name", "?")) for server in servers if server not in kept]
    if left:
        log.info("client MCP servers not in acp.client_mcp.servers, not started: %s", left)
    return kept


def policy_tools(policy: ClientMcpConfig, toolset: McpToolset) -> list[Tool[Any]]:
    """The *toolset*'s tools the policy keeps, the ``read_only`` ones marked as reads."""
    listed = policy.servers.get(toolset.name, ()) if policy.mode == "allow" else ()
    tools = [tool for tool in toolset.tools() if not listed or tool.name in listed]
    missing = sorted(set(listed) - {tool.name for tool in tools})
    if missing:
        log.warning("the MCP server %r has no tools named %s", toolset.name, missing)
    reads = set(policy.read_only)
    return [
        tool.with_flags(side_effect=False) if _is_read(reads, toolset.name, tool.name) else tool
        for tool in tools
    ]


def _is_read(reads: set[str], server: str, tool: str) -> bool:
    return bool({tool, f"{server}:{tool}", f"{server}:*"} & reads)


async def open_session_tools(agent: Agent, servers: object, cwd: str) -> SessionTools | None:
    """Start the client's *servers* and the session agent over them (None: no servers).
    Raises (a :class:`UsageError` or an ``acp.RequestError``) with nothing left running."""
    if not servers:
        return None
    if not isinstance(servers, list):
        raise acp.RequestError.invalid_params({"message": "mcpServers must be a list"})
    if agent.config.engine == "chat":
        log.info("client MCP servers not started: a chat-engine agent uses no tools")
        return None
    policy = agent.config.acp.client_mcp
    kept = allowed_servers(policy, servers)
    if not kept:
        return None
    toolsets = [_toolset(server, cwd) for server in kept]
    try:
        for toolset in toolsets:
            await asyncio.to_thread(toolset.start)
        tools = [tool for toolset in toolsets for tool in policy_tools(policy, toolset)]
        _check_names(agent, tools)
        session_agent = Agent(
            AgentRuntime(
                agent.folder,
                agent.store,
                model=agent.model,
                tools=tools,
                config_store=agent.runtime.memory.store,  # the configured one, not agentkit.db
            )
        )
        await asyncio.to_thread(session_agent.runtime.load_tools)
    except BaseException:
        await _close(toolsets)
        raise
    return SessionTools(session_agent, tuple(toolsets))


async def _close(toolsets: Sequence[McpToolset]) -> None:
    for toolset in reversed(toolsets):
        with contextlib.suppress(Exception):
            await toolset.aclose()
