"""Stores: conversations (files + in-memory reference) and system_config (SQLite + in-memory).

The PostgreSQL pair (the ``postgres`` extra) is imported from its modules, so that importing
this package never needs psycopg: ``agentkit.store.postgres.PostgresConversationStore`` and
``agentkit.store.postgres_kv.PostgresConfigStore``; ``agentkit.store.choice`` opens the
stores a ``--store`` spec names."""

from agentkit.store._checkpoint import TurnCheckpoint
from agentkit.store._offload import off_loop
from agentkit.store.base import (
    ConversationKey,
    ConversationStore,
    Problem,
    StaleWriterError,
    StoreUnavailableError,
    VerifyReport,
)
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
    "StaleWriterError",
    "StoreUnavailableError",
    "TurnCheckpoint",
    "VerifyReport",
    "VersionConflictError",
    "off_loop",
]
