"""agentkit: build, run and study conversational planning agents.

The public surface is what ``__all__`` lists; modules starting with ``_`` are internal.
Importing agentkit loads no Jupyter, widget, web or dataframe library.
"""

from agentkit.agent import Agent, TurnResult
from agentkit.config import AgentConfig, CompressionConfig, PlannerConfig
from agentkit.errors import (
    AgentkitError,
    AgentNotFoundError,
    ConfigError,
    ConversationBusyError,
    ConversationNotFoundError,
    CorruptJournalError,
    InvalidIdError,
    ModelError,
    ModelSpecError,
    StoreError,
    StructuredOutputError,
    UsageError,
)
from agentkit.events import AgentEvent
from agentkit.ids import new_conversation_id, new_message_id
from agentkit.memory import ExecutionState, TaskState, Versioned
from agentkit.models import ChatModel, ScriptedModel, SessionBackend, SessionModel, create_model
from agentkit.sessions import SessionPool
from agentkit.store import (
    ConversationKey,
    ConversationStore,
    FileConversationStore,
    InMemoryConversationStore,
    VerifyReport,
    VersionConflictError,
)
from agentkit.tools import tool
from agentkit.types import (
    Conversation,
    ConversationMeta,
    ConversationStats,
    Message,
    ToolCallRecord,
)
from agentkit.workspace import AgentFolder, list_agent_ids, resolve_data_dir

__version__ = "0.1.0"

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
    "ExecutionState",
    "FileConversationStore",
    "InMemoryConversationStore",
    "InvalidIdError",
    "Message",
    "ModelError",
    "ModelSpecError",
    "PlannerConfig",
    "ScriptedModel",
    "SessionBackend",
    "SessionModel",
    "SessionPool",
    "StoreError",
    "StructuredOutputError",
    "TaskState",
    "ToolCallRecord",
    "TurnResult",
    "UsageError",
    "VerifyReport",
    "VersionConflictError",
    "Versioned",
    "create_model",
    "list_agent_ids",
    "new_conversation_id",
    "new_message_id",
    "resolve_data_dir",
    "tool",
]
