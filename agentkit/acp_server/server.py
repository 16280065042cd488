"""Running ``agentkit acp AGENT``: one agent, one client, JSON-RPC on stdio until EOF.

The order of things, and why:

1. The agent and its model are opened before serving. When that fails (an unknown agent,
   an invalid ``config.json``, a bad ``--model``), the process still answers: every request
   up to and including ``initialize`` gets a JSON-RPC error whose message is the startup
   error (so an editor shows it instead of "connection closed"), then it exits 2 with the
   same line on stderr (the CLI's rule). See :func:`refuse`.
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

from agentkit.acp_server.errors import request_error
from agentkit.acp_server.sessions import AcpAgentServer
from agentkit.acp_server.stdio import GuardedStdio, claim_stdout, open_stdio
from agentkit.agent import Agent
from agentkit.errors import AgentkitError
from agentkit.models.spec import parse_model_spec, resolve_model_spec

__all__ = ["refuse", "run_server", "serve_stdio"]

log = logging.getLogger("agentkit.acp")

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def serve_stdio(
    agent_id: str,
    *,
    data_dir: Path | str | None = None,
    model: str | None = None,
    store: str | None = None,
    replay: bool | None = None,
) -> None:
    """What ``agentkit acp`` runs (*replay*: None takes the agent's ``acp.replay``); returns
    when the client has gone. A startup error is answered to the client (:func:`refuse`) and
    then raised."""
    try:
        agent = Agent.open(agent_id, data_dir=data_dir, model=model, store=store)
        parse_model_spec(resolve_model_spec(model, agent.config.model))  # a typo fails here
        _ = agent.model  # a model that cannot be opened (no such GGUF, a missing extra)
    except AgentkitError as error:
        protocol_out = claim_stdout()
        asyncio.run(_refuse(error, protocol_out))
        raise
    protocol_out = claim_stdout()
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format="agentkit acp %(levelname)s %(name)s: %(message)s",
        force=True,
    )
    log.info("serving %s (engine %s) on stdio", agent.id, agent.config.engine)
    replays = agent.config.acp.replay if replay is None else replay
    asyncio.run(_serve(agent, protocol_out, replays))


async def _refuse(error: AgentkitError, protocol_out: BinaryIO) -> None:
    transport = await open_stdio(protocol_out)
    try:
        await refuse(transport, error)
    finally:
        await transport.close()


async def refuse(transport: GuardedStdio, error: AgentkitError) -> int:
    """The server that could not start: answer each request with the startup *error* until
    ``initialize`` has been answered or input ends; the number of requests answered."""
    failure = request_error(error)
    data = failure.data if isinstance(failure.data, dict) else {}
    body = {"code": failure.code, "message": str(error), "data": {**data, "message": str(error)}}
    answered = 0
    while (message := await transport.receive()) is not None:
        if "id" not in message or "method" not in message:
            continue  # a notification or a stray response: nothing to answer
        with contextlib.suppress(ConnectionError):
            await transport.send({"jsonrpc": "2.0", "id": message["id"], "error": body})
        answered += 1
        if message["method"] == "initialize":
            break
    log.info("startup failed (%s); answered %d request(s)", error, answered)
    return answered


async def _serve(agent: Agent, protocol_out: BinaryIO, replay: bool) -> None:
    transport = await open_stdio(protocol_out)
    await run_server(agent, transport, replay=replay)


async def run_server(agent: Agent, transport: GuardedStdio, *, replay: bool = True) -> None:
    """Serve *agent* on *transport* until end of input or a stop signal."""
    server = AcpAgentServer(agent, replay=replay)
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
