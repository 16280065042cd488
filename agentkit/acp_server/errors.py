"""One table from agentkit's exceptions to JSON-RPC errors, so no handler invents its own.

A request that is refused before anything is written (an unknown session, a busy
conversation, an invalid prompt) gets a JSON-RPC error; a failure inside a turn that has
started is reported in the turn itself (an agent message and stop reason ``end_turn``, see
:mod:`agentkit.acp_server.turns`). ``data`` always carries agentkit's stable ``code`` and a
sentence a person can act on.
"""

from __future__ import annotations

import logging
from typing import Final

import acp

from agentkit.errors import (
    AgentkitError,
    ConfigError,
    ConversationBusyError,
    ConversationNotFoundError,
    MissingExtraError,
    ModelError,
    ModelSpecError,
    StoreError,
    UsageError,
)

__all__ = ["BUSY", "SESSION_NOT_FOUND", "request_error", "session_not_found"]

log = logging.getLogger("agentkit.acp")

#: ACP's own code for a missing resource (here: a session)
SESSION_NOT_FOUND: Final = -32002
#: a server-defined code (JSON-RPC reserves -32000..-32099 for them): retry later
BUSY: Final = -32001


def session_not_found(session_id: str) -> acp.RequestError:
    return acp.RequestError(
        SESSION_NOT_FOUND,
        "Session not found",
        {
            "code": "session_not_found",
            "sessionId": session_id,
            "message": f"no session {session_id!r}: session/new starts one, "
            "session/list names the ones session/load can open",
        },
    )


# (exception type, JSON-RPC code, message, agentkit code): the first matching row wins, so
# subclasses come first (ModelSpecError, MissingExtraError and ConfigError are UsageErrors,
# but the server's configuration or installation is at fault, not the request)
_TABLE: Final[tuple[tuple[type[BaseException], int, str, str], ...]] = (
    (MissingExtraError, -32603, "Internal error", "extra_missing"),
    (ModelSpecError, -32603, "Internal error", "agent_misconfigured"),
    (ConfigError, -32603, "Internal error", "agent_misconfigured"),
    (UsageError, -32602, "Invalid params", "invalid_request"),
    (ModelError, -32603, "Internal error", "model_error"),
    (StoreError, -32603, "Internal error", "store_error"),
    (AgentkitError, -32603, "Internal error", "agentkit_error"),
)


def request_error(error: BaseException) -> acp.RequestError:
    """The JSON-RPC error for an exception raised before a turn started."""
    if isinstance(error, acp.RequestError):
        return error
    if isinstance(error, ConversationNotFoundError):
        return session_not_found(error.conversation_id)
    if isinstance(error, ConversationBusyError):
        return acp.RequestError(
            BUSY,
            "Conversation busy",
            {
                "code": "conversation_busy",
                "message": f"{error}. Another client (agentkit serve, agentkit chat, another "
                "editor) is in a turn of this conversation; retry when it has finished.",
            },
        )
    for kind, code, message, name in _TABLE:
        if isinstance(error, kind):
            return acp.RequestError(code, message, {"code": name, "message": str(error)})
    log.error("unexpected error", exc_info=error)
    return acp.RequestError.internal_error(
        {
            "code": "internal_error",
            "message": f"{type(error).__name__}: {error} (the agent's stderr has the details)",
        }
    )
