"""Any agentkit agent as an Agent Client Protocol agent on stdio (``agentkit acp AGENT``).

An edge, like :mod:`agentkit.api`: it uses the public :class:`~agentkit.agent.Agent` API and
the agent side of the ``agent-client-protocol`` package; nothing in the core imports it.
Editors and notebooks that speak ACP (Zed, JetBrains, marimo, jupyter-ai) get sessions that
are agentkit conversations, plan updates, permission requests for the planner's consent,
session load and cancel. Modules, in the order a message meets them:

* :mod:`~agentkit.acp_server.frames` — the verdict on one inbound line (JSON-RPC 2.0 checks
  the library does not make);
* :mod:`~agentkit.acp_server.stdio` — the private stdout and the guarded line reader;
* :mod:`~agentkit.acp_server.sessions` — sessions = conversations, the ACP methods;
* :mod:`~agentkit.acp_server.turns` — one prompt: turns, consent round trips, cancel;
* :mod:`~agentkit.acp_server.updates` — agentkit values as ACP's types;
* :mod:`~agentkit.acp_server.errors` — agentkit exceptions as JSON-RPC errors;
* :mod:`~agentkit.acp_server.server` — the process: start, serve, shut down.
"""

from agentkit._extras import missing

try:
    import acp  # noqa: F401
except ImportError as _missing:
    raise missing("acp", "the ACP agent (agentkit acp)", _missing) from _missing

from agentkit.acp_server.server import run_server, serve_stdio
from agentkit.acp_server.sessions import AcpAgentServer

__all__ = ["AcpAgentServer", "run_server", "serve_stdio"]
