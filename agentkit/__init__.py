"""agentkit: build, run and study conversational planning agents.

The public surface is what ``__all__`` lists; modules starting with ``_`` are internal.
Importing agentkit loads no Jupyter, widget, web or dataframe library — and nothing else
either: each public name is imported on first use (PEP 562), so ``import agentkit`` costs
a few milliseconds and a command that needs only the errors never builds the planner's
pydantic models.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentkit.agent import (
        Agent,
        TurnResult,
    )
    from agentkit.agent_folder import (
        AgentFolder,
        list_agent_ids,
        resolve_data_dir,
    )
    from agentkit.config import (
        AgentConfig,
        CompressionConfig,
        PlannerConfig,
    )
    from agentkit.errors import (
        AgentkitError,
        AgentNotFoundError,
        ConfigError,
        ConversationBusyError,
        ConversationNotFoundError,
        CorruptJournalError,
        InvalidIdError,
        MissingExtraError,
        ModelError,
        ModelRequestsBlockedError,
        ModelSpecError,
        StoreError,
        StructuredOutputError,
        TurnNotFinishedError,
        TurnNotFoundError,
        UsageError,
    )
    from agentkit.events import (
        AgentEvent,
    )
    from agentkit.ids import (
        new_conversation_id,
        new_message_id,
    )
    from agentkit.memory import (
        ExecutionState,
        TaskState,
        Versioned,
    )
    from agentkit.models import (
        ChatModel,
        FunctionModel,
        ModelRequest,
        ScriptedModel,
        ScriptedSessionBackend,
        SessionBackend,
        SessionModel,
        create_model,
    )
    from agentkit.planning.approvals import (
        Decision,
    )
    from agentkit.planning.state import (
        UserMessage,
    )
    from agentkit.replays import (
        replay,
    )
    from agentkit.sessions import (
        SessionPool,
    )
    from agentkit.store import (
        ConversationKey,
        ConversationStore,
        FileConversationStore,
        InMemoryConversationStore,
        VerifyReport,
        VersionConflictError,
    )
    from agentkit.tools import (
        tool,
    )
    from agentkit.types import (
        Conversation,
        ConversationMeta,
        ConversationStats,
        ForkOrigin,
        Message,
        ToolCallRecord,
    )

__version__ = "0.1.0"

#: public name -> the module that defines it (imported on first access)
_HOMES: dict[str, str] = {
    "Agent": "agentkit.agent",
    "AgentConfig": "agentkit.config",
    "AgentEvent": "agentkit.events",
    "AgentFolder": "agentkit.agent_folder",
    "AgentNotFoundError": "agentkit.errors",
    "AgentkitError": "agentkit.errors",
    "ChatModel": "agentkit.models",
    "CompressionConfig": "agentkit.config",
    "ConfigError": "agentkit.errors",
    "Conversation": "agentkit.types",
    "ConversationBusyError": "agentkit.errors",
    "ConversationKey": "agentkit.store",
    "ConversationMeta": "agentkit.types",
    "ConversationNotFoundError": "agentkit.errors",
    "ConversationStats": "agentkit.types",
    "ConversationStore": "agentkit.store",
    "CorruptJournalError": "agentkit.errors",
    "Decision": "agentkit.planning.approvals",
    "ExecutionState": "agentkit.memory",
    "FileConversationStore": "agentkit.store",
    "ForkOrigin": "agentkit.types",
    "FunctionModel": "agentkit.models",
    "InMemoryConversationStore": "agentkit.store",
    "InvalidIdError": "agentkit.errors",
    "Message": "agentkit.types",
    "MissingExtraError": "agentkit.errors",
    "ModelError": "agentkit.errors",
    "ModelRequest": "agentkit.models",
    "ModelRequestsBlockedError": "agentkit.errors",
    "ModelSpecError": "agentkit.errors",
    "PlannerConfig": "agentkit.config",
    "ScriptedModel": "agentkit.models",
    "ScriptedSessionBackend": "agentkit.models",
    "SessionBackend": "agentkit.models",
    "SessionModel": "agentkit.models",
    "SessionPool": "agentkit.sessions",
    "StoreError": "agentkit.errors",
    "StructuredOutputError": "agentkit.errors",
    "TaskState": "agentkit.memory",
    "ToolCallRecord": "agentkit.types",
    "TurnNotFinishedError": "agentkit.errors",
    "TurnNotFoundError": "agentkit.errors",
    "TurnResult": "agentkit.agent",
    "UsageError": "agentkit.errors",
    "UserMessage": "agentkit.planning.state",
    "VerifyReport": "agentkit.store",
    "VersionConflictError": "agentkit.store",
    "Versioned": "agentkit.memory",
    "create_model": "agentkit.models",
    "list_agent_ids": "agentkit.agent_folder",
    "new_conversation_id": "agentkit.ids",
    "new_message_id": "agentkit.ids",
    "replay": "agentkit.replays",
    "resolve_data_dir": "agentkit.agent_folder",
    "tool": "agentkit.tools",
}

__all__ = [
    "Agent",
    "AgentConfig",
    "AgentEvent",
    "AgentFolder",
    "AgentNotFoundError",
    "AgentkitError",
    "ChatModel",
    "CompressionConfig",
    "ConfigError",
    "Conversation",
    "ConversationBusyError",
    "ConversationKey",
    "ConversationMeta",
    "ConversationNotFoundError",
    "ConversationStats",
    "ConversationStore",
    "CorruptJournalError",
    "Decision",
    "ExecutionState",
    "FileConversationStore",
    "ForkOrigin",
    "FunctionModel",
    "InMemoryConversationStore",
    "InvalidIdError",
    "Message",
    "MissingExtraError",
    "ModelError",
    "ModelRequest",
    "ModelRequestsBlockedError",
    "ModelSpecError",
    "PlannerConfig",
    "ScriptedModel",
    "ScriptedSessionBackend",
    "SessionBackend",
    "SessionModel",
    "SessionPool",
    "StoreError",
    "StructuredOutputError",
    "TaskState",
    "ToolCallRecord",
    "TurnNotFinishedError",
    "TurnNotFoundError",
    "TurnResult",
    "UsageError",
    "UserMessage",
    "VerifyReport",
    "VersionConflictError",
    "Versioned",
    "create_model",
    "list_agent_ids",
    "new_conversation_id",
    "new_message_id",
    "replay",
    "resolve_data_dir",
    "tool",
]


def __getattr__(name: str) -> Any:  # noqa: ANN401 - any public object
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'agentkit' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # the next access is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
