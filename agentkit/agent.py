"""``Agent``: an agent folder plus its conversations (seed 16.4, in Python names).

The Agent wires collaborators together; it does not store or render anything itself. The store
is injected (``Agent.open(..., store=InMemoryConversationStore())`` in tests), and the data root
is an argument, so several agents and data roots can live in one process.
"""

from __future__ import annotations

from pathlib import Path

from agentkit.config import AgentConfig
from agentkit.errors import UsageError
from agentkit.ids import check_id, new_conversation_id
from agentkit.store import ConversationKey, ConversationStore, FileConversationStore
from agentkit.types import Conversation, ConversationMeta, Message
from agentkit.workspace import AgentFolder, resolve_data_dir

__all__ = ["Agent"]

DEFAULT_TITLE = "New conversation"
MAX_TITLE_LENGTH = 200


class Agent:
    """One agent: its folder (prompts, config) and its conversations."""

    def __init__(self, folder: AgentFolder, store: ConversationStore) -> None:
        self.folder = folder
        self.store = store

    @classmethod
    def open(
        cls,
        agent_id: str,
        *,
        data_dir: Path | str | None = None,
        store: ConversationStore | None = None,
    ) -> Agent:
        """Load ``{data_dir}/agents/{agent_id}``; the store defaults to the file store there.

        Opening recovers the agent's conversations that a crash left inconsistent (a cheap
        size check per conversation; only damaged ones are rebuilt).
        """
        root = resolve_data_dir(data_dir)
        folder = AgentFolder.load(root, agent_id)
        store = store if store is not None else FileConversationStore(root)
        store.recover(folder.agent_id)
        return cls(folder, store)

    @property
    def id(self) -> str:
        return self.folder.agent_id

    @property
    def config(self) -> AgentConfig:
        return self.folder.config

    def system_prompt(self) -> str:
        return self.folder.system_prompt()

    def _key(self, conversation_id: str) -> ConversationKey:
        return ConversationKey(self.id, conversation_id)

    # -- seed 16.4 --------------------------------------------------------------------------

    def create_conversation(self, title: str = DEFAULT_TITLE) -> ConversationMeta:
        """Start an empty conversation with a fresh ``conv-…`` id."""
        title = " ".join(title.split()) or DEFAULT_TITLE
        if len(title) > MAX_TITLE_LENGTH:
            raise UsageError(f"a title has at most {MAX_TITLE_LENGTH} characters")
        return self.store.create(self._key(new_conversation_id()), title)

    def list_conversations(self) -> list[ConversationMeta]:
        """Every conversation's metadata, most recently updated first."""
        return self.store.conversations(self.id)

    def load_conversation_history(self, conversation_id: str) -> list[Message]:
        """The conversation's messages, oldest first."""
        return self.store.messages(self._key(conversation_id))

    def load_recent_messages(self, conversation_id: str, limit: int) -> list[Message]:
        """The last *limit* messages, oldest first; reads only the end of the history."""
        return self.store.recent(self._key(conversation_id), limit)

    def append_message(self, conversation_id: str, message: Message) -> ConversationMeta:
        """Append durably: the turn's ``messages.log``, ``history.json`` and ``meta.json``."""
        return self.store.append(self._key(conversation_id), message)

    def get_conversation(self, conversation_id: str) -> Conversation:
        """Metadata and messages together."""
        key = self._key(conversation_id)
        messages = self.store.messages(key)
        return Conversation(meta=self.store.meta(key), messages=tuple(messages))

    def delete_conversation(self, conversation_id: str) -> None:
        self.store.delete(self._key(conversation_id))

    def turn_log(self, conversation_id: str, message_id: str) -> str:
        """The text of ``{messageId}/messages.log``."""
        check_id(message_id, "message")
        return self.store.turn_log(self._key(conversation_id), message_id)
