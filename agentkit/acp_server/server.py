"""Running ``agentkit acp AGENT``: one agent, one client, JSON-RPC on stdio until EOF.

The order of things, and why:

1. The agent is opened before stdio is touched, so an unknown agent or an invalid config
   is one line on stderr and exit status 2 (the CLI's rule), not a silent protocol hang.
2. :func:`~agentkit.acp_server.stdio.claim_stdout` keeps fd 1 for protocol frames; logs
   go to stderr (an editor shows them in its agent log).
3. The library's ``AgentSideConnection`` runs on :class:`~agentkit.acp_server.stdio.
   GuardedStdio`, never on raw stdin, so hostile input cannot end the process.
4. At end of input (the client closed our stdin), SIGTERM, SIGINT or SIGHUP, running prompts
   are cancelled at their next safe point, the agent's sessions and their processes are
   closed, and the process exits 0: no orphans.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from pathlib import Path
from typing import BinaryIO, cast

import acp
from acp.agent.connection import AgentSideConnection

from agentkit.acp_server.sessions import AcpAgentServer
from agentkit.acp_server.stdio import GuardedStdio, claim_stdout, open_stdio
from agentkit.agent import Agent
from agentkit.models.spec import parse_model_spec, resolve_model_spec

__all__ = ["run_server", "serve_stdio"]

log = logging.getLogger("agentkit.acp")

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def serve_stdio(
    agent_id: str,
    *,
    data_dir: Path | str | None = None,
    model: str | None = None,
    store: str | None = None,
) -> None:
    """What ``agentkit acp`` runs; returns when the client has gone."""
    agent = Agent.open(agent_id, data_dir=data_dir, model=model, store=store)
    parse_model_spec(resolve_model_spec(model, agent.config.model))  # a typo fails here
    protocol_out = claim_stdout()
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format="agentkit acp %(levelname)s %(name)s: %(message)s",
        force=True,
    )
    log.info("serving %s (engine %s) on stdio", agent.id, agent.config.engine)
    asyncio.run(_serve(agent, protocol_out))


async def _serve(agent: Agent, protocol_out: BinaryIO) -> None:
    transport = await open_stdio(protocol_out)
    await run_server(agent, transport)


async def run_server(agent: Agent, transport: GuardedStdio) -> None:
    """Serve *agent* on *transport* until end of input or a stop signal."""
    server = AcpAgentServer(agent)
    # the server implements the methods it supports; the library answers -32601 for the rest
    connection = AgentSideConnection(cast("acp.Agent", server), transport, listening=False)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in _STOP_SIGNALS:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    listening = asyncio.create_task(connection.listen(), name="acp listen")
    stopping = asyncio.create_task(stop.wait(), name="acp stop")
    try:
        await asyncio.wait({listening, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        reason = "a stop signal" if stop.is_set() else "end of input"
        log.info("stopping after %s (guard: %d answered, %d dropped)", reason,
                 transport.answered, transport.dropped)  # fmt: skip
        await server.shutdown()
        listening.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await listening
        await connection.close()
        for sig in _STOP_SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(sig)
