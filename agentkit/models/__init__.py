"""Model backends behind two small interfaces, chosen by a spec string (see ``spec``).

Backends (llama, openai, acp, claude-cli) are imported only when a spec names them.
"""

from agentkit.models.base import (
    ChatMessage,
    ChatModel,
    Completion,
    ModelEvent,
    Purpose,
    SessionBackend,
    SessionModel,
    validate_structured,
)
from agentkit.models.function import FunctionModel, tool_call
from agentkit.models.request import ModelRequest
from agentkit.models.scripted import ScriptedModel
from agentkit.models.scripted_session import (
    ScriptedSession,
    ScriptedSessionBackend,
    SessionRequest,
)
from agentkit.models.spec import ModelSpec, create_model, parse_model_spec, resolve_model_spec

__all__ = [
    "ChatMessage",
    "ChatModel",
    "Completion",
    "FunctionModel",
    "ModelEvent",
    "ModelRequest",
    "ModelSpec",
    "Purpose",
    "ScriptedModel",
    "ScriptedSession",
    "ScriptedSessionBackend",
    "SessionBackend",
    "SessionModel",
    "SessionRequest",
    "create_model",
    "parse_model_spec",
    "resolve_model_spec",
    "tool_call",
    "validate_structured",
]
