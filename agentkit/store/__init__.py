"""Conversation stores: the interface, the crash-safe file store, the in-memory reference."""

from agentkit.store.base import ConversationKey, ConversationStore, Problem, VerifyReport
from agentkit.store.files import FileConversationStore
from agentkit.store.memory import InMemoryConversationStore

__all__ = [
    "ConversationKey",
    "ConversationStore",
    "FileConversationStore",
    "InMemoryConversationStore",
    "Problem",
    "VerifyReport",
]
