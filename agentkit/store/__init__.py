"""Stores: conversations (files + in-memory reference) and system_config (SQLite + in-memory)."""

from agentkit.store._checkpoint import TurnCheckpoint
from agentkit.store.base import ConversationKey, ConversationStore, Problem, VerifyReport
from agentkit.store.files import FileConversationStore
from agentkit.store.kv import ConfigEntry, ConfigStore, InMemoryConfigStore, VersionConflictError
from agentkit.store.memory import InMemoryConversationStore
from agentkit.store.sqlite_kv import SqliteConfigStore

__all__ = [
    "ConfigEntry",
    "ConfigStore",
    "ConversationKey",
    "ConversationStore",
    "FileConversationStore",
    "InMemoryConfigStore",
    "InMemoryConversationStore",
    "Problem",
    "SqliteConfigStore",
    "TurnCheckpoint",
    "VerifyReport",
    "VersionConflictError",
]
