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
from agentkit.models.scripted import ScriptedModel
from agentkit.models.spec import ModelSpec, create_model, parse_model_spec, resolve_model_spec

__all__ = [
    "ChatMessage",
    "ChatModel",
    "Completion",
    "ModelEvent",
    "ModelSpec",
    "Purpose",
    "ScriptedModel",
    "SessionBackend",
    "SessionModel",
    "create_model",
    "parse_model_spec",
    "resolve_model_spec",
    "validate_structured",
]
